"""TAN and kDB: structure recovery, root choice, a structure that follows the stream, higher-order
dependencies, the memory guard, and the exactness properties for kDB with k = 2 (the
conformance suite runs the registered defaults, k = 1)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from streambayes.errors import FeatureError, ModelError
from streambayes.models import KDB, TAN, CategoricalNB, model_from_state
from streambayes.stats.pairs import PairCounts
from streambayes.stats.triples import TripleCounts

from .test_conformance import assert_same, assert_same_predictions, canonical
from .test_reference_examples import FIELDS, QUERY, WATERMELON

NAMES = ["a", "b", "c", "d", "e", "f"]
TREE_A = {"b": "a", "c": "a", "d": "b", "e": "b", "f": "c"}  # child -> parent, root "a"
TREE_B = {"a": "d", "c": "d", "f": "d", "b": "f", "e": "c"}  # root "d"


def root_of(tree: dict) -> str:
    return next(n for n in NAMES if n not in tree)


def sample_tree(tree: dict, n: int, seed: int, copy: float = 0.9) -> tuple[list[dict], list[int]]:
    """A tree-structured network: the class drives the root only (P(root = y) = 0.5 + uniform
    noise), each child copies its parent with probability ``copy``, else is uniform; 3 values."""
    rng = np.random.default_rng(seed)
    ys = rng.integers(0, 2, n)
    values = {root_of(tree): np.where(rng.random(n) < 0.5, ys, rng.integers(0, 3, n))}
    while len(values) < len(NAMES):
        for child, parent in tree.items():
            if parent in values and child not in values:
                values[child] = np.where(rng.random(n) < copy, values[parent], rng.integers(0, 3, n))
    xs = [{name: f"v{values[name][i]}" for name in NAMES} for i in range(n)]
    return xs, [f"y{y}" for y in ys]


def undirected(edges) -> set:
    return {frozenset(e) for e in edges}


def accuracy(model, xs, ys) -> float:
    predicted = np.array(model.classes)[model.predict_proba_many(xs).argmax(axis=1)]
    return float(np.mean(predicted == np.array(ys)))


# -- TAN -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("tree", [TREE_A, TREE_B])
def test_tan_recovers_the_tree_and_roots_it_at_the_most_informative_attribute(tree):
    xs, ys = sample_tree(tree, 4000, seed=1)
    m = TAN()
    m.learn_many(xs, ys)
    assert undirected(m.tree()) == undirected(tree.items())
    assert dict((child, parent) for parent, child in m.tree()) == tree  # directed away from the root
    assert m.structure()[root_of(tree)] == []


def test_tan_root_by_name_and_unknown_root():
    xs, ys = sample_tree(TREE_A, 3000, seed=2)
    m = TAN(root="f")
    m.learn_many(xs, ys)
    assert undirected(m.tree()) == undirected(TREE_A.items())
    parent = dict((child, p) for p, child in m.tree())
    assert "f" not in parent and parent["c"] == "f" and parent["a"] == "c" and parent["b"] == "a"
    not_yet = TAN(root="zz")  # an attribute not seen (yet): the most informative one is the root
    not_yet.learn_many(xs, ys)
    assert not_yet.tree() == _trained_tan(xs, ys).tree()


def _trained_tan(xs, ys, **params) -> TAN:
    m = TAN(**params)
    m.learn_many(xs, ys)
    return m


def test_tan_structure_follows_the_stream():
    xa, ya = sample_tree(TREE_A, 2000, seed=3)
    xb, yb = sample_tree(TREE_B, 20000, seed=4)
    m = TAN()
    m.learn_many(xa, ya)
    assert undirected(m.tree()) == undirected(TREE_A.items())
    for lo in range(0, len(xb), 1000):
        m.learn_many(xb[lo:lo + 1000], yb[lo:lo + 1000])
    assert undirected(m.tree()) == undirected(TREE_B.items())
    # nothing was lost: the counts are those of one model trained on everything at once
    assert_same(canonical(_trained_tan(xa + xb, ya + yb).to_state()), canonical(m.to_state()))


def test_tan_refit_every_n_events():
    xa, ya = sample_tree(TREE_A, 5000, seed=5)
    xb, yb = sample_tree(TREE_B, 20000, seed=6)
    m = TAN(refit_every=5000)
    m.learn_many(xa[:2000], ya[:2000])
    assert m.tree() == [] and m.structure() == {}  # naive Bayes before the first refit
    m.learn_many(xa[2000:], ya[2000:])
    assert undirected(m.tree()) == undirected(TREE_A.items())
    for lo in range(0, 4000, 1000):
        m.learn_many(xb[lo:lo + 1000], yb[lo:lo + 1000])
    assert undirected(m.tree()) == undirected(TREE_A.items())  # 4000 < 5000: not yet
    for lo in range(4000, len(xb), 1000):
        m.learn_many(xb[lo:lo + 1000], yb[lo:lo + 1000])
    assert undirected(m.tree()) == undirected(TREE_B.items())
    # the structure of the last refit is state: a snapshot restores it, resuming continues it
    restored = model_from_state(m.to_state())
    assert restored.tree() == m.tree() and restored._components[0].since_refit == 0
    m.learn_many(xa[:100], ya[:100])
    restored.learn_many(xa[:100], ya[:100])
    assert_same(m.to_state(), restored.to_state())
    assert_same_predictions(m, restored, xa[:200], exact=True)


def test_tan_parameters_are_checked():
    with pytest.raises(ModelError, match="refit_every"):
        TAN(refit_every=0)
    for k in (0, 5, 1.5, True):
        with pytest.raises(ModelError, match="k = 1 … 4"):
            KDB(k=k)


def watermelon_rows() -> list[tuple[dict, str]]:
    rows = [line.split() for line in WATERMELON.splitlines()]
    return [(dict(zip(FIELDS, values, strict=True)), label) for *values, label in rows]


def hand_cmi(rows, i: str, j: str) -> float:
    """I(x_i; x_j | y) straight from the definition, by counting rows."""
    n, total = len(rows), 0.0
    for c in {y for _, y in rows}:
        in_c = [x for x, y in rows if y == c]
        for vi, vj in itertools.product({x[i] for x in in_c}, {x[j] for x in in_c}):
            both = sum(x[i] == vi and x[j] == vj for x in in_c)
            if both:
                pi, pj = (sum(x[f] == v for x in in_c) / len(in_c) for f, v in ((i, vi), (j, vj)))
                total += both / n * math.log(both / len(in_c) / (pi * pj))
    return total


def test_tan_watermelon_by_hand():
    """The tree is the maximum spanning tree of the hand-computed CMI (all 16 trees of 4 attributes
    enumerated), and P(c | x) is the seed's Laplace-corrected product along it, in fractions."""
    rows = watermelon_rows()
    m = TAN(alpha=1.0, edge_weight="cmi")  # the seed's TAN
    for x, y in rows:
        m.learn_one(x, y)
    pairs = list(itertools.combinations(FIELDS, 2))
    weight = {frozenset(p): hand_cmi(rows, *p) for p in pairs}
    trees = [t for t in itertools.combinations(pairs, 3) if _spans(t)]
    assert len(trees) == 16
    best = max(trees, key=lambda t: sum(weight[frozenset(e)] for e in t))
    assert undirected(m.tree()) == undirected(best)
    parent = {child: p for p, child in m.tree()}
    score = {}
    for c in ("是", "否"):
        d_c = sum(y == c for _, y in rows)
        p = Fraction(d_c + 1, len(rows) + 2)
        for f in FIELDS:
            n_f = len({x[f] for x, _ in rows})
            given = [(parent[f], QUERY[parent[f]])] if f in parent else []
            match = [x for x, y in rows if y == c and all(x[g] == v for g, v in given)]
            p *= Fraction(sum(x[f] == QUERY[f] for x in match) + 1, len(match) + n_f)
        score[c] = p
    got = m.predict_proba_one(QUERY)
    for c, s in score.items():
        assert got[c] == pytest.approx(float(s / sum(score.values())), rel=1e-12)


def _spans(edges) -> bool:
    reached, frontier = {FIELDS[0]}, [FIELDS[0]]
    while frontier:
        a = frontier.pop()
        for e in edges:
            if a in e:
                (b,) = set(e) - {a}
                if b not in reached:
                    reached.add(b)
                    frontier.append(b)
    return len(reached) == len(FIELDS)


def test_clues_sum_to_the_log_odds_and_name_the_parents():
    xs, ys = sample_tree(TREE_A, 1000, seed=7)
    x = {**xs[0], "b": None}  # b missing: its children d and e fall back to P(x | c)
    for m in (_trained_tan(xs, ys), KDB(k=1), KDB(k=2)):
        if not m.n_events:
            m.learn_many(xs, ys)
        terms = m.log_odds_terms(x)
        lp = np.sort(m.predict_log_proba_many([x])[0])[::-1]
        assert sum(v for _, v in terms) == pytest.approx(lp[0] - lp[1], abs=1e-9)
        expected = ["prior"]
        for child in sorted(set(NAMES) - {"b"}):
            given = [f"{p}={x[p]}" for p in m.structure()[child] if x[p] is not None]
            expected.append(f"{child}={x[child]}" + (" | " + ", ".join(given) if given else ""))
        assert [name for name, _ in terms] == expected


# -- kDB ------------------------------------------------------------------------------------------
def pairwise_data(n: int, seed: int) -> tuple[list[dict], list[str]]:
    """Each pair (u_k, w_k): u uniform, w = u + y (mod 3) with probability 0.8; alone, neither says
    anything about y, together they do."""
    rng = np.random.default_rng(seed)
    ys = rng.integers(0, 2, n)
    xs: list[dict] = [{} for _ in range(n)]
    for k in range(3):
        u = rng.integers(0, 3, n)
        w = np.where(rng.random(n) < 0.8, (u + ys) % 3, rng.integers(0, 3, n))
        for i in range(n):
            xs[i][f"u{k}"], xs[i][f"w{k}"] = f"v{u[i]}", f"v{w[i]}"
    return xs, [f"y{y}" for y in ys]


def xor_data(n: int, seed: int) -> tuple[list[dict], list[str]]:
    """p XOR q XOR y = r with probability 0.95: no pair of attributes carries y, the triple does."""
    rng = np.random.default_rng(seed)
    ys, p, q = (rng.integers(0, 2, n) for _ in range(3))
    r = np.where(rng.random(n) < 0.95, p ^ q ^ ys, 1 - (p ^ q ^ ys))
    xs = [{"p": str(p[i]), "q": str(q[i]), "r": str(r[i])} for i in range(n)]
    return xs, [f"y{y}" for y in ys]


def test_kdb_beats_naive_bayes_on_pairwise_dependencies():
    xs, ys = pairwise_data(6000, seed=8)
    scores = {}
    for name, m in {"nb": CategoricalNB(), "kdb1": KDB(k=1), "kdb2": KDB(k=2), "tan": TAN()}.items():
        m.learn_many(xs[:5000], ys[:5000])
        proba = m.predict_proba_many(xs[5000:])
        assert np.isfinite(proba).all() and np.allclose(proba.sum(axis=1), 1.0, atol=1e-12)
        scores[name] = accuracy(m, xs[5000:], ys[5000:])
    assert scores["nb"] < 0.6 and min(scores["kdb1"], scores["kdb2"], scores["tan"]) > 0.8, scores


def test_kdb2_captures_a_dependence_on_two_parents_jointly():
    xs, ys = xor_data(5000, seed=9)
    k1, k2 = KDB(k=1), KDB(k=2)
    for m in (k1, k2):
        m.learn_many(xs[:4000], ys[:4000])
    last = [a for a, ps in k2.structure().items() if len(ps) == 2]
    assert len(last) == 1  # the last attribute in I(x; y) order has the other two as parents
    assert accuracy(k1, xs[4000:], ys[4000:]) < 0.6 < 0.9 < accuracy(k2, xs[4000:], ys[4000:])


def test_kdb_structure_on_a_tree():
    xs, ys = sample_tree(TREE_A, 4000, seed=10)
    k1, k2 = KDB(k=1), KDB(k=2)
    for m in (k1, k2):
        m.learn_many(xs, ys)
    # the root is the most informative attribute and comes first; every child comes after its
    # parent, whose conditional mutual information is the largest: kDB-1 is the TAN tree
    assert {c: ps for c, ps in k1.structure().items() if ps} == {c: [p] for c, p in TREE_A.items()}
    # with k = 2, the strongest parent first; one attribute has none, the second in order has one
    assert sorted(len(ps) for ps in k2.structure().values()) == [0, 1, 2, 2, 2, 2]
    assert all(ps[:1] == k1.structure()[c] for c, ps in k2.structure().items())


def test_kdb2_memory_guard():
    assert KDB(k=2).memory_bytes() == 0  # nothing allocated up front
    m = KDB(k=2, max_bytes=2**16)
    m.learn_many([{"a": "x", "b": "y"}], ["c"])
    before = repr(m.to_state())
    many = [{f"f{j}": f"v{i}" for j in range(8)} for i in range(200)]  # 56 triples an event
    with pytest.raises(FeatureError, match="max_bytes=65,536"):  # data-caused: dead-lettered
        m.learn_many(many, ["c"] * 200)
    assert repr(m.to_state()) == before  # refused before anything changed
    m.learn_many(many[:5], ["d"] * 5)  # 280 triples, 140 pairs, 42 values, 2 classes fit
    assert len(m._components[0].triples.triples) == 280 and m.classes == ["c", "d"]
    assert m.memory_bytes() <= 2**16
    with pytest.raises(FeatureError, match="max_bytes"):
        KDB(k=2, max_bytes=2**10).learn_many(many, ["c"] * 200)


# -- kDB with k = 2: exactness (the conformance suite runs k = 1) ----------------------------------
K2 = {"k": 2, "n_features": 2**12}  # warm-up 100 of 120 events: one shard fixes the bins


def _k2(xs, ys, w=None, **params):
    m = KDB(**{**K2, **params})
    m.learn_many(xs, ys, w)
    return m


def test_kdb2_learn_many_equals_learn_one(make_stream):
    xs, ys = make_stream()
    one = KDB(**K2)
    for x, y in zip(xs, ys, strict=True):
        one.learn_one(x, y)
    for chunk in (1, 7, 60, 200):
        many = KDB(**K2)
        for lo in range(0, len(xs), chunk):
            many.learn_many(xs[lo:lo + chunk], ys[lo:lo + chunk])
        assert_same(canonical(one.to_state()), canonical(many.to_state()))
        assert_same_predictions(one, many, xs)  # codes in another order: sums in another order


@pytest.mark.parametrize("split", [0, 1, 37, 60, 120])
def test_kdb2_merge_equals_sequential(make_stream, split):
    xs, ys = make_stream()
    a = _k2(xs[:split], ys[:split])
    a.merge(_k2(xs[split:], ys[split:]))
    seq = _k2(xs, ys)
    assert_same(canonical(seq.to_state()), canonical(a.to_state()))
    assert_same_predictions(seq, a, xs)


def test_kdb2_snapshot_round_trip_and_decay(make_stream):
    from streambayes.snapshot import pack, unpack

    xs, ys = make_stream()
    for params in ({}, {"decay": 0.99}, {"m": 2.0, "refit_every": 30}):
        m = _k2(xs[:80], ys[:80], **params)
        state = m.to_state()
        data, _ = pack(state, snapshot_id="1", model=m.name, config={}, positions={}, events=80,
                       created_at="2024-01-01T00:00:00Z")
        for restored in (model_from_state(state), model_from_state(unpack(data)[1])):
            assert_same(state, restored.to_state())
            assert np.array_equal(m.predict_log_proba_many(xs), restored.predict_log_proba_many(xs))
            restored.learn_many(xs[80:], ys[80:])
            assert_same(_k2(xs, ys, **params).to_state(), restored.to_state(), loose="decay" in params)


def test_kdb2_triples_equal_a_direct_count(make_stream):
    """Counted at event time or replayed when a warm-up fixes its bins, every triple of coded
    values is counted once: the table equals a direct count of the final codes."""
    xs, ys = make_stream(200, seed=3)
    m = _k2(xs, ys, warmup=20)
    table = m._components[0]
    assert not table.buffers  # every numeric attribute has its bins
    codes = table.attrs.encode(m.featurize(xs), learn=False)
    direct = TripleCounts()
    direct.grow(len(m.classes), table.attrs.n_codes)
    direct.add(np.array([m.classes.index(y) for y in ys]), codes, np.ones(len(xs)))
    assert np.array_equal(direct.view(), table.triples.view())
    pairs = PairCounts()
    pairs.grow(len(m.classes), table.attrs.n_codes)
    pairs.add(np.array([m.classes.index(y) for y in ys]), codes, np.ones(len(xs)))
    assert np.array_equal(pairs.view(), table.pairs.view())
