"""The calibrator's per-class log-sum-exp equals the (events, grid, classes) tensor bit for bit, and
its two-class closed form equals the general form."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streambayes.evaluate.calibration import OnlineCalibrator, _grid_lse, _weighted_grid_loss


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


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 300), st.integers(0, 2**32 - 1), st.booleans(), st.booleans())
def test_the_two_class_closed_form_equals_the_general_loss(n, seed, with_inf, shifted):
    rng = np.random.default_rng(seed)
    rows = rng.normal(0, rng.choice([0.01, 1.0, 30.0, 700.0]), (n, 2))
    if not shifted:  # log-posteriors (normalised), else any rows: the loss is shift-invariant
        rows -= np.logaddexp(rows[:, 0], rows[:, 1])[:, None]
    ties = rng.random(n) < 0.1
    rows[ties, 1] = rows[ties, 0]
    truth_index = rng.integers(0, 2, n)
    if with_inf:  # the other class impossible in some rows (the true class never is)
        gone = rng.random(n) < 0.3
        rows[gone, 1 - truth_index[gone]] = -np.inf
    truth = rows[np.arange(n), truth_index]
    alphas = OnlineCalibrator()._alphas
    v = rng.random(n) * rng.choice([0.0, 1.0], n, p=[0.1, 0.9])
    general = v @ (_grid_lse(alphas, rows) - alphas[None, :] * truth[:, None])
    got = _weighted_grid_loss(alphas, rows, truth, v)
    assert got.shape == general.shape == alphas.shape
    assert np.allclose(got, general, rtol=1e-12, atol=1e-12 * (1 + np.abs(general).max()))


def test_a_two_class_calibrator_fits_as_the_general_form_does():
    rng = np.random.default_rng(3)
    x = rng.normal(0, 8, (500, 2))
    rows = x - np.logaddexp(x[:, 0], x[:, 1])[:, None]
    truth_index = (rng.random(500) < 1 / (1 + np.exp(-0.3 * (x[:, 1] - x[:, 0])))).astype(int)
    for half_life in (None, 200.0):
        calibrator = OnlineCalibrator(half_life=half_life)
        for part in np.array_split(np.arange(500), 7):
            calibrator.update(rows[part], truth_index[part])
        three = OnlineCalibrator(half_life=half_life)  # the general form: a third, impossible class
        padded = np.hstack([rows, np.full((500, 1), -np.inf)])
        for part in np.array_split(np.arange(500), 7):
            three.update(padded[part], truth_index[part])
        assert np.allclose(calibrator._loss, three._loss, rtol=1e-12)
        assert abs(calibrator.alpha - three.alpha) < 1e-9
        assert 0.1 < calibrator.alpha < 0.8  # over-confident posteriors are squashed
