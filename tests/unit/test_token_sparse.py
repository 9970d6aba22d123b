"""Token tables hold only the ids seen: predictions equal the dense ``classes x 2^20``
computation (a tiny reference kept here), state holds seen ids only, old states load."""

import os
from pathlib import Path

import numpy as np
import pytest

from streambayes.features import Featurizer, fold_fields
from streambayes.models import BernoulliNB, ComplementNB, MultinomialNB, NaiveBayes, model_from_state
from streambayes.stats import log_normalize

N = 2**20
DATA = Path(os.environ.get("STREAMBAYES_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")


# -- the dense reference: counts in a (classes, 2^20) array, formulas written out -------------
def dense_counts(xs, ys, classes, weights, binary=False):
    f = Featurizer(N)
    rows = fold_fields(f.featurize(xs), f.hasher)
    r, ids, vals = rows.row_ids(), rows.indices, rows.values
    if binary:  # Bernoulli: presence per (event, id)
        keys = np.unique(r[vals > 0] * N + ids[vals > 0])
        r, ids, vals = keys // N, keys % N, np.ones(len(keys))
    code = np.array([classes.index(y) for y in ys])
    counts = np.zeros((len(classes), N))
    np.add.at(counts, (code[r], ids), vals * weights[r])
    seen = np.zeros(N, bool)
    seen[ids[vals > 0]] = True
    docs = np.bincount(code, weights, minlength=len(classes))
    return counts, seen, docs, (np.bincount(code[r], vals * weights[r], len(classes)), rows)


def reference_jll(kind, xs, ys, classes, weights, test, alpha=1.0, norm=False):
    counts, seen, docs, (totals, _) = dense_counts(xs, ys, classes, weights, kind == "bnb")
    V = seen.sum()
    f = Featurizer(N)
    x = np.zeros((len(test), N))
    t = fold_fields(f.featurize(test), f.hasher)
    np.add.at(x, (t.row_ids(), t.indices), t.values)
    x = x[:, seen]
    c = counts[:, seen]
    prior = np.log(docs / docs.sum())
    if kind == "mnb":
        return prior + x @ np.log((c + alpha) / (totals[:, None] + alpha * V)).T
    if kind == "bnb":
        p = (c + alpha) / (docs[:, None] + 2 * alpha)
        present = (x > 0).astype(float)
        return prior + present @ np.log(p).T + (1 - present) @ np.log(1 - p).T
    comp = c.sum(axis=0) - c
    log_theta = np.log((comp + alpha) / ((totals.sum() - totals)[:, None] + alpha * V))
    weights_cw = log_theta / log_theta.sum(axis=1, keepdims=True) if norm else -log_theta
    return x @ weights_cw.T


def text_stream(n=300, seed=0):
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(400)]
    xs, ys = [], []
    for i in range(n):
        y = ["a", "b", "c"][i % 3] if i < 3 else str(rng.choice(["a", "b", "c"]))
        shift = {"a": 0, "b": 60, "c": 120}[y]
        words = [vocab[min(int(rng.zipf(1.4)) + shift, 399)] for _ in range(int(rng.integers(1, 12)))]
        x = {"text": " ".join(words)}
        if i % 5 == 0:
            x["tld"] = str(rng.choice(["biz", "org"]))
        if i % 4 == 0:
            x["n_links"] = int(rng.integers(0, 3))  # zero counts too: learned, never "seen"
        xs.append(x)
        ys.append(y)
    return xs, ys


# the dense reference takes a fixed alpha: pinned (alpha="auto" is the default of mnb and cnb)
MODELS = {"mnb": (MultinomialNB, {"alpha": 1.0}), "bnb": (BernoulliNB, {}),
          "cnb": (ComplementNB, {"alpha": 1.0}), "cnb-norm": (ComplementNB, {"norm": True, "alpha": 1.0}),
          "mnb-a0.3": (MultinomialNB, {"alpha": 0.3})}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_predictions_equal_the_dense_reference(name):
    xs, ys = text_stream()
    f = Featurizer(N)
    words = {w for x in xs + xs[:40] for w in f.tokenizer(x["text"])} | {"tld=biz", "tld=org", "n_links"}
    assert len({f.hasher.bucket(w) for w in words}) == len(words)  # no bucket collides
    cls, params = MODELS[name]
    m = cls(**params)
    w = np.where(np.arange(250) % 9 == 0, 0.0, 1.0 + (np.arange(250) % 3))  # weights, zeros too
    for lo in range(0, 250, 64):
        hi = min(lo + 64, 250)
        m.learn_many(xs[lo:hi], ys[lo:hi], w[lo:hi].tolist())
    test = xs[250:] + [{"text": "w1 never-seen w399"}, {"text": ""}]
    kind = name.split("-")[0]
    ref = reference_jll(kind, xs[:250], ys[:250], m.classes, w, test, alpha=params.get("alpha", 1.0),
                        norm=params.get("norm", False))
    got = m.predict_log_proba_many(test)
    np.testing.assert_allclose(got, log_normalize(ref), rtol=0, atol=1e-12)
    assert np.array_equal(got.argmax(axis=1), ref.argmax(axis=1))
    one = np.array([[m.predict_proba_one(x)[c] for c in m.classes] for x in test])
    np.testing.assert_allclose(np.log(one), log_normalize(ref), rtol=0, atol=1e-12)


def test_per_event_multinomial_equals_the_reference_and_the_batch_path():
    xs, ys = text_stream(seed=1)
    xs = [{"text": x["text"]} for x in xs]  # plain text: the per-event fast path
    m, batch = MultinomialNB(alpha=1.0), MultinomialNB(alpha=1.0)
    for x, y in zip(xs[:200], ys[:200], strict=True):
        m.predict_proba_one(x)
        m.learn_one(x, y)
    batch.learn_many(xs[:200], ys[:200])
    ref = log_normalize(reference_jll("mnb", xs[:200], ys[:200], m.classes, np.ones(200), xs[200:]))
    np.testing.assert_allclose(m.predict_log_proba_many(xs[200:]), ref, rtol=0, atol=1e-12)
    assert m._components[0].n_seen == batch._components[0].n_seen
    np.testing.assert_array_equal(m.to_state()["components"][0]["counts"],
                                  batch.to_state()["components"][0]["counts"])


def test_decayed_predictions_equal_the_reference():
    xs, ys = text_stream(seed=2)
    m = MultinomialNB(alpha=1.0, decay=0.97)
    for lo in range(0, 240, 16):
        m.learn_many(xs[lo:lo + 16], ys[lo:lo + 16])
    w = 0.97 ** (239 - np.arange(240.0))
    ref = reference_jll("mnb", xs[:240], ys[:240], m.classes, w, xs[240:])
    np.testing.assert_allclose(m.predict_log_proba_many(xs[240:]), log_normalize(ref), atol=1e-10)


def test_vocabulary_counts_ids_learned_with_a_positive_value():
    m = MultinomialNB()
    m.learn_many([{"text": "a b", "n": 0}, {"text": "c"}], ["x", "y"], [1.0, 0.0])
    assert m._components[0].n_seen == 3  # a, b and c (weight 0 included), not "n" (count 0)


@pytest.mark.parametrize("cls", [MultinomialNB, BernoulliNB, ComplementNB, NaiveBayes])
def test_state_holds_only_the_seen_ids(cls):
    xs, ys = text_stream(seed=3)
    m = cls()
    m.learn_many(xs, ys)
    comp = m.to_state()["components"][0]
    n_seen = m._components[0].n_seen
    assert 0 < n_seen < 600 and comp["cols"].shape == (n_seen,) and comp["counts"].shape == (3, n_seen)
    assert np.all(np.diff(comp["cols"]) > 0)
    assert m.memory_bytes() < 2**16


def _old_state():
    """A MultinomialNB state written by the dense implementation (before sparse statistics)."""
    comp = {"params": {"n_features": N, "alpha": 1.0, "fold": True, "vocab_size": None, "m": None},
            "cols": np.array([68115, 121004, 354738, 396577, 413635, 746281, 857561, 865914, 943214,
                              1016324]),
            "counts": np.array([[1.0, 0.0, 1.0, 0.0, 0.0, 2.0, 0.0, 1.0, 2.0, 1.0],
                                [0.0, 2.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0]]),
            "totals": np.array([8.0, 5.0])}
    params = {"alpha": 1.0, "m": None, "vocab_size": None, "prior_alpha": 0.0, "class_prior": None,
              "decay": None, "n_features": N, "text_fields": ["text"], "lowercase": True, "bigrams": False}
    return {"model": "mnb", "params": params, "classes": ["spam", "ham"],
            "class_counts": np.array([2.0, 1.0]), "decay_t": 0, "n_events": 3, "components": [comp]}


OLD_EVENTS = ([{"text": "free prize now", "tld": "biz"}, {"text": "lunch at noon", "n": 2},
               {"text": "win a free prize"}], ["spam", "ham", "spam"])
OLD_TEST = [{"text": "free lunch", "tld": "biz"}, {"text": "prize", "n": 1}]
OLD_PREDICTIONS = [[-0.25309062768216206, -1.4978854265283528], [-0.5423242908253615, -0.870828357797398]]


def test_a_state_written_by_the_dense_release_loads_and_predicts_the_same():
    old = model_from_state(_old_state())
    np.testing.assert_allclose(old.predict_log_proba_many(OLD_TEST), OLD_PREDICTIONS, rtol=0, atol=1e-15)
    fresh = MultinomialNB()
    fresh.learn_many(*OLD_EVENTS)
    np.testing.assert_array_equal(old.to_state()["components"][0]["counts"],
                                  fresh.to_state()["components"][0]["counts"])
    old.learn_one({"text": "free free cash"}, "spam")  # and keeps learning
    assert old.predict_one({"text": "cash"}) == "spam"


@pytest.mark.parametrize("cls", [MultinomialNB, BernoulliNB, ComplementNB])
def test_a_fully_dense_counts_table_is_converted_to_its_seen_ids(cls):
    xs, ys = text_stream(seed=4)
    m = cls()
    m.learn_many(xs, ys)
    state = m.to_state()
    comp = state["components"][0]
    dense = np.zeros((3, N))
    dense[:, comp["cols"]] = comp["counts"]
    state["components"][0] = {k: v for k, v in comp.items() if k != "cols"} | {"counts": dense}
    back = model_from_state(state)
    np.testing.assert_array_equal(back.predict_log_proba_many(xs[:50]), m.predict_log_proba_many(xs[:50]))
    assert back.memory_bytes() < 2**16  # converted, not kept dense


def test_sms_multinomial_state_is_small():
    sms = DATA / "sms_spam_collection" / "SMSSpamCollection"
    lines = [line.rstrip("\r\n").partition("\t") for line in sms.open(encoding="utf-8") if line.strip()]
    m = MultinomialNB()
    xs = [{"text": text} for _, _, text in lines]
    for lo in range(0, len(xs), 1000):
        m.learn_many(xs[lo:lo + 1000], [label for label, _, _ in lines[lo:lo + 1000]])
    state_bytes = sum(a.nbytes for a in m.to_state()["components"][0].values() if isinstance(a, np.ndarray))
    assert m._components[0].n_seen > 5000
    assert m.memory_bytes() < 2 * 2**20 and state_bytes < 2**20  # dense: 16 MiB per class


def test_a_token_state_that_does_not_add_up_is_refused():
    from streambayes.errors import ModelError

    state = _old_state()
    state["components"][0]["counts"] = state["components"][0]["counts"][:, :9]
    with pytest.raises(ModelError, match="9"):
        model_from_state(state)
    state["components"][0] = {k: v for k, v in _old_state()["components"][0].items() if k != "cols"}
    with pytest.raises(ModelError, match="without 'cols'"):
        model_from_state(state)


@pytest.mark.parametrize("cls", [MultinomialNB, NaiveBayes])
def test_learning_a_predicted_batch_in_refit_parts_gives_the_same_state(cls):
    """A batch predicted first (the learner's prequential calibration), then learned in parts
    (``alpha="auto"`` cuts it at refit points; the parts reuse the columns the prediction found)
    leaves exactly the state of learning it unpredicted; new ids arrive in every part."""
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(400)]

    def events(n, vocab):
        return [{"text": " ".join(rng.choice(vocab, size=rng.integers(1, 12)))} for _ in range(n)]

    first, later = events(40, words[:60]), events(300, words)  # later: mostly unseen words
    labels = [str(v) for v in rng.integers(0, 3, size=340)]
    a, b = cls(alpha="auto"), cls(alpha="auto")
    for m in (a, b):
        m.learn_many(first, labels[:40])
    X = a.featurize(later)
    a.predict_log_proba_many(X)
    table = a._components[0]
    a.learn_many(X, labels[40:])  # 40 -> 340 crosses the refit points 48, 56, 64, ..., 320
    assert table._batch_cols is None  # the last part let the batch go
    b.learn_many(b.featurize(later), labels[40:])
    assert _same(a.to_state(), b.to_state())
    test = events(50, words)
    np.testing.assert_array_equal(a.predict_log_proba_many(test), b.predict_log_proba_many(test))


def _same(a, b) -> bool:
    """Exact equality of two states (dicts, lists, arrays, numbers)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


@pytest.mark.parametrize("make", [lambda: MultinomialNB(), lambda: BernoulliNB(), lambda: ComplementNB(),
                                  lambda: ComplementNB(norm=True), lambda: MultinomialNB(decay=0.999),
                                  lambda: NaiveBayes(alpha="auto")])
def test_scores_made_once_per_distinct_id_equal_scoring_every_entry(make, monkeypatch):
    """A batch whose entries repeat their ids is scored per distinct id and gathered: the very
    numbers of scoring every entry (bit for bit), decay and unseen words included."""
    from streambayes.models import token_components

    rng = np.random.default_rng(11)
    vocab = [f"w{i}" for i in range(300)]

    def events(n):
        return [{"text": " ".join(rng.choice(vocab, size=rng.integers(5, 40)))} for _ in range(n)]

    model = make()
    model.learn_many(events(400), [str(c) for c in rng.integers(0, 4, 400)])
    test = events(300) + [{"text": "never seen words only"}]
    assert model.featurize(test).tokens.indptr[-1] >= token_components._SHARED_SCORES_MIN
    shared = model.predict_log_proba_many(test)
    monkeypatch.setattr(token_components, "_SHARED_SCORES_MIN", 10**9)
    np.testing.assert_array_equal(shared, model.predict_log_proba_many(test))


def test_one_distinct_id_in_many_entries_scores_as_every_entry(monkeypatch):
    """Twelve classes, fractional weights, a batch of 5,000 entries of one seen word: Complement's
    sum over classes is taken as for every entry (a single column would be summed pairwise; this
    seed's model differed in the last bit before that was guarded)."""
    from streambayes.models import token_components

    rng = np.random.default_rng(20)
    model = ComplementNB()
    model.learn_many([{"text": " ".join(f"w{j}" for j in rng.integers(0, 20, 6))} for _ in range(300)],
                     [str(i % 12) for i in range(300)], rng.uniform(0.1, 3.0, 300).tolist())
    test = [{"text": "w7 " * 5000}]
    shared = model.predict_log_proba_many(test)
    monkeypatch.setattr(token_components, "_SHARED_SCORES_MIN", 10**9)
    np.testing.assert_array_equal(shared, model.predict_log_proba_many(test))


def test_the_shared_scores_path_is_taken_on_a_repetitive_batch(monkeypatch):
    from streambayes.models import token_components

    model = MultinomialNB()
    model.learn_many([{"text": "a b c d e f g h"}] * 10, ["x", "y"] * 5)
    calls = []
    inner = token_components.Multinomial.entry_scores

    def counted(self, counts, scale):
        calls.append(counts.shape[1])
        return inner(self, counts, scale)

    monkeypatch.setattr(token_components.Multinomial, "entry_scores", counted)
    model.predict_log_proba_many([{"text": "a b c d e f g h " * 60}] * 10)
    assert calls == [8]  # 8 distinct ids scored, not 4,800 entries
