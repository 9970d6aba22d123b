"""ADWIN drift points over a model's 0/1 errors."""

import numpy as np
import pytest

from streambayes.evaluate.drift import DriftMonitor


def errors(rates_and_lengths, seed):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.random(n) < rate for rate, n in rates_and_lengths])


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_a_jump_from_5_to_50_percent_error_is_flagged_within_a_few_hundred_events(seed):
    monitor = DriftMonitor()
    for e in errors([(0.05, 5000), (0.5, 2000)], seed):
        monitor.update(e)
    assert monitor.points, "no drift detected"
    after = [p for p in monitor.points if p >= 5000]
    assert not [p for p in monitor.points if p < 5000], monitor.points  # no false alarm first
    assert after and after[0] < 5000 + 300, monitor.points
    assert monitor.error_rate == pytest.approx(0.5, abs=0.1)  # the window was cut to the new rate


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_a_stationary_stream_raises_no_alarm(seed):
    monitor = DriftMonitor()
    for e in errors([(0.05, 5000)], seed):
        assert not monitor.update(e)
    assert monitor.points == [] and monitor.n == 5000 and monitor.width == 5000


def test_points_use_the_given_positions_and_delta_trades_speed_for_caution():
    stream = errors([(0.05, 5000), (0.5, 2000)], seed=11)
    eager, cautious = DriftMonitor(delta=0.05), DriftMonitor(delta=1e-6)
    for i, e in enumerate(stream):
        eager.update(e, at=100_000 + i)
        cautious.update(e, at=100_000 + i)
    first = [min(p for p in m.points if p >= 105_000) for m in (eager, cautious)]
    assert 105_000 <= first[0] <= first[1]


def test_bad_delta():
    with pytest.raises(ValueError):
        DriftMonitor(delta=0.0)
