"""The per-event path of the semi-naive learners (learn_one / predict_proba_one without the
mini-batch machinery) gives the counts and posteriors of the mini-batch path."""

from __future__ import annotations

import numpy as np
import pytest

from streambayes.models import make_model

from .test_conformance import assert_same, canonical


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
