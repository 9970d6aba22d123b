"""The semi-naive counts stored sparse (issue 14), and kDB with k > 2: the sparse lookups give
the dense tables' predictions, old dense snapshots load, merge == sequential and snapshots
round-trip on the sparse path, and memory follows the data: a wide stream whose dense triple
table would need ~35 GB fits kDB k = 2 at the default ``max_bytes`` in < 50 MB; what is stored
never passes ``max_bytes``."""

from __future__ import annotations

import numpy as np
import pytest

import streambayes.models.seminaive.table as table_module
from streambayes.devtools.datasets import wide_stream
from streambayes.errors import FeatureError
from streambayes.models import KDB, make_model, model_from_state
from streambayes.stats.keyed import KeyedCounts

from .test_conformance import assert_same, canonical

SPECS = [("aode", {}), ("aode", {"m": 2.0}), ("spode", {}), ("tan", {}), ("kdb", {}), ("kdb", {"k": 2}),
         ("tan", {"decay": 0.99}), ("kdb", {"k": 3}), ("kdb", {"k": 4, "m": 1.0})]


def _learn(name, params, xs, ys, batch=40):
    m = make_model(name, **params)
    for lo in range(0, len(xs), batch):
        m.learn_many(xs[lo:lo + batch], ys[lo:lo + batch])
    return m


def test_keyed_counts_equal_a_dense_tally():
    rng = np.random.default_rng(0)
    t, dense = KeyedCounts(), np.zeros(500)
    for _ in range(20):
        keys, w = rng.integers(0, 500, rng.integers(0, 60)), rng.random(60)
        w = w[: len(keys)]
        assert t.n_new(keys) == len(set(keys.tolist()) - set(t.keys.tolist()))
        t.add(keys, w)
        np.add.at(dense, keys, w)
    assert np.all(np.diff(t.keys) > 0) and len(t) == np.count_nonzero(dense)
    np.testing.assert_allclose(t.get(np.arange(500)), dense, rtol=1e-12)
    assert t.nbytes == 16 * len(t)


@pytest.mark.parametrize(("name", "params"), SPECS)
@pytest.mark.parametrize("stream", ["mixed", "warming", "wide"])
def test_sparse_lookups_give_the_dense_tables_predictions(name, params, stream, make_stream, monkeypatch):
    xs, ys = make_stream(200, seed=5) if stream == "mixed" else wide_stream(80, n_attrs=12, seed=1)
    if stream == "warming":  # numeric attributes still in warm-up: attributes without codes
        xs, ys = xs[:40], ys[:40]
    m = _learn(name, params, xs, ys)
    dense = m.predict_log_proba_many(xs)
    monkeypatch.setattr(table_module, "DENSE_CACHE", 0)  # every table too big for a dense cache
    m._components[0].version += 1
    sparse = m.predict_log_proba_many(xs)
    assert np.isfinite(dense).all()
    np.testing.assert_allclose(sparse, dense, rtol=1e-12, atol=1e-12)
    if name in ("tan", "kdb"):
        assert m.structure() == _learn(name, params, xs, ys).structure()


@pytest.mark.parametrize(("name", "params"), [("aode", {}), ("kdb", {"k": 2}), ("tan", {})])
def test_sparse_path_merge_equals_sequential_and_round_trips(name, params, monkeypatch):
    from streambayes.snapshot import pack, unpack

    monkeypatch.setattr(table_module, "DENSE_CACHE", 0)
    xs, ys = wide_stream(120, n_attrs=15, seed=2)
    a = _learn(name, params, xs[:50], ys[:50])
    a.merge(_learn(name, params, xs[50:], ys[50:]))
    seq = _learn(name, params, xs, ys)
    assert_same(canonical(seq.to_state()), canonical(a.to_state()), loose=True)
    np.testing.assert_allclose(a.predict_log_proba_many(xs), seq.predict_log_proba_many(xs), atol=1e-12)
    state = seq.to_state()
    data, _ = pack(state, snapshot_id="1", model=seq.name, config={}, positions={}, events=120,
                   created_at="2024-01-01T00:00:00Z")
    restored = model_from_state(unpack(data)[1])
    assert_same(state, restored.to_state())
    assert np.array_equal(restored.predict_log_proba_many(xs), seq.predict_log_proba_many(xs))


def _dense_state(model) -> dict:
    """The model's state as the dense tables wrote it before the sparse store."""
    state = model.to_state()
    comp = dict(state["components"][0])
    table = model_from_state(state)._components[0]  # codes in the state's (canonical) order
    pairs = table.pairs.view()
    for key in ("singles", "pair_codes", "pair_counts", "triple_codes", "triple_counts"):
        comp.pop(key, None)
    comp["counts"] = pairs
    if getattr(table, "triples", None) is not None:
        t3 = table.triples.view()
        for g in range(pairs.shape[1]):  # a repeated code: the pair (or single) count
            t3[:, g, g, :] = t3[:, g, :, g] = t3[:, :, g, g] = pairs[:, g, :]
        comp["triples"] = t3
    return {**state, "components": [comp]}


@pytest.mark.parametrize(("name", "params"), [("aode", {}), ("kdb", {"k": 2}), ("spode", {})])
def test_old_dense_snapshots_still_load(name, params, make_stream):
    xs, ys = make_stream(150, seed=4)
    m = _learn(name, params, xs, ys)
    old = model_from_state(_dense_state(m))
    assert_same(m.to_state(), old.to_state())
    new = model_from_state(m.to_state())  # codes in the same (canonical) order: the same sums
    assert np.array_equal(new.predict_log_proba_many(xs), old.predict_log_proba_many(xs))
    np.testing.assert_allclose(m.predict_log_proba_many(xs), old.predict_log_proba_many(xs), atol=1e-12)


def test_kdb2_runs_on_a_wide_stream_in_memory_that_follows_the_data():
    xs, ys = wide_stream()  # 24 classes, 60 attributes of 2 to 150 values
    m = _learn("kdb", {"k": 2}, xs, ys, batch=50)  # the default max_bytes (512 MiB)
    t = m._components[0]
    dense_bytes = len(m.classes) * t.attrs.n_codes**3 * 8
    assert dense_bytes > 2**34  # the dense triple table would need over 16 GiB
    assert m.memory_bytes() < 50 * 2**20
    assert t.triples.memory_bytes() == 16 * len(t.triples.triples) > 0
    proba = m.predict_proba_many(xs[:60])
    assert np.isfinite(proba).all() and np.mean(np.array(m.classes)[proba.argmax(1)] == ys[:60]) > 0.9


@pytest.mark.parametrize("k", [1, 2])
def test_stored_bytes_never_pass_max_bytes_and_a_refusal_changes_nothing(k):
    xs, ys = wide_stream(300, n_classes=5, n_attrs=10, seed=3)
    bound = 60_000 if k == 1 else 200_000
    m, refused = KDB(k=k, max_bytes=bound), 0
    rng = np.random.default_rng(0)
    lo = 0
    while lo < len(xs):
        size = int(rng.integers(1, 80))
        before = repr(m.to_state())
        try:
            m.learn_many(xs[lo:lo + size], ys[lo:lo + size])
            lo += size
        except FeatureError as e:
            assert "max_bytes" in str(e) and repr(m.to_state()) == before
            refused += 1
            if size == 1:
                break
        t = m._components[0]
        stored = t.pairs.memory_bytes() + (t.triples.memory_bytes() if k == 2 else 0)
        assert stored <= bound
    assert refused and m.n_events > 50


# -- kDB with k > 2 -------------------------------------------------------------------------------
K3 = {"k": 3, "n_features": 2**12}


def test_kdb3_equals_a_direct_estimate():
    """On complete data, log P(c | x) is log P̂(c) + Σ_i log P̂(x_i | c, x_pa(i)) with Laplace
    estimates counted directly from the rows, for the structure the model reports."""
    rng = np.random.default_rng(7)
    n, names = 400, ["a", "b", "c", "d", "e"]
    ys = rng.integers(0, 3, n)
    cols = {"a": (ys + rng.integers(0, 2, n)) % 3}
    cols["b"] = np.where(rng.random(n) < 0.7, cols["a"], rng.integers(0, 3, n))
    cols["c"] = np.where(rng.random(n) < 0.6, (cols["a"] + cols["b"]) % 3, rng.integers(0, 3, n))
    cols["d"] = np.where(rng.random(n) < 0.6, (cols["a"] + cols["b"] + cols["c"]) % 3, rng.integers(0, 3, n))
    cols["e"] = rng.integers(0, 2, n)
    rows = [{f: f"v{cols[f][i]}" for f in names} for i in range(n)]
    labels = [f"y{y}" for y in ys]
    m = KDB(k=3)
    m.learn_many(rows, labels)
    structure = m.structure()
    assert max(len(ps) for ps in structure.values()) == 3
    x = {"a": "v1", "b": "v1", "c": "v2", "d": "v1", "e": "v0"}
    want = []
    for c in m.classes:
        of_c = [r for r, y in zip(rows, labels, strict=True) if y == c]
        jll = np.log((len(of_c) + 1.0) / (n + 3.0))
        for f, ps in structure.items():
            given = [r for r in of_c if all(r[p] == x[p] for p in ps)]
            values = len({r[f] for r in rows})
            jll += np.log((sum(r[f] == x[f] for r in given) + 1.0) / (len(given) + values))
        want.append(jll)
    want = np.array(want) - np.logaddexp.reduce(want)
    np.testing.assert_allclose(m.predict_log_proba_many([x])[0], want, rtol=1e-12, atol=1e-12)


def test_kdb3_learn_one_merge_and_snapshot_equal_sequential(make_stream):
    from streambayes.snapshot import pack, unpack

    xs, ys = make_stream()  # categorical, numeric (warm-up 100 of 120) and missing values
    seq = KDB(**K3)
    seq.learn_many(xs, ys)
    one = KDB(**K3)
    for x, y in zip(xs, ys, strict=True):
        one.learn_one(x, y)
    assert_same(canonical(seq.to_state()), canonical(one.to_state()), loose=True)
    for split in (0, 37, 110):
        a, b = KDB(**K3), KDB(**K3)
        a.learn_many(xs[:split], ys[:split])
        b.learn_many(xs[split:], ys[split:])
        a.merge(b)
        assert_same(canonical(seq.to_state()), canonical(a.to_state()), loose=True)
        np.testing.assert_allclose(a.predict_log_proba_many(xs), seq.predict_log_proba_many(xs), atol=1e-9)
    state = seq.to_state()
    assert "tuple4_codes" in state["components"][0] and len(state["components"][0]["tuple4_counts"])
    data, _ = pack(state, snapshot_id="1", model=seq.name, config={}, positions={}, events=120,
                   created_at="2024-01-01T00:00:00Z")
    restored = model_from_state(unpack(data)[1])
    assert_same(state, restored.to_state())
    assert np.array_equal(restored.predict_log_proba_many(xs), seq.predict_log_proba_many(xs))


@pytest.mark.parametrize("name", ["aode", "spode", "tan", "kdb"])
def test_sparse_path_with_a_last_attribute_still_warming_up(name, monkeypatch):
    """The attribute added last has no code yet (its bins warm up): the sparse lookups still
    cover every attribute."""
    rng = np.random.default_rng(0)
    xs = [{"a": f"v{rng.integers(3)}", "b": f"w{rng.integers(2)}", "z": float(rng.random())}
          for _ in range(30)]
    ys = [f"y{rng.integers(2)}" for _ in range(30)]
    m = _learn(name, {}, xs, ys)
    dense = m.predict_log_proba_many(xs)
    monkeypatch.setattr(table_module, "DENSE_CACHE", 0)
    m._components[0].version += 1
    np.testing.assert_allclose(m.predict_log_proba_many(xs), dense, rtol=1e-12, atol=1e-12)
