"""Sliding-window and fading-factor metrics (Gama, Sebastião & Rodrigues 2013)."""

import math

import numpy as np
import pytest
from river import metrics

from streambayes.evaluate.windows import (
    Fading,
    FadingAccuracy,
    FadingLogLoss,
    Sliding,
    SlidingAccuracy,
    SlidingLogLoss,
    WindowCurve,
)


def stream(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    return rng.exponential(1.0, n), rng.choice([0.5, 1.0, 2.0], n)


@pytest.mark.parametrize("window", [1, 7, 250])
def test_sliding_is_the_weighted_mean_of_the_last_window(window):
    values, weights = stream()
    s = Sliding(window)
    for i, (v, w) in enumerate(zip(values, weights, strict=True)):
        s.update(v, w)
        lo = max(0, i + 1 - window)
        expected = math.fsum(values[lo:i + 1] * weights[lo:i + 1]) / math.fsum(weights[lo:i + 1])
        assert s.get() == pytest.approx(expected, rel=1e-12)
        assert s.n == min(i + 1, window)


def test_sliding_forgets_a_huge_value_without_rounding_residue():
    s = Sliding(3)
    for v in (1e16, 1.0, 1.0, 1.0):
        s.update(v)
    assert s.get() == 1.0  # add-then-subtract would give 4/3 here


def test_fading_follows_the_recursion_and_its_closed_form():
    values, weights = stream(500)
    alpha = 0.99
    f = Fading(alpha)
    for v, w in zip(values, weights, strict=True):
        f.update(v, w)
    decay = alpha ** np.arange(len(values))[::-1]
    assert f.get() == pytest.approx(np.sum(decay * weights * values) / np.sum(decay * weights), rel=1e-12)


def test_fading_with_alpha_one_is_the_cumulative_mean_and_matches_river_accuracy():
    rng = np.random.default_rng(3)
    ys, ps = rng.integers(0, 3, 400), rng.integers(0, 3, 400)
    fade, river_acc = FadingAccuracy(alpha=1.0), metrics.Accuracy()
    for y, p in zip(ys.tolist(), ps.tolist(), strict=True):
        fade.update(y, p)
        river_acc.update(y, p)
    assert fade.get() == pytest.approx(river_acc.get(), rel=1e-12)


def test_fading_gives_recent_events_more_weight():
    f, cumulative = Fading(0.9), Fading(1.0)
    for i in range(200):
        error = 0.0 if i < 150 else 1.0
        f.update(error)
        cumulative.update(error)
    assert f.get() > 0.99 and cumulative.get() == pytest.approx(0.25)


def test_log_loss_matches_river_cross_entropy_while_the_window_holds_everything():
    rng = np.random.default_rng(5)
    sliding, fading, river_loss = SlidingLogLoss(1000), FadingLogLoss(1.0), metrics.CrossEntropy()
    for _ in range(300):
        p = float(rng.random())
        y_pred, y = {"a": p, "b": 1 - p}, str(rng.choice(["a", "b"]))
        for m in (sliding, fading, river_loss):
            m.update(y, y_pred)
    assert sliding.get() == pytest.approx(river_loss.get(), rel=1e-12)
    assert fading.get() == pytest.approx(river_loss.get(), rel=1e-12)


def test_log_loss_of_a_label_absent_from_the_prediction_is_the_clamp_not_zero():
    loss = SlidingLogLoss(10)
    loss.update("a", {"b": 1.0})  # River's CrossEntropy would add 0 here
    assert loss.get() == pytest.approx(-math.log(1e-15))
    loss.update("a", {"a": 1.0})
    assert math.isfinite(loss.get())


def test_sliding_accuracy_window():
    acc = SlidingAccuracy(4)
    for y, p in [(1, 1)] * 10 + [(1, 0)] * 2:
        acc.update(y, p)
    assert acc.get() == 0.5


@pytest.mark.parametrize("make", [lambda: Sliding(50), lambda: Fading(0.97)])
def test_merge_equals_learning_both_in_order(make):
    values, weights = stream(300, seed=9)
    a, b, both = make(), make(), make()
    for i, (v, w) in enumerate(zip(values, weights, strict=True)):
        (a if i < 180 else b).update(v, w)
        both.update(v, w)
    a.merge(b)
    assert a.get() == pytest.approx(both.get(), rel=1e-12) and a.n == both.n


def test_empty_and_invalid():
    assert Sliding(5).get() is None and Fading(0.5).get() is None
    for bad in (lambda: Sliding(0), lambda: Fading(0.0), lambda: Fading(1.5)):
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(ValueError):
        Sliding(3).merge(Sliding(4))


def test_window_curve_is_thinned_but_keeps_the_ends():
    curve = WindowCurve()
    for i in range(5000):
        curve.add(i, 0.5, 0.5)
    assert len(curve.events) <= 2001 and curve.events[0] == 0 and curve.events[-1] == 4999
