"""The per-event path of the semi-naive learners (learn_one / predict_proba_one without the
mini-batch machinery) gives the counts and posteriors of the mini-batch path: with AODE's compiled
kernels (numba, which the test extra installs), and the tests of AODE's path once more with numpy's."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streambayes.models import make_model
from streambayes.models.seminaive import compiled

from .test_conformance import assert_same, canonical

BOTH_PATHS = {  # the tests that run AODE's per-event path twice: compiled, then numpy
    "test_per_event_equals_mini_batches",
    "test_numbers_take_the_per_event_path_once_binned_and_equal_mini_batches",
    "test_aode_products_equal_the_logs_with_parents_left_out_and_underflow",
    "test_an_event_changed_between_its_prediction_and_its_learning_is_learned_as_it_is_then",
    "test_the_remembered_codes_follow_the_model_when_it_learns_in_between",
    "test_the_derived_estimates_are_never_pickled_and_older_pickles_make_them_again",
}


def pytest_generate_tests(metafunc):
    if metafunc.function.__name__ in BOTH_PATHS:
        metafunc.parametrize("aode_path", ["compiled", "numpy"], indirect=True)


@pytest.fixture(autouse=True)
def aode_path(request, monkeypatch):
    """AODE's per event: its compiled kernels (never skipped: numba must be there), or numpy
    (the tests of :data:`BOTH_PATHS` run both)."""
    path = getattr(request, "param", "compiled")
    if path == "numpy":
        monkeypatch.setattr(compiled, "ENABLED", False)
    else:
        assert compiled.kernels() is not None, "numba is missing: pip install -e '.[test]'"
    return path


def _stream(n: int, seed: int) -> tuple[list[dict], list[str]]:
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for _ in range(n):
        y = str(rng.integers(3))
        a = str(rng.integers(3))
        x = {"a": a, "b": a if rng.random() < 0.6 else str(rng.integers(4)), "c": str(rng.integers(2))}
        if rng.random() < 0.2:
            x["b"] = None
        if rng.random() < 0.1:
            del x["c"]
        xs.append(x)
        ys.append(y)
    return xs, ys


@pytest.mark.parametrize("name,params", [("aode", {}), ("spode", {}), ("tan", {}), ("kdb", {}),
                                         ("tan", {"refit_every": 50}), ("spode", {"parent": "a"}),
                                         ("kdb", {"k": 2})])
def test_per_event_equals_mini_batches(name, params):
    xs, ys = _stream(600, seed=1)
    one, many = make_model(name, **params), make_model(name, **params)
    posteriors = []
    for x, y in zip(xs, ys, strict=True):
        posteriors.append(one.predict_proba_one(x))  # in-place estimates between events
        one.learn_one(x, y, 0.5 if y == "2" else 1.0)
    for lo in range(0, len(xs), 100):
        batch = ys[lo:lo + 100]
        many.learn_many(xs[lo:lo + 100], batch, [0.5 if y == "2" else 1.0 for y in batch])
    assert_same(canonical(one.to_state()), canonical(many.to_state()))
    queries = xs[:50] + [{"a": "9"}, {}]
    got = np.array([list(one.predict_proba_one(q).values()) for q in queries])
    np.testing.assert_allclose(got, many.predict_proba_many(queries), rtol=1e-9, atol=1e-12)
    ref = make_model(name, **params)  # the posterior before each event is the batch model's
    for i in (0, 1, 2, 10, 300):
        if i:
            ref.learn_many(xs[:i], ys[:i], [0.5 if y == "2" else 1.0 for y in ys[:i]])
        want = ref.predict_proba_one(xs[i]) if ref.classes else {}
        assert list(posteriors[i]) == list(want)
        np.testing.assert_allclose(list(posteriors[i].values()), list(want.values()), rtol=1e-9, atol=1e-12)
        ref = make_model(name, **params)


def _numeric_stream(n: int, seed: int) -> tuple[list[dict], list[str]]:
    """Numbers (ints and floats, values on the edges, -0.0), a column of bins plus a category
    ("more"), a bool (a category) and missing values."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for _ in range(n):
        y = str(rng.integers(3))
        u = float(rng.normal(int(y), 1.0))
        x = {"u": round(u, 1) if rng.random() < 0.5 else u, "k": int(rng.integers(-2, 3)),
             "kids": int(rng.integers(1, 4)) if rng.random() < 0.8 else "more",
             "flag": bool(rng.random() < 0.3 + 0.2 * int(y)), "z": -0.0 if rng.random() < 0.5 else 0.0}
        if rng.random() < 0.1:
            x["u"] = None
        if rng.random() < 0.1:
            del x["k"]
        xs.append(x)
        ys.append(y)
    return xs, ys


@pytest.mark.parametrize("name,params", [("aode", {}), ("spode", {}), ("tan", {}), ("kdb", {}),
                                         ("kdb", {"k": 2}), ("tan", {"refit_every": 50})])
def test_numbers_take_the_per_event_path_once_binned_and_equal_mini_batches(name, params, monkeypatch):
    from streambayes.models.base import NaiveBayesBase

    xs, ys = _numeric_stream(500, seed=3)
    params = {"warmup": 40, **params}
    one, many = make_model(name, **params), make_model(name, **params)
    taken = {"learn": 0, "predict": 0}  # events the mini-batch path had to take
    base_learn, base_predict = NaiveBayesBase.learn_one, NaiveBayesBase.predict_proba_one

    def learn(self, x, y, w=1.0):
        taken["learn"] += self is one
        return base_learn(self, x, y, w)

    def predict(self, x):
        taken["predict"] += self is one
        return base_predict(self, x)

    monkeypatch.setattr(NaiveBayesBase, "learn_one", learn)
    monkeypatch.setattr(NaiveBayesBase, "predict_proba_one", predict)
    posteriors = []
    for x, y in zip(xs, ys, strict=True):
        posteriors.append(one.predict_proba_one(x))
        one.learn_one(x, y, 0.5 if y == "2" else 1.0)
    # the warm-up (its first 40 numbers), new categories and posteriors of too few classes go
    # through the batch path; nothing else (kDB with k = 2 learns every event there: its triples)
    assert taken["predict"] < 60, taken
    assert taken["learn"] == 500 if params.get("k") == 2 else taken["learn"] < 60, taken
    for lo in range(0, len(xs), 100):
        batch = ys[lo:lo + 100]
        many.learn_many(xs[lo:lo + 100], batch, [0.5 if y == "2" else 1.0 for y in batch])
    assert_same(canonical(one.to_state()), canonical(many.to_state()))
    queries = xs[:50] + [{"u": 1e100, "k": -1e100}, {"u": 2**70}, {}]
    got = np.array([list(one.predict_proba_one(q).values()) for q in queries])
    np.testing.assert_allclose(got, many.predict_proba_many(queries), rtol=1e-9, atol=1e-12)
    ref = make_model(name, **params)  # the posterior before each event is the batch model's
    for i in (45, 200, 499):
        ref.learn_many(xs[:i], ys[:i], [0.5 if y == "2" else 1.0 for y in ys[:i]])
        np.testing.assert_allclose(list(posteriors[i].values()), list(ref.predict_proba_one(xs[i]).values()),
                                   rtol=1e-9, atol=1e-12)
        ref = make_model(name, **params)


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, 1e101, 10**400])
def test_numbers_the_batch_path_refuses_are_refused_per_event_too(bad):
    from streambayes.errors import FeatureError

    xs, ys = _numeric_stream(200, seed=4)
    m = make_model("aode", warmup=40)
    m.learn_many(xs, ys)
    before = canonical(m.to_state())
    with pytest.raises(FeatureError):
        m.learn_one({**xs[0], "u": bad}, ys[0])
    with pytest.raises(FeatureError):
        m.predict_proba_one({**xs[0], "u": bad})
    assert_same(canonical(m.to_state()), before)


@settings(max_examples=300, deadline=None)
@given(edges=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=8),
       values=st.lists(st.one_of(st.floats(-2e6, 2e6), st.just(math.nan), st.just(-0.0)), max_size=30))
def test_the_bin_of_one_value_is_that_of_numpy(edges, values):
    from streambayes.models.seminaive.attributes import Attributes

    attrs = Attributes()
    a = attrs.add_attribute("u")
    attrs.add_value(a, "first a category")  # bins' local codes are not their numbers
    edges = np.unique(np.array(edges + [edges[0]] + values[:2], np.float64))
    edges = edges[~np.isnan(edges)]
    attrs.fix_edges(a, edges)
    column = attrs.encode_column(a, "numeric", np.array(values, np.float64), learn=False)
    want = [int(c) if not math.isnan(v) else -1 for v, c in zip(values, column, strict=True)]
    assert [attrs.bin_code(a, v) if not math.isnan(v) else -1 for v in values] == want
    assert [attrs.code_of(a, v) if not math.isnan(v) else -1 for v in values] == want
    assert attrs.bin_code(a, math.nan) == attrs.bins(a)[1][-1]  # NaN sorts last, as in numpy


@pytest.mark.parametrize("name", ["aode", "kdb"])
def test_the_warm_up_buffers_running_totals_are_their_sums(name):
    """The buffered weight and sizes are kept up to date as the buffers grow (not summed at every
    event): equal to the sums of the buffers after events one at a time, repeats of one event
    (which add to the buffer's last entry), batches, decay, a merge and a snapshot round trip."""
    from collections import Counter

    from streambayes.models import model_from_state

    rng = np.random.default_rng(5)

    def check(model):
        table = model._components[0]
        for a, records in table.buffers.items():
            weight, sizes = table._buffer_totals(a)
            assert weight == sum(r[2] for r in records)
            assert sizes == Counter(len(r[3]) for r in records)
        assert table._buffered_sizes() == sorted(
            ((n, d) for d, n in Counter(len(r[3]) for rs in table.buffers.values() for r in rs).items()),
            key=lambda t: t[1])

    models = [make_model(name, warmup=300, decay=0.999), make_model(name, warmup=300)]
    for model in models:
        x, y = {"u": 0.5}, "0"
        for step in range(120):
            if rng.random() < 0.6:  # else the event before once more (its buffer entry grows)
                x = {"u": float(rng.normal()), "v": int(rng.integers(5))}
                if rng.random() < 0.3:
                    del x["v"]
                y = str(rng.integers(2))
            w = float(rng.choice([0.5, 1.0, 2.0]))
            if step % 7 == 0:
                model.learn_many([x] * 3 + [{"u": 1.5}], [y] * 3 + ["0"], [w, w, 1.0, 0.25])
            else:
                model.learn_one(x, y, w)
            check(model)
    models[1].merge(model_from_state(models[1].to_state()))  # the buffers' events appended
    check(models[1])
    restored = model_from_state(models[1].to_state())
    check(restored)
    for _ in range(400):  # through the end of the warm-up
        restored.learn_one({"u": float(rng.normal()), "v": 1}, "1", 1.0)
        check(restored)
    assert not restored._components[0].buffers


def test_the_running_totals_go_with_the_warm_up_and_are_never_pickled():
    import pickle

    from streambayes.models.seminaive.attributes import Attributes

    m = make_model("aode", warmup=50)
    xs, ys = _numeric_stream(200, seed=6)
    for x, y in zip(xs[:30], ys[:30], strict=True):
        m.learn_one(x, y)
    table = m._components[0]
    assert table._totals and table.buffers  # in the warm-up
    assert pickle.loads(pickle.dumps(table))._totals == {}
    for x, y in zip(xs[30:], ys[30:], strict=True):
        m.learn_one(x, y)
    assert not table.buffers and table._totals == {}  # not one buffered event kept alive
    # a model pickled before the caches existed: they are made again when missing
    table.attrs._bin_cache.clear()
    state = {k: v for k, v in table.attrs.__dict__.items() if k not in ("_bin_cache", "_table_cache")}
    older = Attributes.__new__(Attributes)
    older.__setstate__(state)
    table.attrs = older
    old_table = {k: v for k, v in table.__dict__.items() if k != "_totals"}
    table.__dict__.clear()
    table.__setstate__(old_table)
    before = m.predict_proba_one(xs[0])
    m.learn_one(xs[1], ys[1])
    m.learn_many(xs[:3], ys[:3])
    assert set(before) == set(m.predict_proba_one(xs[0]))


def test_a_merge_of_other_bin_edges_is_refused_before_anything_changes():
    from streambayes.errors import ModelError

    xs, ys = _numeric_stream(200, seed=7)
    a, b = make_model("aode", warmup=40), make_model("aode", warmup=40)
    a.learn_many(xs[:100], ys[:100])
    b.learn_many([{**x, "new": "v"} for x in xs[100:]], ys[100:])  # other edges, another attribute
    before = canonical(a.to_state())
    with pytest.raises(ModelError, match="other bin edges"):
        a.merge(b)
    assert_same(canonical(a.to_state()), before)
    a.learn_one(xs[0], ys[0])  # the per-event path, on a whole model
    ref = make_model("aode", warmup=40)
    ref.learn_many(xs[:100] + xs[:1], ys[:100] + ys[:1])
    assert_same(canonical(a.to_state()), canonical(ref.to_state()))


def test_a_string_in_a_text_field_is_text_per_event_too():
    xs, ys = _numeric_stream(200, seed=8)
    one, many = make_model("aode", warmup=40), make_model("aode", warmup=40)
    xs = [{**x, "text": True} for x in xs]  # a bool in the text field: the category "true"
    one.learn_many(xs, ys)
    many.learn_many(xs, ys)
    query = {**xs[0], "text": "true"}  # a string there is text, which these learners leave out
    np.testing.assert_allclose(list(one.predict_proba_one(query).values()),
                               many.predict_proba_many([query])[0], rtol=1e-9, atol=1e-12)


def test_aode_products_equal_the_logs_with_parents_left_out_and_underflow(monkeypatch):
    """AODE's per-event likelihood is made of products (no logs): equal to the batch path's logs
    where some parents are below min_count, and handed to the logs when a class's product would
    pass below TINY (90 attributes, alpha 1e-9: an unseen combination costs about 1e-9)."""
    from streambayes.models.seminaive.ode import AODETable

    rng = np.random.default_rng(7)
    xs = [{f"f{j}": str(rng.integers(6)) for j in range(90)} for _ in range(60)]
    ys = [str(rng.integers(2)) for _ in xs]
    calls = {"products": 0, "logs": 0}
    real = AODETable.event_likelihood

    def counted(self, codes):
        got = real(self, codes)
        calls["products" if got is not None else "logs"] += 1
        return got

    monkeypatch.setattr(AODETable, "event_likelihood", counted)
    for params in ({"alpha": 1e-9}, {"min_count": 6.0}):
        one, many = make_model("aode", **params), make_model("aode", **params)
        one.learn_many(xs[:40], ys[:40])
        many.learn_many(xs[:40], ys[:40])
        for x, y in zip(xs[30:], ys[30:], strict=True):  # ten seen before, twenty new
            got = one.predict_proba_one(x)
            want = many.predict_proba_many([x])[0]
            np.testing.assert_allclose(list(got.values()), want, rtol=1e-9, atol=1e-300)
            one.learn_one(x, y)
            many.learn_many([x], [y])
        assert one._components[0].derived(1.0).dense
    assert calls["products"] and calls["logs"], calls


def test_an_event_changed_between_its_prediction_and_its_learning_is_learned_as_it_is_then():
    """predict_proba_one remembers the event's codes for learn_one; a value replaced in place
    in between (another category, or True for 1: equal in Python, not the same value here) is
    learned as it is at learn_one."""
    edges = {"n": [0.5, 1.5]}
    xs, ys = _stream(200, seed=3)
    for x in xs:
        x["n"] = 1
    for change in ({"a": "2"}, {"n": True}, {"a": None}):
        one, many = make_model("aode", edges=edges), make_model("aode", edges=edges)
        one.learn_many(xs[:150], ys[:150])
        many.learn_many(xs[:150], ys[:150])
        for x, y in zip(xs[150:], ys[150:], strict=True):
            x = dict(x)
            one.predict_proba_one(x)
            x.update(change)
            one.learn_one(x, y)
            many.learn_many([x], [y])
        assert_same(canonical(one.to_state()), canonical(many.to_state()))


def test_the_remembered_codes_are_never_pickled():
    import pickle

    xs, ys = _stream(50, seed=4)
    m = make_model("aode")
    m.learn_many(xs, ys)
    m.predict_proba_one(xs[0])
    assert m._codes_memo is not None
    back = pickle.loads(pickle.dumps(m))
    assert not hasattr(back, "_codes_memo")
    assert back.predict_proba_one(xs[0]) == m.predict_proba_one(xs[0])
    back.learn_one(xs[1], ys[1])
    m.learn_one(xs[1], ys[1])
    assert_same(canonical(back.to_state()), canonical(m.to_state()))


def test_the_remembered_codes_go_once_the_event_is_learned():
    """River's loop predicts an event, then learns it: its codes are made once (the second call
    finds them), and learn_one lets go of them, so a long text is not kept alive until the next
    event."""
    xs, ys = _stream(50, seed=4)
    m = make_model("aode")
    m.learn_many(xs, ys)
    made = []
    real = type(m)._codes_of
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(m), "_codes_of", lambda self, x, table: made.append(1) or real(self, x, table))
        m.predict_proba_one(xs[2])
        m.learn_one(xs[2], ys[2])
    assert len(made) == 1  # made for the prediction, found by the learning
    assert m._codes_memo is None  # and then let go, the values with them


def test_the_remembered_codes_follow_the_model_when_it_learns_in_between():
    """An event with a category the model has not seen is predicted (the category as missing),
    the model then learns that category from other events: the same event, predicted again,
    has its code."""
    xs, ys = _stream(100, seed=5)
    one, many = make_model("aode"), make_model("aode")
    one.learn_many(xs, ys)
    many.learn_many(xs, ys)
    x = {"a": "new", "b": "1", "c": "0"}
    one.predict_proba_one(x)
    one.learn_many([{"a": "new", "b": "2"}], ["1"])
    many.learn_many([{"a": "new", "b": "2"}], ["1"])
    np.testing.assert_allclose(list(one.predict_proba_one(x).values()), many.predict_proba_many([x])[0],
                               rtol=1e-9)


def test_the_derived_estimates_are_never_pickled_and_older_pickles_make_them_again():
    """A pickle holds no derived estimates; one that does (made before stop 28, whose Derived
    lacks today's fields) has them made again: predictions per event work and are unchanged."""
    import pickle

    xs, ys = _stream(80, seed=6)
    m = make_model("aode")
    for x, y in zip(xs, ys, strict=True):
        m.predict_proba_one(x)
        m.learn_one(x, y)
    want = m.predict_proba_one(xs[0])
    table = m._components[0]
    assert table._derived is not None
    assert pickle.loads(pickle.dumps(table))._derived is None
    del table._derived[1].alpha_values  # as an older Derived
    old = dict(table.__dict__)
    back = type(table).__new__(type(table))
    back.__setstate__(old)
    assert back._derived is None
    m._components[0] = back
    assert m.predict_proba_one(xs[0]) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_kdb_that_has_predicted_pickles_and_its_copy_predicts_the_same(k):
    """kDB k >= 2 keeps lookups of its tuple counts (closures) once it predicts: a cache, never
    pickled (pickle refused closures: joblib.dump of a fitted kDB that had predicted failed)."""
    import pickle

    xs = [{"a": str(i % 3), "b": str(i % 2), "c": str(i % 5), "d": str(i % 7)} for i in range(50)]
    ys = [str(i % 2) for i in range(50)]
    m = make_model("kdb", k=k)
    m.learn_many(xs, ys)
    want = m.predict_proba_many(xs[:5])
    one = m.predict_proba_one(xs[0])
    assert bool(m._components[0]._derived3) == (k >= 2)
    back = pickle.loads(pickle.dumps(m))
    assert back._components[0]._derived3 == {}
    assert back.predict_proba_one(xs[0]) == one
    np.testing.assert_array_equal(back.predict_proba_many(xs[:5]), want)
    back.learn_many(xs[:10], ys[:10])
    m.learn_many(xs[:10], ys[:10])
    np.testing.assert_array_equal(back.predict_proba_many(xs[:5]), m.predict_proba_many(xs[:5]))


@pytest.mark.parametrize("name", ["aode", "spode", "tan", "kdb"])
def test_the_m_estimate_without_alpha_works_per_event_and_in_mini_batches(name):
    xs, ys = _stream(60, seed=8)
    one, many = make_model(name, alpha=None, m=1.0), make_model(name, alpha=None, m=1.0)
    for x, y in zip(xs, ys, strict=True):
        one.predict_proba_one(x)
        one.learn_one(x, y)
    many.learn_many(xs, ys)
    np.testing.assert_allclose([list(one.predict_proba_one(x).values()) for x in xs[:10]],
                               many.predict_proba_many(xs[:10]), rtol=1e-9)


def test_the_compiled_kernels_take_the_per_event_path_and_equal_numpy():
    """With numba, AODE's per-event likelihood and learning run compiled (counted here), and give
    numpy's numbers (to rounding: the parents' sum is added in another order); a code past the
    estimates never reaches a kernel (no bounds checks there)."""
    calls = {"likelihood": 0, "add_event": 0}
    real = compiled.kernels()

    def counting(i, name):
        def kernel(*args):
            calls[name] += 1
            return real[i](*args)
        kernel.signatures = real[i].signatures
        return kernel

    xs, ys = _stream(300, seed=5)
    one = make_model("aode")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compiled, "_compiled", (counting(0, "likelihood"), counting(1, "add_event")))
        got = []
        for x, y in zip(xs, ys, strict=True):
            got.append(one.predict_proba_one(x))
            one.learn_one(x, y)
    assert calls["likelihood"] > 250 and calls["add_event"] > 250, calls
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compiled, "ENABLED", False)
        ref, want = make_model("aode"), []
        for x, y in zip(xs, ys, strict=True):
            want.append(ref.predict_proba_one(x))
            ref.learn_one(x, y)
    for a, b in zip(got, want, strict=True):
        assert list(a) == list(b)
        np.testing.assert_allclose(list(a.values()), list(b.values()), rtol=1e-12, atol=0)
    assert_same(canonical(one.to_state()), canonical(ref.to_state()))
    est = one._components[0].derived(1.0)
    before, n_codes = est.t.copy(), est.t.shape[1]
    with pytest.raises(IndexError):  # past the estimates: numpy's IndexError, never a stray write
        est.add_event(0, [n_codes], 1.0)
    with pytest.raises(IndexError):
        one._components[0].event_likelihood([0, n_codes + 5])
    np.testing.assert_array_equal(est.t, before)


def test_a_kernel_that_cannot_compile_warns_once_and_numpy_answers(monkeypatch):
    """numba there but unable to compile (its first call fails): one RuntimeWarning, then numpy,
    with numpy's numbers."""
    def broken(*args):
        raise TypeError("cannot type this")

    import warnings

    broken.signatures = []
    monkeypatch.setattr(compiled, "_compiled", (broken, broken))
    monkeypatch.setattr(compiled, "_missing", False)
    xs, ys = _stream(100, seed=6)
    one, got = make_model("aode"), []
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for x, y in zip(xs, ys, strict=True):
            got.append(one.predict_proba_one(x))
            one.learn_one(x, y)
    assert [str(w.message) for w in seen if "could not compile" in str(w.message)] == \
        ["numba could not compile the AODE kernels (cannot type this); using numpy"]
    assert compiled.kernels() is None
    monkeypatch.setattr(compiled, "ENABLED", False)
    ref, want = make_model("aode"), []
    for x, y in zip(xs, ys, strict=True):
        want.append(ref.predict_proba_one(x))
        ref.learn_one(x, y)
    assert got == want  # numpy answered: the very same numbers
    assert_same(canonical(one.to_state()), canonical(ref.to_state()))


@pytest.mark.parametrize("numba_module", [None, "broken"])
def test_a_numba_missing_or_broken_leaves_numpy_to_answer(monkeypatch, numba_module):
    """numba not installed: numpy's path, silently (the fast extra is optional). numba there but
    broken (its import or its jit fails): numpy's path too, with one RuntimeWarning saying why."""
    import sys
    import types
    import warnings

    monkeypatch.setitem(sys.modules, "numba", None if numba_module is None else types.ModuleType("numba"))
    monkeypatch.setattr(compiled, "_compiled", None)
    monkeypatch.setattr(compiled, "_missing", False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert compiled.kernels() is None
        assert compiled.kernels() is None  # once
        m = make_model("aode")
        xs, ys = _stream(50, seed=8)
        for x, y in zip(xs, ys, strict=True):
            m.predict_proba_one(x)
            m.learn_one(x, y)
    said = [str(w.message) for w in seen if "numba" in str(w.message)]
    assert said == ([] if numba_module is None else
                    ["numba cannot be used (AttributeError: module 'numba' has no attribute 'njit'); "
                     "AODE per event takes numpy's path"])
