"""Regressions found by review: merges during warm-up, decayed counts, capacity, weights."""

import random

import numpy as np
import pytest

from streambayes.errors import FeatureError
from streambayes.models import AODE, make_model


@pytest.mark.parametrize("name", ["aode", "spode", "tan", "kdb"])
def test_merging_a_shard_still_in_warmup_counts_each_pair_once(name):
    mine = [{"a": float(i), "z": float(i)} for i in range(4)]  # warm-up 4: both binned here
    theirs = [{"a": float(i), "z": float(3 - i)} for i in range(2)]  # still buffered there
    seq = make_model(name, warmup=4, bins=2)
    seq.learn_many(mine + theirs, ["p", "q", "p", "q", "p", "q"])
    a, b = make_model(name, warmup=4, bins=2), make_model(name, warmup=4, bins=2)
    a.learn_many(mine, ["p", "q", "p", "q"])
    b.learn_many(theirs, ["p", "q"])
    a.merge(b)
    assert a._components[0].pairs.view().sum() == seq._components[0].pairs.view().sum()
    np.testing.assert_allclose(a.predict_proba_many(mine), seq.predict_proba_many(mine), atol=1e-12)


def test_mutual_information_is_finite_on_decayed_subnormal_counts():
    from streambayes.models.seminaive.information import (
        class_mutual_information,
        conditional_mutual_information,
    )

    m = make_model("tan")
    rng = random.Random(1)
    for _ in range(300):
        a = rng.choice("xy")
        m.learn_one({"a": a, "b": a if rng.random() < 0.9 else "z", "c": rng.choice("uv")}, rng.choice("PQ"))
    t = m._components[0]
    table, attr_of, d = t.pairs.view().copy(), np.array(t.attrs.attr_of), len(t.attrs.names)
    clean = conditional_mutual_information(table, attr_of, d)
    g = t.attrs.gcodes[t.attrs.names.get("c")][0]
    tiny = table.copy()  # a value whose counts decayed to subnormal numbers
    tiny[:, g, :] = np.where(tiny[:, g, :] > 0, 4e-320, 0.0)
    tiny[:, :, g] = np.where(tiny[:, :, g] > 0, 4e-320, 0.0)
    cmi = conditional_mutual_information(tiny, attr_of, d)
    assert np.isfinite(cmi).all() and np.isfinite(class_mutual_information(tiny, attr_of, d)).all()
    a, b = t.attrs.names.get("a"), t.attrs.names.get("b")
    assert cmi[a, b] == pytest.approx(clean[a, b], rel=0.05)  # the a–b dependence is still seen


def test_new_classes_count_against_max_bytes_before_anything_changes():
    m = AODE(max_bytes=4000)
    m.learn_many([{"a": "x", "b": "y"}, {"a": "z", "b": "w"}], ["c1", "c2"])
    before = repr(m.to_state())
    with pytest.raises(FeatureError, match="max_bytes"):  # 60 new classes would not fit
        m.learn_many([{"a": "x", "b": "y"}] * 60, [f"new{i}" for i in range(60)])
    assert repr(m.to_state()) == before
    m.learn_many([{"a": "x", "b": "w"}], ["c1"])  # known classes and values still learn
    assert m.n_events == 3


def test_weight_two_completing_the_warmup_is_the_event_twice():
    twice, weighted = AODE(warmup=2, bins=2), AODE(warmup=2, bins=2)
    for m, events in ((twice, [(1.0, 1), (5.0, 1), (5.0, 1)]), (weighted, [(1.0, 1), (5.0, 2)])):
        for v, w in events:
            m.learn_one({"v": v}, "y", w=w)
    edges = [m._components[0].attrs.edges[0].tolist() for m in (twice, weighted)]
    assert edges[0] == edges[1]


def test_bins_are_not_crowded_out_by_categories_and_order_is_canonical():
    from streambayes.errors import LimitError

    rows = [("more", "p"), ("lots", "q"), (1.0, "p"), (2.0, "q"), (3.0, "p"), (4.0, "q")] * 3
    one, many = AODE(warmup=3, bins=3, max_values=2), AODE(warmup=3, bins=3, max_values=2)
    for v, y in rows:
        one.learn_one({"v": v}, y)
    many.learn_many([{"v": v} for v, _ in rows], [y for _, y in rows])
    assert repr(one.to_state()) == repr(many.to_state())
    attrs = one._components[0].attrs
    assert attrs.edges[0] is not None and attrs.n_categories(0) == 2  # 2 categories and the bins
    with pytest.raises(LimitError):  # a third category is past max_values: refused, not dropped
        one.learn_one({"v": "some"}, "q")
    assert repr(one.to_state()) == repr(many.to_state())


def test_schema_is_enforced_when_predicting_too():
    m = AODE(schema=["a"])
    m.learn_one({"a": "x"}, "y")
    with pytest.raises(FeatureError, match="unknown attribute 'b'"):
        m.predict_proba_one({"a": "x", "b": "z"})
