"""Weighted Gaussian summaries (weight, mean, M2) per row × column, mergeable.

A mini-batch is summarised on its own, then merged with the running summary by the
pairwise update of Chan, Golub & LeVeque (1979); a single event is Welford's (1962)
update, the same formula with a batch of one. Missing values (NaN) carry no weight.

>>> g = GaussianSummaries(n_rows=1, n_cols=1)
>>> g.update(np.zeros(4, np.int64), np.array([[125.], [100.], [70.], [120.]]), np.ones(4))
>>> g.mean.tolist(), g.variance(ddof=1).tolist()
([[103.75]], [[622.9166666666666]])
"""

from __future__ import annotations

import numpy as np


class GaussianSummaries:
    """Arrays ``weight``, ``mean``, ``m2`` of shape (rows, cols): one summary per cell."""

    def __init__(self, n_rows: int = 0, n_cols: int = 0) -> None:
        self.weight = np.zeros((n_rows, n_cols))
        self.mean = np.zeros((n_rows, n_cols))
        self.m2 = np.zeros((n_rows, n_cols))

    @property
    def shape(self) -> tuple[int, int]:
        return self.weight.shape

    def grow(self, n_rows: int, n_cols: int) -> None:
        """Add zero summaries so the arrays are at least (n_rows, n_cols)."""
        r, c = self.shape
        if n_rows <= r and n_cols <= c:
            return
        pad = ((0, max(0, n_rows - r)), (0, max(0, n_cols - c)))
        self.weight, self.mean, self.m2 = (np.pad(a, pad) for a in (self.weight, self.mean, self.m2))

    def update(self, rows: np.ndarray, values: np.ndarray, weights: np.ndarray,
               cols: np.ndarray | None = None) -> None:
        """Add events: ``rows`` (n,) row per event, ``values`` (n, cols) with NaN for missing;
        with ``cols``, ``values`` holds only those columns (the others are untouched)."""
        n_rows, n_cols = self.shape[0], (self.shape[1] if cols is None else len(cols))
        present = ~np.isnan(values)
        w = np.where(present, weights[:, None], 0.0)
        x = np.where(present, values, 0.0)
        flat = (rows[:, None] * n_cols + np.arange(n_cols)).ravel()
        size = n_rows * n_cols
        wb = np.bincount(flat, w.ravel(), size).reshape(n_rows, n_cols)
        sb = np.bincount(flat, (w * x).ravel(), size).reshape(n_rows, n_cols)
        with np.errstate(invalid="ignore", divide="ignore"):
            mb = np.where(wb > 0, sb / wb, 0.0)
        dev = x - mb[rows]
        m2b = np.bincount(flat, (w * dev * dev).ravel(), size).reshape(n_rows, n_cols)
        if cols is None:
            self._combine(wb, mb, m2b)
            return
        part = self.columns(cols)
        part._combine(wb, mb, m2b)
        self.weight[:, cols], self.mean[:, cols], self.m2[:, cols] = part.weight, part.mean, part.m2

    def columns(self, cols: np.ndarray) -> GaussianSummaries:
        """A copy of the summaries of columns ``cols`` only."""
        part = GaussianSummaries()
        part.weight, part.mean, part.m2 = self.weight[:, cols], self.mean[:, cols], self.m2[:, cols]
        return part

    def _combine(self, wb: np.ndarray, mb: np.ndarray, m2b: np.ndarray) -> None:
        wa, ma = self.weight, self.mean
        w = wa + wb
        with np.errstate(invalid="ignore", divide="ignore"):
            delta = mb - ma
            share = np.where(w > 0, wb / w, 0.0)
            self.mean = ma + delta * share
            self.m2 = self.m2 + m2b + np.where(w > 0, delta * delta * wa * share, 0.0)
        self.weight = w

    def merge(self, other: GaussianSummaries, row_map: np.ndarray, col_map: np.ndarray) -> None:
        """Merge ``other`` whose row ``i`` is our row ``row_map[i]`` (and likewise columns)."""
        wb, mb, m2b = (np.zeros(self.shape) for _ in range(3))
        ix = np.ix_(row_map, col_map)
        wb[ix], mb[ix], m2b[ix] = other.weight, other.mean, other.m2
        self._combine(wb, mb, m2b)

    def scale(self, factor: float) -> None:
        """Multiply every weight (decay); means are unchanged, M2 scales with the weight."""
        self.weight *= factor
        self.m2 *= factor

    def variance(self, ddof: int = 0, weight_scale: float = 1.0) -> np.ndarray:
        """``m2 / (W - ddof)`` with ``W`` the true weight (``weight · weight_scale``); 0 where undefined."""
        w = self.weight * weight_scale
        m2 = self.m2 * weight_scale
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(w - ddof > 0, m2 / (w - ddof), 0.0)

    def to_state(self) -> dict:
        return {"weight": self.weight.copy(), "mean": self.mean.copy(), "m2": self.m2.copy()}

    @classmethod
    def from_state(cls, state: dict) -> GaussianSummaries:
        g = cls()
        g.weight, g.mean, g.m2 = (np.array(state[k], np.float64) for k in ("weight", "mean", "m2"))
        return g
