"""The batch ROC AUC of replay equals River's per-event ROCAUC to the last bit."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from river import metrics

from streambayes.evaluate.threshold_auc import BatchROCAUC, _log_odds, _log_odds_many

GRID = [i / 9 for i in range(10)]  # River's thresholds for n_thresholds=10 (ends nudged by 1e-7)
event = st.tuples(st.booleans(), st.one_of(st.floats(0, 1), st.sampled_from(GRID)),
                  st.one_of(st.just(1.0), st.floats(0.01, 7.0)))


@settings(max_examples=200, deadline=None)
@given(st.lists(event, max_size=80), st.lists(st.integers(1, 30), min_size=1, max_size=10),
       st.sampled_from([2, 10, 50]))
def test_equals_river_fed_one_event_at_a_time(events, cuts, n_thresholds):
    river = metrics.ROCAUC(n_thresholds=n_thresholds)
    ours = BatchROCAUC(n_thresholds=n_thresholds)
    for truth, score, w in events:
        river.update(truth, score, w)
    lo, i = 0, 0
    while lo < len(events):
        chunk = events[lo:lo + cuts[i % len(cuts)]]
        ours.update_many(np.array([e[0] for e in chunk], bool), np.array([e[1] for e in chunk]),
                         np.array([e[2] for e in chunk]))
        lo, i = lo + len(chunk), i + 1
    assert ours.get() == river.get()  # bit for bit, fractional weights included


def test_empty_and_unweighted():
    auc = BatchROCAUC()
    assert auc.get() == metrics.ROCAUC().get()
    auc.update_many(np.array([], bool), np.array([]))
    auc.update_many(np.array([True, False]), np.array([0.8, 0.3]))
    river = metrics.ROCAUC()
    river.update(True, 0.8)
    river.update(False, 0.3)
    assert auc.get() == river.get()


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 4), st.integers(0, 3), st.lists(st.floats(-800, 0), min_size=4, max_size=40),
       st.data())
def test_log_odds_of_a_batch_equal_row_by_row(k, pos, values, data):
    rows = np.array(values[: len(values) // k * k]).reshape(-1, k)
    if data.draw(st.booleans()) and len(rows):
        rows[0, data.draw(st.integers(0, k - 1))] = -math.inf
    pos = None if pos >= k else pos
    want = [_log_odds(r, pos) for r in rows]
    assert _log_odds_many(rows, pos) == want
