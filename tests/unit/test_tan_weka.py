"""TAN's Weka-level options: Bayesian-score edge weights and the missing-as-a-value rule."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import gammaln

from streambayes.errors import FeatureError
from streambayes.models import TAN, model_from_state
from streambayes.models.seminaive.attributes import MISSING
from streambayes.stats.bayes_score import bayes_gain, bayes_gain_dense

from .test_conformance import assert_same, canonical


def _rows(n: int, seed: int, missing: float = 0.0) -> tuple[list[dict], list[str]]:
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for _ in range(n):
        y = str(rng.integers(3))
        a = str(rng.integers(3))
        b = a if rng.random() < 0.7 else str(rng.integers(4))  # b follows a
        x = {"a": a, "b": b, "c": str(rng.integers(2))}
        for f in list(x):
            if rng.random() < missing:
                x[f] = None if rng.random() < 0.5 else x.pop(f)  # None or absent
        xs.append(x)
        ys.append(y)
    return xs, ys


def _family_score(rows: list[tuple], child: str, parent: str | None, alpha: float) -> float:
    """log marginal likelihood of ``child`` given the class (and ``parent``), Dirichlet ``alpha``
    per cell, over the rows where child and (if given) parent are known; by hand."""
    values = sorted({x[child] for x, _ in rows})
    counts: dict = {}
    for x, y in rows:
        key = (y, x[parent] if parent else None)
        counts.setdefault(key, {v: 0 for v in values})[x[child]] += 1
    r = len(values)
    return sum(sum(gammaln(alpha + n) - gammaln(alpha) for n in cell.values())
               - gammaln(sum(cell.values()) + alpha * r) + gammaln(alpha * r) for cell in counts.values())


def test_bayes_gain_equals_the_family_scores_by_hand():
    xs, ys = _rows(300, seed=1, missing=0.1)
    m = TAN()
    m.learn_many(xs, ys)
    table = m._components[0]
    names = list(table.attrs.names.values)
    gain = bayes_gain(table.pairs, np.array(table.attrs.attr_of), len(names), table.attrs.n_values(), 0.5)
    for i, child in enumerate(names):
        for j, parent in enumerate(names):
            if i == j:
                continue
            rows = [(x, y) for x, y in zip(xs, ys, strict=True)
                    if x.get(child) is not None and x.get(parent) is not None]
            want = _family_score(rows, child, parent, 0.5) - _family_score(rows, child, None, 0.5)
            assert gain[i, j] == pytest.approx(want, abs=1e-9), (child, parent)
    dense = bayes_gain_dense(table.pairs.view(), np.array(table.attrs.attr_of), len(names),
                             table.attrs.n_values(), 0.5)
    np.testing.assert_allclose(dense, gain, atol=1e-9)


def test_bayes_edges_link_the_dependent_pair():
    xs, ys = _rows(2000, seed=2)
    m = TAN(edge_weight="bayes")
    m.learn_many(xs, ys)
    assert {frozenset(e) for e in m.tree()} == {frozenset(("a", "b"))}  # c independent: not linked


def test_missing_as_a_value_is_a_category_of_its_own():
    xs, ys = _rows(400, seed=3, missing=0.2)
    schema = ["a", "b", "c"]
    filled = [{f: x[f] if x.get(f) is not None else MISSING for f in schema} for x in xs]
    m = TAN(missing="value", schema=schema)
    m.learn_many(xs, ys)
    ref = TAN(schema=schema)
    ref.learn_many(filled, ys)
    queries = [{"a": "1"}, {"a": "2", "b": None, "c": "0"}, {"b": "3"}]
    got = m.predict_proba_many(queries)
    want = ref.predict_proba_many([{f: q.get(f) if q.get(f) is not None else MISSING for f in schema}
                                   for q in queries])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    skip = TAN(schema=schema)
    skip.learn_many(xs, ys)
    assert not np.allclose(skip.predict_proba_many(queries), got)


def test_missing_as_a_value_per_event_equals_batches_and_round_trips():
    xs, ys = _rows(300, seed=4, missing=0.3)
    for i, x in enumerate(xs[:150]):  # a numeric attribute that warms up (bins fixed later)
        x["n"] = float(i % 7)
    one = TAN(missing="value", schema=["a", "b", "c", "n"], warmup=50)
    for x, y in zip(xs, ys, strict=True):
        one.learn_one(x, y)
    many = TAN(missing="value", schema=["a", "b", "c", "n"], warmup=50)
    for lo in range(0, len(xs), 64):
        many.learn_many(xs[lo:lo + 64], ys[lo:lo + 64])
    assert_same(canonical(one.to_state()), canonical(many.to_state()))
    back = model_from_state(one.to_state())
    np.testing.assert_allclose(back.predict_proba_many(xs[:20]), one.predict_proba_many(xs[:20]), rtol=1e-12)


def test_missing_as_a_value_needs_a_schema():
    with pytest.raises(FeatureError, match="schema"):
        TAN(missing="value").learn_many([{"a": "x"}], ["y"])
    with pytest.raises(FeatureError, match="missing"):
        TAN(missing="mode", schema=["a"]).learn_many([{"a": "x"}], ["y"])


def test_averaged_tan_is_the_mean_over_the_roots():
    rng = np.random.default_rng(5)
    xs, ys = [], []
    for _ in range(800):
        a = str(rng.integers(3))
        b = a if rng.random() < 0.8 else str(rng.integers(3))
        c = b if rng.random() < 0.8 else str(rng.integers(3))
        xs.append({"a": a, "b": b, "c": c, "d": str(rng.integers(2))})
        ys.append(str((int(a) + int(c)) % 2 if rng.random() < 0.8 else rng.integers(2)))
    avg = TAN(root="average")
    avg.learn_many(xs, ys)
    assert len(avg.tree()) >= 2  # a chain a - b - c: the roots give different directions
    rooted = []
    for name in "abcd":
        m = TAN(root=name)
        m.learn_many(xs, ys)
        rooted.append(np.exp(m.joint_log_likelihood_many(xs[:40])))  # P(c, x) of each rooting
    assert not np.allclose(rooted[0], rooted[2])
    joint = np.mean(rooted, axis=0)  # averaged like AODE: the mean joint, normalised
    np.testing.assert_allclose(avg.predict_proba_many(xs[:40]), joint / joint.sum(axis=1, keepdims=True),
                               rtol=1e-10)
