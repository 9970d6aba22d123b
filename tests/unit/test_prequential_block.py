"""Per-event prequential predictions of whole blocks (models/prequential_block.py): equal to
predict-then-learn event by event, for every model that supports it; the others keep the
mini-batch path; replay uses large blocks only while every model predicts per event."""

import gzip
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streambayes.evaluate.prequential import Prequential
from streambayes.models import make_model
from streambayes.models.prequential_block import predict_learn, supports
from tests.unit.test_replay import shared_data

WORDS = ["free", "prize", "win", "cash", "lunch", "noon", "meeting", "today", "a", "b", "c", "d"]
# (model, params): every configuration that predicts per event in blocks
EXACT = [("nb", {}), ("mnb", {}), ("cnb", {}), ("mnb", {"alpha": 0.5}), ("mnb", {"prior_alpha": 1.0}),
         ("mnb", {"vocab_size": 64}), ("cnb", {"alpha": 0.25}), ("mnb", {"alpha": 0.0}),
         ("mnb", {"class_prior": {"x": 0.2, "y": 0.3, "z": 0.5}}), ("nb", {"n_features": 16})]


def per_event(name: str, params: dict, xs: list, ys: list, ws: list) -> list[dict]:
    """``predict_proba_one`` then ``learn_one``, event by event: the reference."""
    model, out = make_model(name, **params), []
    for x, y, w in zip(xs, ys, ws, strict=True):
        out.append(model.predict_proba_one(x))
        model.learn_one(x, y, w)
    return out


def by_blocks(name: str, params: dict, xs: list, ys: list, ws: list, sizes: list[int]) -> list[dict]:
    model, out, start = make_model(name, **params), [], 0
    for size in sizes:
        stop = min(start + size, len(xs))
        if stop <= start:
            break
        batch = model.featurize(xs[start:stop])
        assert supports(model, batch)
        parts = predict_learn(model, batch, ys[start:stop], ws[start:stop])
        assert parts is not None and parts[0][0] == 0 and parts[-1][1] == stop - start
        for a, b, classes, log_proba in parts:
            out += [dict(zip(classes, np.exp(row).tolist(), strict=True)) for row in log_proba[: b - a]]
        start = stop
    return out


def assert_same(got: list[dict], want: list[dict], tol: float = 1e-9) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.keys() == w.keys(), i
        if any(math.isnan(v) for v in w.values()):  # every event learned so far weighs 0: the
            continue  # per-event fast path gives NaN, the batch path (and blocks) a uniform posterior
        for c in w:
            assert math.isclose(g[c], w[c], rel_tol=tol, abs_tol=tol), (i, c, g[c], w[c])


events = st.lists(st.tuples(st.lists(st.sampled_from(WORDS), max_size=6),
                            st.sampled_from(["x", "y", "z"]),
                            st.sampled_from([1.0, 1.0, 1.0, 0.0, 0.5, 2.5])), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(stream=events, sizes=st.lists(st.integers(1, 40), min_size=1, max_size=8),
       config=st.sampled_from(EXACT))
def test_blocks_equal_event_by_event_predict_then_learn(stream, sizes, config):
    name, params = config
    xs = [{"text": " ".join(words)} for words, _, _ in stream]
    ys = [y for _, y, _ in stream]
    ws = [w for _, _, w in stream]
    sizes = sizes + [len(xs)]  # the rest in one block
    assert_same(by_blocks(name, params, xs, ys, ws, sizes), per_event(name, params, xs, ys, ws))


@settings(max_examples=30, deadline=None)
@given(stream=events, size=st.integers(1, 64))
def test_folded_fields_of_mnb_too(stream, size):
    """``mnb`` folds categorical fields and numeric counts into its tokens: still per event."""
    xs = [{"text": " ".join(words), "lang": "en" if len(words) % 2 else "de", "n": len(words) % 3}
          for words, _, _ in stream]
    ys = [y for _, y, _ in stream]
    ws = [w for _, _, w in stream]
    sizes = list(range(size, len(xs) + size, size))
    assert_same(by_blocks("mnb", {}, xs, ys, ws, sizes), per_event("mnb", {}, xs, ys, ws))


def test_the_learned_state_equals_learn_many():
    xs = [{"text": " ".join(WORDS[i % 7: i % 7 + 1 + i % 5])} for i in range(300)]
    ys = ["spam" if i % 3 == 0 else "ham" for i in range(300)]
    for name in ("nb", "mnb", "cnb"):
        block, whole = make_model(name), make_model(name)
        for start in range(0, 300, 37):
            predict_learn(block, block.featurize(xs[start:start + 37]), ys[start:start + 37], None)
        whole.learn_many(xs, ys)
        a, b = block.to_state(), whole.to_state()
        assert a["n_events"] == b["n_events"] == 300
        assert np.array_equal(a["class_counts"], b["class_counts"])
        for key in ("cols", "counts", "totals"):
            assert np.array_equal(a["components"][0][key], b["components"][0][key])
        assert a["components"][0]["auto_alpha"] == b["components"][0]["auto_alpha"]


@pytest.mark.parametrize("name, params, fields", [
    ("bnb", {}, False), ("mnb", {"decay": 0.99}, False), ("mnb", {"tf": "log"}, False),
    ("mnb", {"m": 2.0}, False), ("cnb", {"norm": True}, False), ("nb", {}, True), ("gnb", {}, True),
])
def test_models_without_the_exact_path_are_refused(name, params, fields):
    model = make_model(name, **params)
    x = {"text": "free prize", **({"n_links": 3, "tld": "biz"} if fields else {})}
    assert not supports(model, model.featurize([x]))


def test_a_block_past_a_bound_leaves_the_model_untouched():
    model = make_model("mnb", max_classes=2)
    model.learn_many([{"text": "a"}, {"text": "b"}], ["x", "y"])
    before = model.to_state()
    assert predict_learn(model, model.featurize([{"text": "c"}] * 2), ["x", "z"], None) is None
    assert model.to_state()["n_events"] == before["n_events"] == 2


def sms(n: int) -> tuple[list[dict], list[str]]:
    path = shared_data() / "sms_spam_collection" / "SMSSpamCollection"
    rows = [line.split("\t", 1) for line in path.read_text(encoding="utf-8").splitlines()[:n]]
    return [{"text": t} for _, t in rows], [y for y, _ in rows]


def enron(n: int) -> tuple[list[dict], list[str]]:
    xs, ys = [], []
    with gzip.open(shared_data() / "enron_spam_dev" / "enron1-3.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            mail = json.loads(line)
            xs.append({"text": mail["text"]})
            ys.append(mail["label"])
            if len(xs) == n:
                break
    return xs, ys


@pytest.mark.parametrize("corpus, n, size", [(sms, 700, 256), (enron, 300, 128)])
@pytest.mark.parametrize("name", ["nb", "cnb"])
def test_real_mail_and_sms(corpus, n, size, name):
    xs, ys = corpus(n)
    ws = [1.0] * len(xs)
    assert_same(by_blocks(name, {}, xs, ys, ws, [size] * (n // size + 1)), per_event(name, {}, xs, ys, ws))


def scored(run: Prequential, name: str) -> tuple[np.ndarray, np.ndarray]:
    score = run.scores[name]
    return np.array(score.p_top), np.array(score.p_positive)


def test_prequential_scores_blocks_as_batches_of_one():
    """The evaluation of blocks of 64 equals the evaluation in mini-batches of one event."""
    xs, ys = sms(400)
    blocks, ones = Prequential({"nb": make_model("nb"), "cnb": make_model("cnb")}), \
        Prequential({"nb": make_model("nb"), "cnb": make_model("cnb")}, per_event=False)
    for start in range(0, 400, 64):
        blocks.step(xs[start:start + 64], ys[start:start + 64])
    for i in range(400):
        ones.step(xs[i:i + 1], ys[i:i + 1])
    for name in ("nb", "cnb"):
        for got, want in zip(scored(blocks, name), scored(ones, name), strict=True):
            assert np.allclose(got, want, rtol=1e-9, atol=1e-12)
        a, b = blocks.summary()[name], ones.summary()[name]
        assert (a["events"], a["cold"], a["accuracy"]) == (b["events"], b["cold"], b["accuracy"])
        assert math.isclose(a["log_loss"], b["log_loss"], rel_tol=1e-9)
        assert blocks.per_event_events[name] == 400 and not blocks.batched


def test_a_model_without_it_keeps_the_batch_path_beside_one_with_it():
    xs, ys = sms(200)
    run = Prequential({"nb": make_model("nb"), "bnb": make_model("bnb")})
    run.step(xs[:100], ys[:100])
    assert run.batched == {"bnb"} and run.per_event_events == {"nb": 100, "bnb": 0}
    assert run.summary()["bnb"]["cold"] == 100  # predicted with the model of the batch's start


def test_replay_grows_to_large_blocks_only_while_every_model_predicts_per_event():
    from streambayes.runtime.loops.replay import BATCH_PATH_SIZE, DEFAULT_BATCH_SIZE, replay
    from streambayes.runtime.records.decode import Decoder
    from streambayes.runtime.records.sinks import MemorySink
    from streambayes.runtime.records.sources import MemorySource

    values = [f"{'spam' if i % 5 == 0 else 'ham'}\tmessage {i % 7}" for i in range(3000)]
    for names, largest in ((["nb", "cnb"], DEFAULT_BATCH_SIZE), (["nb", "bnb"], BATCH_PATH_SIZE)):
        result = replay(MemorySource({"m": values}), Decoder("tsv"),
                        {n: make_model(n) for n in names}, MemorySink())
        assert result.events == 3000 and result.largest == largest
        assert result.metrics()["batching"]["events_predicted_per_event"]["nb"] == 3000


def test_a_block_past_the_memory_bound_is_cut_into_parts(monkeypatch):
    """At most PART_CELLS classes x token entries per part: more parts, the same predictions."""
    from streambayes.models import prequential_block

    xs, ys = sms(300)
    ws = [1.0] * len(xs)
    want = per_event("nb", {}, xs, ys, ws)
    monkeypatch.setattr(prequential_block, "PART_CELLS", 90)  # about 15 SMS per part (3 classes)
    model = make_model("nb")
    for _ in range(300):  # past the refit points of the first events
        model.learn_one({"text": "warm up"}, "ham")
    parts = predict_learn(model, model.featurize(xs[:200]), ys[:200], ws[:200])
    assert len(parts) > 5 and all(b - a <= 30 for a, b, _, _ in parts)
    assert_same(by_blocks("nb", {}, xs, ys, ws, [300]), want)
