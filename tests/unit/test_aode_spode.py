"""AODE and SPODE against hand computations on the watermelon table (reference 002)."""

import math
from fractions import Fraction

import numpy as np
import pytest

from streambayes.models import AODE, SPODE, CategoricalNB

from .test_reference_examples import FIELDS, QUERY, WATERMELON

ROWS = [line.split() for line in WATERMELON.splitlines()]
CLASSES = ("是", "否")


def learn(model, fields=FIELDS):
    for *values, label in ROWS:
        x = dict(zip(FIELDS, values, strict=True))
        model.learn_one({f: x[f] for f in fields}, label)
    return model


def count(**where) -> int:
    """|D_{...}|: rows matching every field=value (class under the key "label")."""
    def match(row):
        x = dict(zip((*FIELDS, "label"), row, strict=True))
        return all(x[f] == v for f, v in where.items())
    return sum(map(match, ROWS))


def hand_aode(query: dict) -> dict:
    """P(c|x) ∝ Σ_i P̂(c, x_i) Π_{j≠i} P̂(x_j | c, x_i), the seed's estimates, exact fractions."""
    n, n_classes, n_values = len(ROWS), len(CLASSES), 3  # every attribute has 3 values here
    score = {}
    for c in CLASSES:
        total = Fraction(0)
        for i, xi in query.items():
            d_c_xi = count(label=c, **{i: xi})
            term = Fraction(d_c_xi + 1, n + n_classes * n_values)
            for j, xj in query.items():
                if j != i:
                    term *= Fraction(count(label=c, **{i: xi, j: xj}) + 1, d_c_xi + n_values)
            total += term
        score[c] = total
    z = sum(score.values())
    return {c: s / z for c, s in score.items()}


def test_aode_watermelon_by_hand():
    # One parent by hand: P̂(是, 色泽=青绿) = (3 + 1) / (17 + 2·3) = 4/23, and
    # P̂(根蒂=稍蜷 | 是, 青绿) = (|D_是,青绿,稍蜷| + 1) / (|D_是,青绿| + 3) = (1 + 1) / (3 + 3).
    assert count(label="是", 色泽="青绿") == 3 and count(label="是", 色泽="青绿", 根蒂="稍蜷") == 1
    expected = hand_aode(QUERY)
    got = learn(AODE()).predict_proba_one(QUERY)
    for c in CLASSES:
        assert got[c] == pytest.approx(float(expected[c]), rel=1e-12, abs=1e-12)
    assert max(got, key=got.get) == "是"
    # the unnormalised estimate too (log of the sum over parents), to 1e-12
    jll = learn(AODE()).joint_log_likelihood_one(QUERY)
    n_classes, score = 2, {}
    for c in CLASSES:  # recompute the raw sum of the hand formula
        total = Fraction(0)
        for i, xi in QUERY.items():
            term = Fraction(count(label=c, **{i: xi}) + 1, 17 + n_classes * 3)
            for j, xj in QUERY.items():
                if j != i:
                    term *= Fraction(count(label=c, **{i: xi, j: xj}) + 1, count(label=c, **{i: xi}) + 3)
            total += term
        score[c] = math.log(total)
    assert jll == pytest.approx(score, rel=1e-12)


def test_aode_frequency_limit_and_fallback_to_naive_bayes():
    m = learn(AODE(min_count=100))  # no value is seen 100 times: no parent qualifies
    nb = learn(CategoricalNB(alpha=1.0, prior_alpha=1.0))
    got, want = m.predict_proba_one(QUERY), nb.predict_proba_one(QUERY)
    assert got == pytest.approx(want, rel=1e-12)


def test_aode_with_a_single_attribute_equals_naive_bayes():
    for field in FIELDS:
        aode = learn(AODE(alpha=0.0), fields=(field,))
        nb = learn(CategoricalNB(alpha=0.0), fields=(field,))
        for value in {r[FIELDS.index(field)] for r in ROWS}:
            x = {field: value}
            assert aode.predict_proba_one(x) == pytest.approx(nb.predict_proba_one(x), rel=1e-12, abs=1e-15)


def test_spode_with_given_parent_is_that_parent_term():
    parent = "纹理"
    m = learn(SPODE(parent=parent))
    n_classes = 2
    score = {}
    for c in CLASSES:
        xi = QUERY[parent]
        term = Fraction(count(label=c, **{parent: xi}) + 1, 17 + n_classes * 3)
        for j, xj in QUERY.items():
            if j != parent:
                d_c_xi = count(label=c, **{parent: xi})
                term *= Fraction(count(label=c, **{parent: xi, j: xj}) + 1, d_c_xi + 3)
        score[c] = term
    z = sum(score.values())
    got = m.predict_proba_one(QUERY)
    assert got == pytest.approx({c: float(s / z) for c, s in score.items()}, rel=1e-12)


@pytest.mark.parametrize("select", ["prequential", "cmi"])
def test_spode_chooses_the_parent_that_predicts_best(select):
    rng = np.random.default_rng(0)
    m = SPODE(select=select)
    xs, ys = [], []
    for _ in range(3000):  # "key" determines "a" and "b" given the class; "noise" is noise
        y = str(rng.integers(2))
        key = str(rng.integers(4))
        a = str((int(key) + int(y)) % 4) if rng.random() < 0.95 else str(rng.integers(4))
        b = str((int(key) * 3 + int(y)) % 4) if rng.random() < 0.95 else str(rng.integers(4))
        xs.append({"key": key, "a": a, "b": b, "noise": str(rng.integers(3))})
        ys.append(y)
    for i in range(0, 3000, 100):
        m.learn_many(xs[i:i + 100], ys[i:i + 100])
    assert m.super_parent == "key"
    if select == "prequential":
        tallies = m._components[0].tallies
        assert tallies["key"] < min(tallies[k] for k in ("a", "b", "noise"))


def test_numeric_attributes_are_binned_after_warmup():
    rng = np.random.default_rng(1)
    m = AODE(warmup=50, bins=4)
    ys = rng.choice(["lo", "hi"], size=400)
    xs = [{"v": float(rng.normal(0 if y == "lo" else 3)), "tag": "t"} for y in ys]
    m.learn_many(xs[:30], ys[:30].tolist())
    table = m._components[0]
    assert table.attrs.edges[table.attrs.names.get("v")] is None and len(table.buffers) == 1
    m.learn_many(xs[30:], ys[30:].tolist())
    edges = table.attrs.edges[table.attrs.names.get("v")]
    assert len(edges) == 3 and not table.buffers
    # every event's value was counted once the edges were fixed, the warm-up ones included
    assert table.pairs.view()[:, table.attrs.gcodes[table.attrs.names.get("v")]][:, :, table.attrs.gcodes[
        table.attrs.names.get("v")]].trace(axis1=1, axis2=2).sum() == 400
    assert m.predict_one({"v": 3.5, "tag": "t"}) == "hi" and m.predict_one({"v": -1.0}) == "lo"


def test_mixed_attribute_is_bins_plus_categories_and_schema_is_enforced():
    from streambayes.errors import FeatureError

    m = AODE(warmup=6, bins=3, schema=["children", "form"])
    rows = [(1, "a"), (2, "a"), ("more", "b"), (3, "b"), (1, "a"), (2, "a"), (3, "b"), ("more", "b")] * 4
    for children, form in rows:  # a CSV column such as nursery's "children": 1, 2, 3 or "more"
        m.learn_one({"children": children, "form": form}, "y" if form == "a" else "n")
    t = m._components[0]
    a = t.attrs.names.get("children")
    assert t.attrs.edges[a] is not None and "more" in t.attrs.values[a]
    assert m.predict_one({"children": "more"}) == "n" and m.predict_one({"children": 1}) == "y"
    with pytest.raises(FeatureError, match="unknown attribute 'shape'"):
        m.learn_one({"shape": "round"}, "y")
    assert m.n_events == len(rows)  # the refused event changed nothing


@pytest.mark.parametrize("name", ["aode", "spode", "mnb", "bnb", "cnb"])
def test_a_refused_batch_changes_nothing(name):
    from streambayes.errors import FeatureError
    from streambayes.models import make_model

    m = make_model(name, schema=["colour", "n"]) if name in ("aode", "spode") else make_model(name)
    m.learn_one({"colour": "red", "n": 2.0, "text": "hello"}, "a")
    before = m.to_state()
    bad = {"shape": "round"} if name in ("aode", "spode") else {"n": -3.0}
    with pytest.raises(FeatureError):
        m.learn_many([{"colour": "blue", "text": "new words"}, bad], ["a", "brand-new-label"])
    assert m.classes == ["a"] and repr(m.to_state()) == repr(before)


def test_high_cardinality_is_bounded():
    from streambayes.errors import FeatureError, LimitError

    m = AODE(max_values=50, max_bytes=2**20)
    with pytest.raises(LimitError, match="'u50' would exceed max_values=50"):  # the batch is refused
        m.learn_many([{"id": f"u{i}", "kind": "k"} for i in range(200)], ["a", "b"] * 100)
    assert m.n_events == 0 and m.classes == []
    m.learn_many([{"id": f"u{i}", "kind": "k"} for i in range(50)], ["a", "b"] * 25)  # at the bound
    table = m._components[0]
    assert len(table.attrs.values[table.attrs.names.get("id")]) == 50 and table.attrs.dropped == 0
    assert m.memory_bytes() < 2**20
    before = repr(m.to_state())
    with pytest.raises(LimitError):
        m.learn_one({"id": "u50", "kind": "k"}, "a")
    assert repr(m.to_state()) == before
    with pytest.raises(FeatureError, match="max_bytes"):  # 200 events × 780 pairs could need 2.5 MB
        m.learn_many([{f"f{j}": f"v{i % 50}" for j in range(40)} for i in range(200)], ["a"] * 200)
    assert repr(m.to_state()) == before
    # 40 attributes × 50 values: classes × values² dense counts would need 64 MB; the pairs that
    # occur (50 events × 780) fit, and what is stored stays under max_bytes
    m.learn_many([{f"f{j}": f"v{i}" for j in range(40)} for i in range(50)], ["a"] * 50)
    assert m.memory_bytes() < 2**20 and m.predict_one({"f0": "v3", "f1": "v3"}) == "a"
