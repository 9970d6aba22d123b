"""River's threshold-grid ROC AUC, updated a whole batch at a time.

:class:`BatchROCAUC` gives exactly the figure of ``river.metrics.ROCAUC(n_thresholds)`` fed the
same (truth, score, weight) triples one at a time: the same thresholds, the same per-threshold
confusion counts summed in stream order (a cumulative sum from the running total, which adds in the
same order as River's ``+=``, so even non-integer weights give the same floats) and the same
trapezoid (numpy's: the formula of scipy's, which River calls; a test checks the figures bit for
bit). River's per-event update costs one confusion-matrix update per threshold (50 in replay),
which dominated replay on long mail. The score each event brings is :func:`auc_score` of its
positive log-odds (:func:`_log_odds_many` for a batch).

>>> auc = BatchROCAUC(n_thresholds=10)
>>> auc.update_many(np.array([True, False, True, False]), np.array([0.9, 0.1, 0.4, 0.6]))
>>> round(auc.get(), 4)
0.75
"""

from __future__ import annotations

import math

import numpy as np


class BatchROCAUC:
    """ROC AUC over a fixed grid of score thresholds in [0, 1], as River computes it."""

    def __init__(self, n_thresholds: int = 10) -> None:
        if n_thresholds < 2:
            raise ValueError(f"n_thresholds must be >= 2, got {n_thresholds}")
        self.n_thresholds = n_thresholds
        thresholds = [i / (n_thresholds - 1) for i in range(n_thresholds)]
        thresholds[0] -= 1e-7
        thresholds[-1] += 1e-7
        self.thresholds = np.array(thresholds)
        # per threshold, River's ConfusionMatrix sums: data[True][True], sum_row[True],
        # sum_col[True] and the total of true positives (events predicted as they are)
        self._tp = np.zeros(n_thresholds)
        self._row = np.zeros(n_thresholds)
        self._col = np.zeros(n_thresholds)
        self._agree = np.zeros(n_thresholds)

    def update_many(self, truth: np.ndarray, scores: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Count a batch: ``truth`` (bool), ``scores`` (float), ``weights`` (default 1), in order."""
        truth = np.asarray(truth, dtype=bool)
        w = np.ones(len(truth)) if weights is None else np.asarray(weights, dtype=np.float64)
        pred = np.asarray(scores, dtype=np.float64)[None, :] > self.thresholds[:, None]
        for total, mask in ((self._tp, pred & truth), (self._row, np.broadcast_to(truth, pred.shape)),
                            (self._col, pred), (self._agree, pred == truth)):
            total[:] = _running_sum(total, np.where(mask, w, 0.0))

    def get(self) -> float:
        tp = self._tp
        fn, fp, tn = self._row - tp, self._col - tp, self._agree - tp
        tprs = [_safe_div(a, a + b) for a, b in zip(tp.tolist(), fn.tolist(), strict=True)]
        fprs = [_safe_div(a, a + b) for a, b in zip(fp.tolist(), tn.tolist(), strict=True)]
        return -float(np.trapezoid(x=fprs, y=tprs))  # scipy's trapezoid, as River's, is this formula


def _running_sum(start: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``start[i] + values[i, 0] + values[i, 1] + ...`` added left to right, per row."""
    if not values.shape[1]:
        return start
    return np.concatenate([start[:, None], values], axis=1).cumsum(axis=1)[:, -1]


def _safe_div(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        return 0.0


def auc_score(log_odds: float) -> float:
    """Monotone squash of log-odds into [0, 1] for River's threshold grid.

    >>> auc_score(0.0), round(auc_score(800.0), 3), auc_score(-math.inf)
    (0.5, 0.997, 0.0)
    """
    return 0.5 + math.atan(log_odds / 8.0) / math.pi


def _log_odds_many(log_proba: np.ndarray, pos: int | None) -> list[float]:
    """:func:`_log_odds` of every row; with two classes in one subtraction (the same floats:
    a single other class makes the log-sum-exp ``top + log(1.0)``, that is ``top``)."""
    if pos is None or log_proba.shape[1] != 2:
        return [_log_odds(row, pos) for row in log_proba]
    top = log_proba[:, 1 - pos]
    out = log_proba[:, pos] - top
    out[top == -math.inf] = math.inf
    return out.tolist()


def _log_odds(row: np.ndarray, pos: int | None) -> float:
    """log p(pos) - log p(not pos) from a row of log-probabilities."""
    if pos is None:
        return -math.inf
    rest = np.delete(row, pos)
    if rest.size == 0:
        return math.inf
    top = rest.max()
    if top == -math.inf:
        return math.inf
    return float(row[pos] - (top + math.log(np.exp(rest - top).sum())))
