"""Batched clues (the predictor's path) equal clues_one on a real SMS batch, ties included."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streambayes.features import Batch
from streambayes.models import make_model

from .test_cli import SMS


def _sms(n):
    rows = [line.rstrip("\r\n").partition("\t") for line in SMS.read_text(encoding="utf-8").splitlines()]
    rows = [(label, text) for label, _, text in rows if text][:n]
    xs = [{"text": text, "caps": str(sum(c.isupper() for c in text) > 10).lower(),
           "length": float(len(text))} if i % 3 == 0 else {"text": text} for i, (_, text) in enumerate(rows)]
    return xs, [label for label, _ in rows]


def _tied_at_k(model, x, k):
    sizes = sorted((abs(v) for name, v in model.log_odds_terms(x) if name != "prior"), reverse=True)
    return len(sizes) > k and sizes[k - 1] == sizes[k]


@pytest.mark.parametrize("name", ["mnb", "bnb", "cnb", "nb", "catnb", "gnb"])
def test_batched_clues_equal_clues_one_on_a_real_batch(name):
    xs, ys = _sms(3500)
    model = make_model(name)
    model.learn_many(xs[:3000], ys[:3000])
    batch = xs[3000:3500]
    for k in (1, 5):
        assert model.clues_many(batch, k) == [model.clues_one(x, k) for x in batch]
    if name in ("mnb", "cnb"):  # words seen once: equal terms, cut at the k-th clue
        assert sum(_tied_at_k(model, x, 5) for x in batch) >= 10


def test_token_clues_of_a_batch_are_not_scored_row_by_row(monkeypatch):
    xs, ys = _sms(1200)
    model = make_model("mnb")
    model.learn_many(xs[:1000], ys[:1000])
    want = [model.clues_one(x, 5) for x in xs[1000:]]
    monkeypatch.setattr(Batch, "slice", lambda *a: pytest.fail("row-by-row clues"))
    assert model.clues_many(xs[1000:], 5) == want


def test_tied_clues_are_ordered_by_name():
    model = make_model("mnb")
    model.learn_many([{"text": "zeta alpha"}, {"text": "other words"}], ["spam", "ham"])
    clues = model.clues_one({"text": "zeta alpha"}, 2)
    assert [c[0] for c in clues] == ["tok:alpha", "tok:zeta"] and clues[0][1] == clues[1][1]
    assert model.clues_many([{"text": "zeta alpha"}, {"text": "alpha zeta"}], 2) == [clues, clues]
    assert np.isfinite(clues[0][1])


def test_clues_after_predicting_the_same_dicts_do_not_featurize_again():
    import pickle

    xs, ys = _sms(600)
    model = make_model("nb")
    model.learn_many(xs[:500], ys[:500])
    batch = [dict(x, text=x["text"] + " zzmarker") for x in xs[500:]]
    calls = []
    featurize = model._featurizer.featurize
    model._featurizer.featurize = lambda xs, **kw: calls.append(len(xs)) or featurize(xs, **kw)
    model.predict_log_proba_many(model.featurize(batch))
    clues = model.clues_many(batch, 3)
    assert calls == [100]
    assert model.clues_many(list(batch), 3) == clues and calls == [100]  # the same dicts
    copies = [dict(x) for x in batch]
    assert model.clues_many(copies, 3) == clues and calls == [100, 100]  # other dicts: featurized
    del model._featurizer.featurize
    assert "_last_batch" not in vars(pickle.loads(pickle.dumps(model)))  # never pickled


def test_clues_leave_the_garbage_collector_as_they_found_it():
    import gc

    xs, ys = _sms(300)
    model = make_model("mnb")
    model.learn_many(xs[:200], ys[:200])
    assert gc.isenabled()
    model.clues_many(xs[200:], 5)
    assert gc.isenabled()
    gc.disable()
    try:
        model.clues_many(xs[200:], 5)
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("name", ["mnb", "bnb", "cnb", "nb"])
def test_a_batch_with_no_known_word_has_clues_like_clues_one(name):
    """Found by bench/kafka_pipeline.py: a batch none of whose words the model knows (here: empty
    texts and unseen words) raised IndexError and its posteriors went out without clues."""
    xs, ys = _sms(400)
    model = make_model(name)
    model.learn_many(xs, ys)
    batch = [{"text": ""}, {"text": "qqqzzz xxyyzz"}, {"text": "   "}]
    assert model.clues_many(batch, 5) == [model.clues_one(x, 5) for x in batch]
    assert model.clues_many(batch[:1], 3) == [model.clues_one(batch[0], 3)]


@pytest.mark.parametrize("name", ["mnb", "nb", "catnb", "gnb"])
def test_predictions_and_clues_from_one_scoring_equal_the_two_calls(name):
    xs, ys = _sms(1500)
    model = make_model(name)
    model.learn_many(xs[:1200], ys[:1200])
    batch = xs[1200:]
    want_proba, want_clues = model.predict_log_proba_many(batch), model.clues_many(batch, 5)
    log_proba, clues = model.predict_log_proba_and_clues_many(model.featurize(batch), 5)
    assert np.array_equal(log_proba, want_proba) and clues == want_clues
    one = make_model(name)
    one.learn_many(xs[:10], ["ham"] * 10)  # one class: no clues, as clues_many gives
    assert one.predict_log_proba_and_clues_many(batch[:3], 5)[1] == [[], [], []]


def _predictor(tmp_path, lines, clues):
    from streambayes.runtime.loops.predict import ModelWatcher, PredictLoop
    from streambayes.runtime.loops.shards import open_stores
    from streambayes.runtime.records.decode import Decoder
    from streambayes.runtime.records.sinks import MemorySink
    from streambayes.runtime.records.sources import MemorySource

    sink = MemorySink()
    loop = PredictLoop(MemorySource({"in": lines}), Decoder("jsonl", require_label=False),
                       ModelWatcher(open_stores([tmp_path])), (sink, "out"), batch_size=100,
                       clues=clues, stop_at_end=True)
    return loop, sink


def test_the_predictor_scores_each_batch_once_for_posteriors_and_clues(tmp_path, monkeypatch,
                                                                       caplog):
    import json

    from streambayes.models.base import NaiveBayesBase
    from streambayes.runtime.records.events import PosteriorJSON
    from streambayes.snapshot import SnapshotStore

    xs, ys = _sms(800)
    model = make_model("nb")
    model.learn_many(xs[:600], ys[:600])
    SnapshotStore(tmp_path).write(model.to_state(), model="nb", positions={}, events=600)
    lines = [json.dumps({"id": str(i), "text": x["text"]}) for i, x in enumerate(xs[600:])]
    calls = []
    scoring = NaiveBayesBase.joint_log_likelihood_many
    monkeypatch.setattr(NaiveBayesBase, "joint_log_likelihood_many",
                        lambda self, X: calls.append(X.n) or scoring(self, X))
    loop, sink = _predictor(tmp_path, lines, 3)
    loop.run()
    served = [json.loads(v) for v in sink.values("out")]
    # the warm-up's one event at load, then two batches of 100, one scoring each
    assert len(served) == 200 and calls == [1, 100, 100]
    texts = [{"text": x["text"]} for x in xs[600:]]
    assert [p["clues"] for p in served] == [[list(c) for c in model.clues_one(x, 3)]
                                            for x in texts]

    sent, calls[:] = [], []
    of = PosteriorJSON.of.__func__
    monkeypatch.setattr(PosteriorJSON, "of", classmethod(lambda cls, **f: sent.append(f["clues"])
                                                         or of(cls, **f)))
    loop, sink = _predictor(tmp_path, lines, 3)
    loop.run()  # the clues' JSON made for each batch at once, spliced in
    assert len(sent) == 200 and all(isinstance(c, bytes) for c in sent)

    def timeless(values):
        return [{k: v for k, v in json.loads(p).items() if k != "latency_ms"} for p in values]
    assert timeless(sink.values("out")) == timeless(json.dumps(p) for p in served)
    import streambayes.runtime.loops.predict as predict_loop

    def no_json(clues):
        raise RuntimeError("a clue JSON bug")
    monkeypatch.setattr(predict_loop, "clue_json", no_json)
    sent.clear()
    loop, sink = _predictor(tmp_path, lines, 3)
    loop.run()  # the same clues, as lists; scored once a batch all the same
    assert all(isinstance(c, list) for c in sent) and "clue JSON failed" in caplog.text
    assert timeless(sink.values("out")) == timeless(json.dumps(p) for p in served)
    assert calls == [1, 100, 100] * 2  # one scoring a batch in each run (and the warm-up)
    monkeypatch.undo()
    monkeypatch.setattr(NaiveBayesBase, "joint_log_likelihood_many",
                        lambda self, X: calls.append(1) or scoring(self, X))

    def broken(self, batch, jll, k):
        raise RuntimeError("a clue bug")
    monkeypatch.setattr(NaiveBayesBase, "_clue_batch_of", broken)
    loop, sink = _predictor(tmp_path, lines, 3)
    loop.run()  # served without clues, the failure logged
    again = [json.loads(v) for v in sink.values("out")]
    assert [p["posterior"] for p in again] == [p["posterior"] for p in served]
    assert all(p["clues"] == [] for p in again) and "clues failed" in caplog.text


def _reference_top(rows, diffs, names, n, k):
    """Each row's terms sorted by |diff| (descending; NaN last), then name, then position."""
    out = [[] for _ in range(n)]
    for i, (r, d) in enumerate(zip(rows.tolist(), diffs.tolist(), strict=True)):
        out[r].append((names[i], d, i))
    return [[(name, d) for name, d, _ in sorted(terms, key=lambda t: (
        -abs(t[1]) if t[1] == t[1] else 1.0, t[0], t[2]))[:k]] for terms in out]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.sampled_from([0.5, -0.5, 1.0, 2.0, -3.0, float("nan"),
                                                              float("inf"), 0.25, 0.0])),
                max_size=60),
       st.integers(1, 8), st.integers(1, 6), st.booleans(), st.booleans(), st.data())
def test_top_clues_equal_sorting_every_row_ties_and_nan_included(terms, n, k, in_row_order, few, data):
    """The matrix path (terms in row order), its hand-over of rows tied across the cut, the
    sorting path (terms in any order) and the Python sort of a few terms all give each row's k
    terms by |diff|, name, position."""
    from unittest import mock

    from streambayes.models import clues

    terms = [(r % n, d) for r, d in terms]
    if in_row_order:
        terms.sort(key=lambda t: t[0])
    rows = np.array([r for r, _ in terms], np.int64)
    diffs = np.array([d for _, d in terms], np.float64)
    names = data.draw(st.lists(st.sampled_from(["tok:a", "tok:b", "tok:c", "x=1"]),
                               min_size=len(terms), max_size=len(terms)))
    with mock.patch.object(clues, "SMALL_TERMS", 1 << 20 if few else -1):
        got = clues.top_clues(rows, diffs, lambda idx: [names[i] for i in np.asarray(idx).tolist()], n, k)
    want = _reference_top(rows, diffs, names, n, k)
    assert [[(a, repr(b)) for a, b in row] for row in got] == \
        [[(a, repr(b)) for a, b in row] for row in want]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.sampled_from([0.5, -0.5, 1.0, 2.0, -3.0, float("nan"),
                                                              0.25, 0.0, 7.0, -7.0, float("inf")])),
                max_size=80),
       st.integers(1, 10), st.integers(1, 6), st.booleans(), st.integers(1, 5), st.integers(1, 17),
       st.sampled_from([False, True, "first"]), st.data())
def test_top_clues_every_way_of_finding_and_ordering(terms, n, k, in_row_order, kth_width, sort_width,
                                                      no_matrix, data):
    """Narrow matrices (rows longer than KTH_WIDTH in the second matrix, rows with more picked
    terms than SORT_WIDTH by lexsort) and no matrix at all give the same clues as sorting."""
    from unittest import mock

    from streambayes.models import clues

    terms = [(r % n, d) for r, d in terms]
    if in_row_order:
        terms.sort(key=lambda t: t[0])
    rows = np.array([r for r, _ in terms], np.int64)
    diffs = np.array([d for _, d in terms], np.float64)
    names = data.draw(st.lists(st.sampled_from(["tok:a", "tok:b", "x=1"]),
                               min_size=len(terms), max_size=len(terms)))
    # no_matrix: none at all, or the first (short rows) and then a lexsort for the long rows
    made = []

    def cells(terms):
        made.append(terms)
        return 0 if no_matrix is True or (no_matrix == "first" and len(made) > 1) else 1 << 20

    with mock.patch.object(clues, "KTH_WIDTH", kth_width), \
            mock.patch.object(clues, "SORT_WIDTH", sort_width), \
            mock.patch.object(clues, "SMALL_TERMS", -1), \
            mock.patch.object(clues, "_cells", cells):
        got = clues.top_clues(rows, diffs, lambda idx: [names[i] for i in np.asarray(idx).tolist()], n, k)
    want = _reference_top(rows, diffs, names, n, k)
    assert [[(a, repr(b)) for a, b in row] for row in got] == \
        [[(a, repr(b)) for a, b in row] for row in want]


# -- the clues' JSON made for a whole batch (the predictor's path) -----------------------------

def _json_of_lists(clues):
    from pydantic_core import to_json

    return [to_json(c, inf_nan_mode="null") for c in clues]


@pytest.mark.parametrize("name", ["nb", "mnb", "cnb"])
def test_clue_json_is_the_bytes_of_the_clue_lists(name):
    """Real SMS (ASCII and not: £, emoji, accented words), five clues and ties, byte for byte."""
    from streambayes.runtime.records.events import clue_json

    xs, ys = _sms(1500)
    xs = [{"text": x["text"]} for x in xs]  # words only (other fields: see the next test)
    model = make_model(name)
    model.learn_many(xs[:1000], ys[:1000])
    extra = [{"text": "Café crème für ünß 😀 ok £5 prize"}, {"text": ""}, {"text": "ok"},
             {"text": "naïve naïve résumé CALL now"}, {"text": ""}]  # the last: no clue
    for lo in range(1000, 1500, 125):
        batch = xs[lo:lo + 125] + extra
        log_proba, clues = model.predict_log_proba_and_clue_batch(batch, 5)
        got = clue_json(clues)
        assert got is not None and len(got) == len(batch)
        assert got == _json_of_lists(model.clues_many(batch, 5))
        assert np.array_equal(log_proba, model.predict_log_proba_many(batch))
    assert any(b"\\u" in g or any(c >= 0x80 for c in g) for g in got)  # a non-ASCII name went through


def test_clue_json_gives_way_where_json_would_escape_or_names_are_not_words(monkeypatch):
    from streambayes.runtime.records import events
    from streambayes.runtime.records.events import clue_json

    monkeypatch.setattr(events, "SMALL_CLUES", 0)  # the numpy passes, however few the clues

    xs, ys = _sms(400)
    bnb = make_model("bnb")  # "(absent words)" is no word of the texts
    bnb.learn_many(xs, ys)
    assert clue_json(bnb.predict_log_proba_and_clue_batch(xs[:50], 5)[1]) is None
    cat = make_model("nb")  # a categorical field's clue "channel=sms"
    cat.learn_many([x | {"channel": "sms"} for x in xs], ys)
    both = [x | {"channel": "sms"} for x in xs[:50]]
    assert clue_json(cat.predict_log_proba_and_clue_batch(both, 5)[1]) is None
    # a name JSON would escape (a quote, a backslash, a control character; the default words
    # have none): the ordinary way. A namer of byte spans over a buffer that holds them:
    from streambayes.models.clues import ClueBatch

    class Spans:
        def __init__(self, words):
            self.words = words

        def __call__(self, idx):
            return ["tok:" + self.words[i] for i in idx.tolist()]

        def byte_spans(self, idx):
            raw = [w.encode() for w in self.words]
            ends = np.cumsum([len(r) for r in raw])
            buf = np.frombuffer(b"".join(raw), np.uint8)
            return buf, (ends - [len(r) for r in raw])[idx], ends[idx], "tok:"

    for odd in ["a\x01b", 'say"hi', "back\\slash", "tab\tbed", "fine"]:
        words = ["ok", odd, "née"]
        clues = ClueBatch(4, np.array([0, 1, 2]), np.array([0, 0, 2, 3, 3]),
                          np.array([1.5, -0.5, 2.0]), Spans(words))  # the first and last: none
        got = clue_json(clues)
        assert (got is None) == (odd != "fine")
        assert got in (None, _json_of_lists(clues.lists()))


def test_a_posterior_with_clue_json_is_the_posterior_with_clue_lists():
    from streambayes.runtime.records.events import Posterior, PosteriorJSON

    clues = [("tok:win", 1.5), ("tok:clues", float("nan")), ("tok:x", -2e-5)]
    fields = dict(id='odd "clues":[] id', key=None, model="nb", snapshot="000001",
                  posterior={"clues": 0.25, "spam": 0.75}, decision="spam", latency_ms=1.0)
    want = PosteriorJSON.of(clues=clues, **fields)
    assert PosteriorJSON.of(clues=_json_of_lists([clues])[0], **fields) == want
    assert want == Posterior(clues=clues, **fields).model_dump_json().encode()
    assert PosteriorJSON.of(clues=b"[]", **fields) == PosteriorJSON.of(clues=[], **fields)


def test_a_clue_batch_scores_its_entries_once_and_keeps_nothing_after(monkeypatch):
    from streambayes.models.token_components import TokenTable

    xs, ys = _sms(600)
    xs = [{"text": x["text"]} for x in xs]
    model = make_model("mnb")
    model.learn_many(xs[:500], ys[:500])
    want = model.clues_many(xs[500:], 5)
    made = []
    scores_of = TokenTable._entry_scores_of
    monkeypatch.setattr(TokenTable, "_entry_scores_of",
                        lambda self, ids, scale: made.append(len(ids)) or scores_of(self, ids, scale))
    log_proba, clues = model.predict_log_proba_and_clue_batch(xs[500:], 5)
    assert len(made) == 1 and clues.lists() == want  # the prediction's scores, the same clues
    table = model._components[0]
    assert table._kept_scores is None and not table._keep_scores
    model.clues_many(xs[500:], 5)  # not kept outside a clue batch: made for the clues again
    assert len(made) == 3


@pytest.mark.parametrize("name", ["nb", "bnb", "cnb", "catnb"])
def test_a_few_clues_are_written_from_their_lists(name):
    """Below SMALL_CLUES (the predictor's small batches at low load) clue_json writes the lists'
    JSON itself, for names the numpy passes give way on too ("(absent words)", a field's clue,
    escapes), and a few terms are sorted in Python: the same clues as clues_one, byte for byte."""
    from streambayes.models import clues as clue_module
    from streambayes.runtime.records.events import SMALL_CLUES, clue_json

    xs, ys = _sms(400)
    if name == "catnb":
        xs = [x | {"channel": "sms"} for x in xs]
    model = make_model(name)
    model.learn_many(xs, ys)
    odd = [{"text": 'say "hi" back\\slash\ttab naïve 😀'} | ({"channel": "sms"} if name == "catnb" else {})]
    for batch in (xs[:1], xs[1:3], odd, xs[3:8] + odd):
        log_proba, clues = model.predict_log_proba_and_clue_batch(batch, 5)
        assert 0 < len(clues.picked) < SMALL_CLUES
        assert isinstance(clues.name_of, clue_module._Named)  # a few terms: the Python sort
        want = [model.clues_one(x, 5) for x in batch]
        assert clues.lists() == want
        assert clue_json(clues) == _json_of_lists(want)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab\x00éß😀z", max_size=4), max_size=12))
def test_tied_names_as_fixed_width_bytes_order_as_their_strings(words):
    """Tie names compared as one numpy bytes array (padded with NUL) order as the strings do,
    prefixes first; a word ending with NUL (the padding would hide it) gives way to the strings."""
    from streambayes.models.clues import _fixed_width

    raw = [w.encode() for w in words]
    ends = np.cumsum([len(r) for r in raw], dtype=np.int64)
    starts = ends - [len(r) for r in raw]
    buf = np.frombuffer(b"".join(raw) + b"!", np.uint8)  # a byte after the last word
    got = _fixed_width(buf, starts, ends)
    if any(w.endswith("\x00") for w in words) or not any(words):
        assert got is None
        return
    assert np.argsort(got, kind="stable").tolist() == sorted(range(len(words)), key=lambda i: words[i])


def test_one_long_tied_word_among_many_does_not_pad_every_name_to_its_length():
    """Review: the tie names' padded array is (tied terms x longest word); one 100,000-byte word
    tied with thousands of short ones would have made gigabytes. Mostly padding: the strings."""
    from streambayes.models.clues import _fixed_width

    words = [b"w%d" % i for i in range(5000)] + [b"x" * 100_000]
    ends = np.cumsum([len(w) for w in words], dtype=np.int64)
    starts = ends - [len(w) for w in words]
    buf = np.frombuffer(b"".join(words), np.uint8)
    assert _fixed_width(buf, starts, ends) is None
    assert _fixed_width(buf, starts[:-1], ends[:-1]) is not None  # short words alone: one array
