"""The calibrator's per-class log-sum-exp equals the (events, grid, classes) tensor bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streambayes.evaluate.calibration import OnlineCalibrator, _grid_lse


def tensor_lse(alphas: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The formula as first written: reductions over the classes axis of one 3-D tensor."""
    z = alphas[None, :, None] * rows[:, None, :]
    top = z.max(axis=2, keepdims=True)
    return (top + np.log(np.exp(z - top).sum(axis=2, keepdims=True)))[:, :, 0]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 200), st.integers(2, 9), st.integers(0, 2**32 - 1), st.booleans())
def test_grid_lse_equals_the_tensor_formula(n, k, seed, with_inf):
    rng = np.random.default_rng(seed)
    rows = -np.abs(rng.normal(0, rng.choice([1.0, 30.0, 700.0]), (n, k)))
    if with_inf:
        rows[rng.random((n, k)) < 0.2] = -np.inf
        rows[:, rng.integers(k)] = np.maximum(rows[:, 0], -5.0)  # a finite class per row
    alphas = OnlineCalibrator()._alphas
    got, want = _grid_lse(alphas, rows), tensor_lse(alphas, rows)
    assert got.shape == want.shape == (n, len(alphas))
    assert np.array_equal(got, want, equal_nan=True)
