"""Calibration: squashing, the online exponent fit on over- and under-confident streams, its
state, and calibration error / reliability bins on hand-made examples."""

import json

import numpy as np
import pytest

from streambayes.errors import ModelError
from streambayes.evaluate.calibration import (
    OnlineCalibrator,
    expected_calibration_error,
    log_loss,
    reliability,
    squash,
    top_label,
)


def binary_rows(log_odds):
    """Log-posterior rows (negative, positive) for the given log-odds of the positive class."""
    return -np.logaddexp(0, -np.outer(log_odds, [-1.0, 1.0]))


def stream(n, scale, seed=0):
    """True log-odds s ~ N(0, 2²), y ~ Bernoulli(σ(s)); the reported log-odds are ``scale · s``."""
    rng = np.random.default_rng(seed)
    s = rng.normal(0.0, 2.0, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-s))).astype(np.int64)
    return binary_rows(scale * s), y


def prequential(cal, rows, y, batch=50):
    out = np.empty_like(rows)
    for lo in range(0, len(y), batch):
        out[lo:lo + batch] = cal.transform(rows[lo:lo + batch])  # predict with the current alpha,
        cal.update(rows[lo:lo + batch], y[lo:lo + batch])        # then learn from the outcome
    return out


# -- squashing -------------------------------------------------------------------------------
def test_squash_by_hand():
    p = np.exp(squash(np.log([[0.99, 0.01]]), 0.5))[0]
    assert p[0] == pytest.approx(0.99**0.5 / (0.99**0.5 + 0.01**0.5))
    rows = np.log([[0.7, 0.2, 0.1]])
    assert np.allclose(squash(rows, 1.0), rows)
    assert np.allclose(np.exp(squash(rows, 0.0)), 1 / 3)
    assert np.allclose(np.exp(squash(rows, 2.0)), np.array([[0.49, 0.04, 0.01]]) / 0.54)


def test_squash_never_underflows_and_keeps_zeros():
    out = squash(np.array([[-20000.0, 0.0, -np.inf]]), 0.0001)  # exp(-20000) is 0.0 in floats
    assert np.allclose(np.exp(out[0, :2]), [1 / (1 + np.e**2), np.e**2 / (1 + np.e**2)])
    assert out[0, 2] == -np.inf and np.isfinite(out[0, :2]).all()
    assert np.exp(squash(np.array([-np.inf, 0.0]), 0.0)).tolist() == [0.0, 1.0]


def test_squash_refuses_a_bad_exponent():
    with pytest.raises(ModelError, match="alpha must be a finite number >= 0, got -1"):
        squash(np.zeros((1, 2)), -1)


# -- the online fit ---------------------------------------------------------------------------
def test_calibration_reduces_log_loss_on_an_over_confident_stream():
    rows, y = stream(6000, scale=4.0)
    cal = OnlineCalibrator()
    calibrated = prequential(cal, rows, y)
    before, after = log_loss(rows, y), log_loss(calibrated, y)
    truth = log_loss(binary_rows((rows[:, 1] - rows[:, 0]) / 4), y)  # the true posteriors
    assert after < 0.75 * before
    assert after < truth + 0.01  # prequential, yet within a hair of knowing the truth
    assert cal.alpha == pytest.approx(0.25, rel=0.08)


def test_the_exponent_stays_near_one_when_calibrated_and_grows_when_under_confident():
    rows, y = stream(6000, scale=1.0, seed=1)
    cal = OnlineCalibrator()
    prequential(cal, rows, y)
    assert cal.alpha == pytest.approx(1.0, rel=0.08)
    rows, y = stream(6000, scale=0.5, seed=2)
    cal = OnlineCalibrator()
    calibrated = prequential(cal, rows, y)
    assert cal.alpha == pytest.approx(2.0, rel=0.08)
    assert log_loss(calibrated, y) < log_loss(rows, y)


def test_three_classes():
    rng = np.random.default_rng(4)
    logits = rng.normal(0, 1.5, (5000, 3))
    true = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    y = np.array([rng.choice(3, p=np.exp(row)) for row in true])
    cal = OnlineCalibrator()
    prequential(cal, squash(true, 3.0), y)
    assert cal.alpha == pytest.approx(1 / 3, rel=0.1)


def test_before_any_outcome_alpha_is_one_and_predictions_unchanged():
    cal = OnlineCalibrator()
    rows = np.log([[0.9, 0.1]])
    assert cal.alpha == pytest.approx(1.0) and np.allclose(cal.transform(rows), rows)


def test_fading_follows_a_change_of_over_confidence():
    first, y1 = stream(4000, scale=4.0, seed=5)
    second, y2 = stream(4000, scale=1.0, seed=6)
    fading, keeping = OnlineCalibrator(half_life=500), OnlineCalibrator()
    for cal in (fading, keeping):
        prequential(cal, first, y1)
        prequential(cal, second, y2)
    assert fading.alpha == pytest.approx(1.0, rel=0.15)
    assert keeping.alpha < 0.7  # still remembers the over-confident half


def test_weights_count_like_repeated_events_and_merge_equals_sequential():
    rows, y = stream(400, scale=3.0, seed=7)
    weighted, repeated = OnlineCalibrator(), OnlineCalibrator()
    weighted.update(rows, y, weight=np.where(y == 1, 2.0, 1.0))
    repeated.update(np.vstack([rows, rows[y == 1]]), np.concatenate([y, y[y == 1]]))
    assert weighted.alpha == pytest.approx(repeated.alpha, rel=1e-9)
    a, b, both = OnlineCalibrator(), OnlineCalibrator(), OnlineCalibrator()
    a.update(rows[:150], y[:150])
    b.update(rows[150:], y[150:])
    both.update(rows, y)
    a.merge(b)
    assert a.alpha == pytest.approx(both.alpha, rel=1e-9) and a.n_events == 400
    with pytest.raises(ModelError, match="different parameters"):
        a.merge(OnlineCalibrator(prior=2.0))


def test_state_round_trip_is_plain_and_exact():
    rows, y = stream(300, scale=3.0, seed=8)
    cal = OnlineCalibrator(half_life=1000)
    cal.update(rows, y)
    state = cal.to_state()
    json.dumps({**state, "loss": state["loss"].tolist()})  # plain values and one ndarray
    back = OnlineCalibrator.from_state(state)
    assert back.alpha == cal.alpha and back.params() == cal.params() and back.n_events == 300
    back.update(rows[:10], y[:10])
    cal.update(rows[:10], y[:10])
    assert back.alpha == cal.alpha


def test_update_refuses_a_zero_probability_truth_and_bad_indices():
    cal = OnlineCalibrator()
    with pytest.raises(ModelError, match="true class has probability 0"):
        cal.update(np.array([[0.0, -np.inf]]), [1])
    with pytest.raises(ModelError, match="out of range"):
        cal.update(np.log([[0.5, 0.5]]), [2])
    with pytest.raises(ModelError, match="expected 2 integer true-class indices"):
        cal.update(np.log([[0.5, 0.5], [0.5, 0.5]]), [0])


# -- calibration error and reliability ----------------------------------------------------------
def test_expected_calibration_error_by_hand():
    # bin 0: mean 0.15, observed 1/2 -> gap 0.35; bin 1: mean 0.925, observed 1 -> gap 0.075
    assert expected_calibration_error([0.1, 0.2, 0.9, 0.95], [0, 1, 1, 1], n_bins=2) == pytest.approx(
        0.5 * 0.35 + 0.5 * 0.075)
    # ten bins: 0.05 twice, never happened (gap .05); 0.95 twice, happened once (gap .45)
    assert expected_calibration_error([0.05, 0.05, 0.95, 0.95], [0, 0, 1, 0]) == pytest.approx(0.25)
    assert expected_calibration_error([0.25, 0.25, 0.25, 0.25], [1, 0, 0, 0]) == pytest.approx(0.0)
    weighted = expected_calibration_error([0.05, 0.95, 0.95], [0, 1, 0], weights=[2, 1, 1])
    assert weighted == pytest.approx(0.5 * 0.05 + 0.5 * 0.45)


def test_reliability_bins():
    r = reliability([0.0, 0.12, 0.18, 0.5, 1.0, 1.0], [0, 0, 1, 1, 1, 0], n_bins=5)
    assert r.edges.tolist() == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert r.weight.tolist() == [3.0, 0.0, 1.0, 0.0, 2.0]  # 1.0 falls in the last bin
    assert r.mean_predicted[[0, 2, 4]] == pytest.approx([0.1, 0.5, 1.0])
    assert r.observed[[0, 2, 4]] == pytest.approx([1 / 3, 1.0, 0.5])
    assert np.isnan(r.mean_predicted[[1, 3]]).all() and np.isnan(r.observed[[1, 3]]).all()
    with pytest.raises(ModelError, match="within \\[0, 1\\]"):
        reliability([1.2], [1])


def test_top_label_and_log_loss():
    rows = np.log([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    p, right = top_label(rows, [0, 1])
    assert p.tolist() == pytest.approx([0.7, 0.6]) and right.tolist() == [True, False]
    assert log_loss(rows, [0, 1]) == pytest.approx(-(np.log(0.7) + np.log(0.3)) / 2)
    assert log_loss(rows, [0, 1], weights=[3, 1]) == pytest.approx(-(3 * np.log(0.7) + np.log(0.3)) / 4)


def test_calibration_lowers_the_calibration_error_of_an_over_confident_stream():
    rows, y = stream(6000, scale=4.0, seed=9)
    calibrated = prequential(OnlineCalibrator(), rows, y)
    before = expected_calibration_error(np.exp(rows[:, 1]), y)
    after = expected_calibration_error(np.exp(calibrated[:, 1]), y)
    assert after < 0.5 * before


def test_reliability_diagram_draws_before_and_after():
    from streambayes.evaluate.calibration_plots import reliability_diagram

    fig = reliability_diagram(before=([0.1, 0.9, 0.99], [0, 1, 0]), after=([0.2, 0.7, 0.6], [0, 1, 0]),
                              title="t")
    top = fig.axes[0]
    labels = [line.get_label() for line in top.get_lines()]
    assert labels[0] == "perfect" and labels[1].startswith("before (ECE") and labels[2].startswith("after")
