"""One conformance suite over every registered learner (STYLE habit 6).

Parametrized over ``MODELS`` (so a newly registered learner is covered automatically) and a
few parameter variants. Exactness: counts are sums of integer weights and must match exactly;
moments (Gaussian ``mean``/``m2``), decayed or fractionally weighted statistics to rtol 1e-12.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streambayes.errors import ModelError
from streambayes.features.discretize import equal_frequency_edges
from streambayes.models import MODELS, make_model, model_from_state
from tests.unit.conftest import BN_CLASS, bif_dir, stream_for

SMALL = {"n_features": 2**16}
_EXTRA = [("cnb", {"norm": True}), ("mnb", {"m": 2.0}), ("gnb", {"variance": "sample"}),
          ("catnb", {"m": 1.0}), ("mnb", {"vocab_size": 2**16}), ("bnb", {"vocab_size": 2**12}),
          ("nb", {"variance": "sample", "decay": 0.99}),
          ("mnb", {"alpha": "auto", "min_token_length": 2, "stop_words": "english", "ngram_range": [1, 2]}),
          ("cnb", {"alpha": "auto", "norm": True, "tf": "log", "length_norm": "l2"}),
          ("nb", {"alpha": "auto", "tf": "log", "decay": 0.99})]

# -- capabilities: a test that needs one runs only on the models that declare it ----------------
# A learner class may declare ``supports`` (a set of these); without it, it supports them all.
#   open_classes:  classes are the labels seen so far (none before learning; any label is new)
#   open_features: events are free-form (text and any fields); unknown fields/values are ignored
#   decay:         exponential forgetting (``decay=``)
#   river:         registered as a River classifier
CAPABILITIES = frozenset({"open_classes", "open_features", "decay", "river"})
# models whose parameters are not the naive Bayes family's give their own base parameters, the
# parameter that a merge must refuse to mix, and variants
BASE = {"bn": {"network": str(bif_dir() / "asia.bif"), "class_variable": BN_CLASS}}
OTHER_PARAMS = {"bn": {"equivalent_sample_size": 7.0}}
OWN_VARIANTS = {"bn": [("bn", BASE["bn"]), ("bn", {**BASE["bn"], "decay": 0.99}),
                       ("bn", {**BASE["bn"], "parameters": "prior", "prior": "bdeu",
                               "equivalent_sample_size": 5.0})]}


def capabilities(name: str) -> frozenset:
    return frozenset(getattr(MODELS[name], "supports", CAPABILITIES))


def requires(*needed: str):
    """Declare the capabilities a test needs (read by ``pytest_generate_tests``)."""
    def mark(test):
        test.requires = frozenset(needed)
        return test
    return mark


def model_params(name: str, **extra) -> dict:
    return {**BASE.get(name, SMALL), **extra}


NB_FAMILY = [name for name in MODELS if name not in OWN_VARIANTS]
VARIANTS = (
    [(name, {}) for name in NB_FAMILY]
    + [(name, {"decay": 0.99, **SMALL}) for name in NB_FAMILY]
    + [(name, {"prior_alpha": 1.0, "bigrams": True, **SMALL}) for name in NB_FAMILY]
    + [(name, {**p, **SMALL}) for name, p in _EXTRA if name in NB_FAMILY]
    + [v for name, own in OWN_VARIANTS.items() if name in MODELS for v in own]
)
NO_DECAY = [v for v in VARIANTS if not v[1].get("decay")]
MOMENTS = frozenset({"mean", "m2"})


def _vid(v) -> str:
    return "-".join([v[0], *(f"{k}={val}" for k, val in v[1].items() if k != "n_features")])


def pytest_generate_tests(metafunc):
    """Parametrize ``variant``/``plain``/``name`` over the models that support what the test needs."""
    needs = getattr(metafunc.function, "requires", frozenset())
    for arg, values in (("variant", VARIANTS), ("plain", NO_DECAY), ("name", list(MODELS))):
        if arg in metafunc.fixturenames and not any(m.args and arg in m.args[0]
                                                    for m in metafunc.definition.iter_markers("parametrize")):
            kept = [v for v in values if needs <= capabilities(v if arg == "name" else v[0])]
            metafunc.parametrize(arg, kept, ids=None if arg == "name" else _vid)


@pytest.fixture
def make_stream(request, make_stream):
    """The stream of the model under test (conftest ``STREAMS``), else the shared mixed stream."""
    for arg in ("variant", "plain", "name"):
        if arg in request.fixturenames:
            value = request.getfixturevalue(arg)
            return stream_for(value if isinstance(value, str) else value[0])
    return make_stream


def new(variant):
    return make_model(variant[0], **variant[1])


def trained(variant, xs, ys, w=None):
    m = new(variant)
    m.learn_many(xs, ys, w)
    return m


def sequential(variant, xs, ys, w=None):
    """What a merge is compared with: the learner trained on both streams, its alpha="auto" refitted
    on all its counts, as a merge does (learning refits at fixed event counts, the last one earlier)."""
    m = trained(variant, xs, ys, w)
    if hasattr(m, "refit_alpha"):
        m.refit_alpha()
    return m


# -- comparing states -----------------------------------------------------------------------
def assert_same(a, b, loose: bool = False, path: str = "state") -> None:
    """Walk two states; arrays equal exactly, or to rtol 1e-12 when ``loose`` or a moment."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        for key in a:
            assert_same(a[key], b[key], loose or key in MOMENTS, f"{path}[{key!r}]")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: lengths differ"
        for i, (u, v) in enumerate(zip(a, b, strict=True)):
            assert_same(u, v, loose, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.shape == b.shape and a.dtype == b.dtype, path
        if loose:
            scale = max(1.0, float(np.abs(a).max(initial=0.0)))
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12 * scale, err_msg=path)
        else:
            assert np.array_equal(a, b), f"{path}: arrays differ\n{a}\n{b}"
    else:
        assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
        expected = pytest.approx(b, rel=1e-12) if loose and isinstance(a, float) else b
        assert a == expected, f"{path}: {a!r} != {b!r}"


def assert_same_predictions(m1, m2, xs, exact: bool = False) -> None:
    """Same classes and log-posteriors: bit-identical, or to 1e-9 (sums run in another order)."""
    p1, p2 = m1.predict_log_proba_many(xs), m2.predict_log_proba_many(xs)
    assert m1.classes == m2.classes
    if exact:
        assert np.array_equal(p1, p2)
    else:
        np.testing.assert_allclose(p2, p1, rtol=1e-9, atol=1e-9)


def assert_same_learner(m1, m2, xs, ys, loose: bool) -> None:
    """Equal canonical state (exact counts unless ``loose``), predictions, and after more learning."""
    if not loose:
        assert_same(canonical(m1.to_state()), canonical(m2.to_state()))
    assert_same_predictions(m1, m2, xs)
    for m in (m1, m2):
        m.learn_many(xs[:30], ys[:30])
    assert_same_predictions(m1, m2, xs)


def canonical(state: dict) -> dict:
    """The state with each component's per-field entries sorted by field name.

    Field codes follow first appearance, which depends on key order and batch boundaries (a
    batch lists categorical columns before numeric ones); the statistics must not.
    """
    if "components" not in state:  # not a naive Bayes family state (e.g. a Bayes net: named variables)
        return state
    return {**state, "components": [_by_field(c) if "fields" in c else c for c in state["components"]]}


def _by_field(comp: dict) -> dict:
    n = len(comp["fields"])
    order = sorted(range(n), key=lambda i: str(comp["fields"][i]))
    return {k: _reorder(v, order, n) for k, v in comp.items()}


def _reorder(value, order: list[int], n: int):
    if isinstance(value, list) and len(value) == n:
        return [value[i] for i in order]
    if isinstance(value, dict) and value and all(isinstance(a, np.ndarray) for a in value.values()):
        return {k: a[..., order] for k, a in value.items()}
    return value


def has_moments(state) -> bool:
    if isinstance(state, dict):
        return bool(MOMENTS & set(state)) or any(has_moments(v) for v in state.values())
    return isinstance(state, list) and any(has_moments(v) for v in state)


def is_loose(variant) -> bool:
    """Decayed counts, and transformed (fractional) weights, are sums of floats taken in another
    order by a merge: equal to rounding, not bit for bit."""
    return bool(variant[1].get("decay") or variant[1].get("tf") or variant[1].get("length_norm"))


# -- protocol --------------------------------------------------------------------------------
@requires("open_classes")
def test_untrained(variant, make_stream):
    xs, _ = make_stream(5)
    m = new(variant)
    assert m.predict_proba_one(xs[0]) == {} and m.predict_one(xs[0]) is None and m.clues_one(xs[0]) == []
    assert m.predict_log_proba_many(xs).shape == (5, 0) and m.classes == [] and m.n_events == 0
    assert_same(m.to_state(), model_from_state(m.to_state()).to_state())


def test_probabilities_sum_to_one(variant, make_stream):
    xs, ys = make_stream()
    m = new(variant)
    for stop in (1, 2, 61, 62, len(xs)):  # one class, two, the third just appeared, all
        m.learn_many(xs[m.n_events:stop], ys[m.n_events:stop])
        proba = m.predict_proba_many(xs)
        assert proba.shape == (len(xs), len(m.classes)) and np.isfinite(proba).all()
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
        np.testing.assert_allclose(np.exp(m.predict_log_proba_many(xs)), proba, rtol=1e-15)
        one = m.predict_proba_one(xs[-1])
        assert list(one) == m.classes and m.predict_one(xs[-1]) == max(one, key=one.get)
    assert m.n_events == len(xs) and set(ys) <= set(m.classes)
    if "open_classes" in capabilities(variant[0]):
        assert m.classes == ["spam", "ham", "promo"]
    assert isinstance(m.memory_bytes(), int) and m.memory_bytes() > 0


def test_learns_something(variant, make_stream):
    xs, ys = make_stream(200, seed=1)
    m = trained(variant, xs, ys)
    hits = np.array(m.classes)[m.predict_proba_many(xs).argmax(axis=1)] == np.array(ys)
    assert hits.mean() > 0.6


# -- merge == sequential ----------------------------------------------------------------------
def mergeable(variant, xs):
    """Learners that bin numbers by edges learned in a warm-up merge exactly when their shards
    share the edges (a shard's own warm-up cannot be undone): give every shard the same ones."""
    name, params = variant
    if "edges" not in new(variant).params():
        return variant
    fields = {k for x in xs for k, v in x.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    edges = {f: equal_frequency_edges(np.array([x[f] for x in xs if x.get(f) is not None], float), 5).tolist()
             for f in sorted(fields)}
    return name, {**params, "edges": edges}


def assert_merge_adds_decayed_statistics(variant, xs, ys, split, w) -> None:
    """Under decay, shards learn concurrently (partitions over the same period), so merge adds
    their decayed statistics as they stand now: it is symmetric, and a shard merged with its
    twin equals that shard learned with double weights."""
    a_part, b_part = (xs[:split], ys[:split], w[:split]), (xs[split:], ys[split:], w[split:])
    ab, ba = trained(variant, *a_part), trained(variant, *b_part)
    ab.merge(trained(variant, *b_part))
    ba.merge(trained(variant, *a_part))
    assert sorted(ab.classes) == sorted(ba.classes)
    by_label = [ba.classes.index(c) for c in ab.classes]  # the two met the labels in other orders
    np.testing.assert_allclose(ba.predict_log_proba_many(xs)[:, by_label], ab.predict_log_proba_many(xs),
                               rtol=1e-9, atol=1e-9)
    twins = trained(variant, *b_part)
    twins.merge(trained(variant, *b_part))
    doubled = sequential(variant, xs[split:], ys[split:], [2 * v for v in w[split:]])
    assert_same_predictions(twins, doubled, xs)


@pytest.mark.parametrize("split", [0, 1, 37, 60, 120])
def test_merge_equals_sequential(variant, make_stream, split):
    xs, ys = make_stream()  # split 60: B has the label "promo" and the field "lang", A has neither
    variant = mergeable(variant, xs)
    if is_loose(variant):
        return assert_merge_adds_decayed_statistics(variant, xs, ys, split, [1.0] * len(xs))
    a, b = trained(variant, xs[:split], ys[:split]), trained(variant, xs[split:], ys[split:])
    a.merge(b)
    assert a.n_events == len(xs)
    assert_same_learner(sequential(variant, xs, ys), a, xs, ys, loose=False)


def test_merge_fractional_weights(variant, make_stream):
    xs, ys = make_stream()
    variant = mergeable(variant, xs)
    w = np.random.default_rng(5).uniform(0.1, 3.0, len(xs)).tolist()
    if is_loose(variant):
        return assert_merge_adds_decayed_statistics(variant, xs, ys, 50, w)
    a, b = trained(variant, xs[:50], ys[:50], w[:50]), trained(variant, xs[50:], ys[50:], w[50:])
    a.merge(b)
    seq = sequential(variant, xs, ys, w)
    assert_same(canonical(seq.to_state()), canonical(a.to_state()), loose=True)
    assert_same_learner(seq, a, xs, ys, loose=True)


def test_merge_refuses_other_params(variant):
    other = make_model(variant[0], **{**variant[1], **OTHER_PARAMS.get(variant[0], {"prior_alpha": 0.5})})
    with pytest.raises(ModelError):
        new(variant).merge(other)


# -- learn_many == learn_one ---------------------------------------------------------------
def test_learn_many_equals_learn_one(variant, make_stream):
    xs, ys = make_stream()
    one = new(variant)
    for x, y in zip(xs, ys, strict=True):
        one.learn_one(x, y)
    for chunk in (1, 7, 60, 200):
        many = new(variant)
        for start in range(0, len(xs), chunk):
            many.learn_many(many.featurize(xs[start:start + chunk]), ys[start:start + chunk])
        assert_same(canonical(one.to_state()), canonical(many.to_state()), is_loose(variant))
        assert_same_predictions(one, many, xs)


@pytest.mark.parametrize("plain", NO_DECAY, ids=_vid)
def test_weight_two_equals_twice(plain, make_stream):
    xs, ys = make_stream(40)  # without decay: under decay two events are also two time steps
    twice, weighted = new(plain), new(plain)
    for x, y in zip(xs, ys, strict=True):
        twice.learn_one(x, y)
        twice.learn_one(x, y)
        weighted.learn_one(x, y, w=2)
    state_twice, state_weighted = twice.to_state(), weighted.to_state()
    assert state_twice.pop("n_events") == 2 * state_weighted.pop("n_events")
    assert_same(state_twice, state_weighted, is_loose(plain))  # transformed weights: x+v+v vs x+2v
    assert_same_predictions(twice, weighted, xs, exact=not (has_moments(state_twice) or is_loose(plain)))


def test_decay_large_batch_and_restart():
    for name in (n for n in MODELS if "decay" in capabilities(n)):
        xs, ys = (v * 5 for v in stream_for(name)(300))  # 1500 events: 0.5**-1500 overflows a float
        chunked = make_model(name, **model_params(name, decay=0.5))
        for start in range(0, len(xs), 100):
            chunked.learn_many(xs[start:start + 100], ys[start:start + 100])
        whole = make_model(name, **model_params(name, decay=0.5))
        whole.learn_many(xs, ys)
        assert_same_predictions(chunked, whole, xs[:300])


# -- snapshots --------------------------------------------------------------------------------
def test_snapshot_round_trip(variant, make_stream):
    from streambayes.snapshot import pack, unpack

    xs, ys = make_stream()
    m = trained(variant, xs[:80], ys[:80])
    state = m.to_state()
    data, _ = pack(state, snapshot_id="1", model=m.name, config={}, positions={}, events=80,
                   created_at="2024-01-01T00:00:00Z")  # JSON header + npz arrays, no pickle
    for restored in (model_from_state(state), model_from_state(unpack(data)[1])):
        assert type(restored) is type(m) and restored.params() == m.params()
        assert_same(state, restored.to_state())
        assert np.array_equal(m.predict_log_proba_many(xs), restored.predict_log_proba_many(xs))
        assert restored.clues_one(xs[0]) == m.clues_one(xs[0])
        restored.learn_many(xs[80:], ys[80:])  # resuming from a snapshot == never stopping
        assert_same(trained(variant, xs, ys).to_state(), restored.to_state(), is_loose(variant))


@requires("decay")
def test_state_is_a_copy(name, make_stream):
    xs, ys = make_stream(600)
    m = make_model(name, **model_params(name, decay=0.5))
    m.learn_many(xs[:490], ys[:490])
    for start in range(490, 520):  # with decay 0.5 the stored weights are rescaled at t = 498
        state = m.to_state()
        frozen = copy.deepcopy(state)
        m.learn_one(xs[start], ys[start])
        assert_same(frozen, state)


# -- feature order, unseen values, empty events ----------------------------------------------
def test_feature_order_irrelevant(variant, make_stream):
    xs, ys = make_stream()
    rng = random.Random(3)
    shuffled = [dict(rng.sample(list(x.items()), len(x))) for x in xs]
    a, b = trained(variant, xs, ys), trained(variant, shuffled, ys)
    assert_same(canonical(a.to_state()), canonical(b.to_state()), is_loose(variant))
    np.testing.assert_allclose(b.predict_log_proba_many(shuffled), a.predict_log_proba_many(xs),
                               rtol=1e-12, atol=1e-12)
    assert [a.predict_one(x) for x in xs] == [b.predict_one(x) for x in shuffled]


@requires("open_classes", "open_features")
def test_unseen_features_and_labels(variant, make_stream):
    xs, ys = make_stream()
    m = trained(variant, xs, ys)
    unseen = {"text": "zyxxq qwvvz ǂǂǂ", "tld": "never-seen", "colour": "mauve", "weight_kg": 3.5,
              "flag": True, "gone": None}
    prior, proba = m.predict_proba_many([{}]), m.predict_proba_many([unseen])
    assert np.isfinite(proba).all() and proba.sum() == pytest.approx(1.0, abs=1e-12)
    if "vocab_size" not in variant[1]:  # a fixed vocabulary makes unseen words evidence
        np.testing.assert_allclose(proba, prior, rtol=1e-12, atol=1e-15)
    m.learn_one({"text": "once only", "tld": "once", "n_links": 2}, "rare")
    proba = m.predict_proba_many(xs + [unseen, {}])
    assert m.classes[-1] == "rare" and np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)


@requires("open_classes", "open_features")
def test_events_without_features(variant, make_stream):
    m = new(variant)
    m.learn_many([{}, {"text": None, "tld": None}, {"text": ""}], ["a", "b", "a"])
    m.learn_one({}, "b")
    proba = m.predict_proba_many(make_stream(10)[0] + [{}])
    assert np.isfinite(proba).all() and np.allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    if not is_loose(variant):
        assert m.predict_proba_one({}) == pytest.approx({"a": 0.5, "b": 0.5}, abs=1e-12)


# -- clone and params --------------------------------------------------------------------------
@requires("open_classes")
def test_clone(variant, make_stream):
    xs, ys = make_stream(30)
    m = trained(variant, xs, ys)
    before = m.to_state()
    c = m.clone()
    assert type(c) is type(m) and c.params() == m.params()
    assert c.n_events == 0 and c.classes == [] and c.predict_proba_one(xs[0]) == {}
    assert type(m)(**m.params()).params() == m.params() == make_model(m.name, **m.params()).params()
    c.learn_many(xs, ys)
    assert_same(before, m.to_state())


# -- clues -------------------------------------------------------------------------------------
def test_clues_and_log_odds(variant, make_stream):
    xs, ys = make_stream()
    m = trained(variant, xs[:61], ys[:61])
    for x in [*xs[50:70], {}]:
        for k in (1, 3, 100):
            clues = m.clues_one(x, k)
            assert len(clues) <= k and all(isinstance(n, str) and type(v) is float for n, v in clues)
        lp = np.sort(m.predict_log_proba_many([x])[0])[::-1]
        total = sum(v for _, v in m.log_odds_terms(x))
        assert total == pytest.approx(lp[0] - lp[1], rel=1e-9, abs=1e-9)


def test_clues_many_equal_clues_one(variant, make_stream):
    """The predictor's batched clues are exactly the one-by-one clues."""
    xs, ys = make_stream()
    m = trained(variant, xs[:61], ys[:61])
    batch = [*xs[50:70], {}] if hasattr(m, "clues_many") else []
    if batch:
        assert m.clues_many(batch, 4) == [m.clues_one(x, 4) for x in batch]


@requires("open_features")
def test_clue_names_follow_their_features(variant, make_stream):
    xs, ys = make_stream()
    m = trained(variant, xs, ys)
    for text in ("free lunch sale", "winner report coupon noon"):
        forward = dict(m.log_odds_terms({"text": text, "tld": "biz"}))
        backward = dict(m.log_odds_terms({"tld": "biz", "text": " ".join(text.split()[::-1])}))
        assert backward == pytest.approx(forward, rel=1e-12, abs=1e-12)


# -- numerics ----------------------------------------------------------------------------------
LONG_DOC = " ".join(np.random.default_rng(0).choice(
    [*"free prize win cash offer click now winner".split(), "the", "you"], 100_000))


@requires("open_features")
def test_no_underflow(variant, make_stream):
    xs, ys = make_stream()
    m = trained(variant, xs, ys)
    far = {"n_links": 1e7, "score": 3e6}  # ~1e6 standard deviations out
    proba = m.predict_proba_many(m.featurize([{"text": LONG_DOC}, far, {"text": LONG_DOC, **far}, {}]))
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    if not np.allclose(proba[0], proba[3]) and "vocab_size" not in variant[1]:
        # a learner that reads text must find spam (with a fixed vocabulary absent words weigh in)
        assert m.classes[int(proba[0].argmax())] == "spam"


# -- stable hashing across processes -------------------------------------------------------------
PROBE = """
import json
from streambayes.features import Featurizer, fold_fields
from streambayes.models import MODELS
def probe(xs, ys):
    f = Featurizer(n_features=2**20, bigrams=True)
    batch = f.featurize(xs)
    out = {"indptr": batch.tokens.indptr.tolist(), "buckets": batch.tokens.indices.tolist(),
           "folded": fold_fields(batch, f.hasher).indices.tolist()}
    for name, cls in MODELS.items():
        if "open_features" not in getattr(cls, "supports", {"open_features"}):
            continue  # hashing text: only the learners that read free-form events
        m = cls(bigrams=True)
        m.learn_many(xs, ys)
        out[name] = [m.classes, m.predict_proba_many(xs).tolist()]
    return out
"""
UNICODE_EVENTS = [
    {"text": "café £100 naïve", "tld": "été", "urgent": True, "n_links": 2},
    {"text": "Ünïcödé ß 東京 🎉 naïve café", "tld": "com", "urgent": False, "score": 1.5},
    {"text": "free prize £100 NOW", "tld": None, "lang": "fr", "n_links": 7},
]


def test_hashing_and_training_identical_across_processes():
    from streambayes.features import stable_hash

    assert stable_hash("hello") == 0x248BFA47 and stable_hash("") == 0  # MurmurHash3_x86_32, seed 0
    payload = json.dumps([UNICODE_EVENTS, ["spam", "ham", "spam"]])
    namespace: dict = {}
    exec(PROBE, namespace)
    expected = json.loads(json.dumps(namespace["probe"](*json.loads(payload))))
    script = PROBE + "\nimport sys\nprint(json.dumps(probe(*json.load(sys.stdin))))"
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", script], input=payload, env=env,
                              capture_output=True, text=True, timeout=60, check=True)
        assert json.loads(done.stdout) == expected, f"PYTHONHASHSEED={seed}"


# -- properties --------------------------------------------------------------------------------
_event = st.fixed_dictionaries(
    {"text": st.lists(st.sampled_from(["a", "b", "c", "dé", "e f"]), max_size=4).map(" ".join)},
    optional={"k": st.sampled_from(["x", "y", "z"]), "flag": st.booleans(),
              "n": st.integers(0, 5), "gone": st.none()},
)
_stream = st.lists(st.tuples(_event, st.sampled_from(["p", "q", "r"])), max_size=25)


@pytest.mark.parametrize("name", ["mnb", "catnb", "bnb"])
@settings(max_examples=40, deadline=None)
@given(stream=_stream, cut=st.integers(0, 25), chunk=st.integers(1, 6))
def test_property_merge_and_batches(name, stream, cut, chunk):
    xs, ys = [x for x, _ in stream], [y for _, y in stream]
    a, b, seq = (make_model(name, n_features=2**10) for _ in range(3))
    a.learn_many(xs[:cut], ys[:cut])
    b.learn_many(xs[cut:], ys[cut:])
    a.merge(b)
    for start in range(0, len(xs), chunk):
        seq.learn_many(xs[start:start + chunk], ys[start:start + chunk])
    seq.refit_alpha()  # alpha="auto" (mnb's default): a merge refits on the merged counts
    assert_same(canonical(seq.to_state()), canonical(a.to_state()))
    assert_same_predictions(seq, a, xs)


# -- River protocol ------------------------------------------------------------------------------
@requires("river")
def test_river_progressive_val_score(variant, make_stream):
    from river import base, evaluate, metrics

    import streambayes.models.river_compat  # noqa: F401  (registers the learners with River)

    xs, ys = make_stream(150, seed=2)
    model = new(variant)
    assert isinstance(model, base.Classifier)
    metric = evaluate.progressive_val_score(list(zip(xs, ys, strict=True)), model, metrics.Accuracy())
    assert model.n_events == 150 and 0.4 < metric.get() <= 1.0
