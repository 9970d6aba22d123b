"""PURE calibration of posteriors: squashing ``P^α / Σ P^α`` fitted online, calibration error and
reliability bins.

Naive Bayes posteriors are too extreme: the independence assumption counts correlated evidence
several times, so a true 0.7 comes out as 0.99999 (Domingos & Pazzani 1997; Bennett 2000,
"Assessing the calibration of naive Bayes' posterior estimates"). Raising the posterior to a power
``α`` and renormalising — temperature scaling with ``α = 1/T`` (Guo et al. 2017, "On calibration of
modern neural networks") — shrinks every log-odds by ``α`` and keeps the ranking.

:class:`OnlineCalibrator` fits ``α`` prequentially: each prediction is squashed with the current
``α`` (:meth:`~OnlineCalibrator.transform`), then its outcome updates ``α``
(:meth:`~OnlineCalibrator.update`). The log loss ``ℓ(α) = logsumexp(α·l) − α·l_y`` of one event
with log-posterior row ``l`` and true class ``y`` is convex in ``α`` (its second derivative is the
variance of ``l`` under the squashed posterior), and sums of it over events are exact, additive
sufficient statistics when kept on a fixed grid of ``α`` values:

1. Keep ``L_g = Σ_t w_t ℓ_t(α_g)`` for a log-spaced grid ``α_g`` (optionally faded with a half-life).
2. Add a weak Gaussian prior on ``u = log α`` (mean 0, i.e. ``α = 1``): ``J_g = L_g + prior·u_g²/2``.
3. ``α`` = the grid minimiser of ``J``, refined by the parabola through it and its two neighbours.

Because the statistics add, two calibrators fitted on disjoint streams :meth:`~OnlineCalibrator.merge`.

>>> rng = np.random.default_rng(0)
>>> s = rng.normal(0, 2, 4000)                     # true log-odds of "positive"
>>> y = (rng.random(4000) < 1 / (1 + np.exp(-s))).astype(int)
>>> rows = -np.logaddexp(0, -np.outer(4 * s, [-1, 1]))  # reported log-odds four times too large
>>> cal = OnlineCalibrator()
>>> for lo in range(0, 4000, 100):
...     _ = cal.transform(rows[lo:lo + 100])       # prequential: predict first,
...     cal.update(rows[lo:lo + 100], y[lo:lo + 100])  # then learn
>>> round(cal.alpha, 2)
0.25
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from streambayes.errors import ModelError
from streambayes.stats.smoothing import log_normalize


def squash(log_proba: np.ndarray, alpha: float) -> np.ndarray:
    """``log(P^α / Σ P^α)`` row-wise, from log-probabilities, by log-sum-exp (never underflows).

    ``α = 1`` leaves a normalised row unchanged, ``α = 0`` makes it uniform over the classes of
    non-zero probability; a zero probability stays zero.

    >>> np.exp(squash(np.log([[0.99, 0.01]]), 0.5)).round(3).tolist()
    [[0.909, 0.091]]
    >>> np.exp(squash(np.array([-2000.0, 0.0]), 0.001)).round(3).tolist()
    [0.119, 0.881]
    """
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not math.isfinite(alpha) \
            or alpha < 0:
        raise ModelError(f"squash: alpha must be a finite number >= 0, got {alpha!r}")
    rows = np.asarray(log_proba, dtype=np.float64)
    flat = rows.ndim == 1
    rows = np.atleast_2d(rows)
    z = np.where(np.isneginf(rows), -np.inf, alpha * np.where(np.isneginf(rows), 0.0, rows))
    out = log_normalize(z)
    return out[0] if flat else out


def _weighted_grid_loss(alphas: np.ndarray, rows: np.ndarray, truth: np.ndarray,
                        v: np.ndarray) -> np.ndarray:
    """``Σ_t v_t ℓ_t(α_g)`` for every grid ``α_g``, where ``ℓ_t(α) = logsumexp(α·rows[t]) -
    α·truth[t]`` is event t's log loss after squashing (``truth[t]`` finite).

    With two classes in closed form, ``ℓ_t(α) = α·d_t·[t's top class is wrong] + log1p(e^(-α·d_t))``
    with ``d_t`` the gap between the two log-posteriors: one exponential and one logarithm per
    (event, α), against two and one and the maxima of the general form (the learner's calibration
    is a fifth of its time on two-class text); a test checks both agree to 1e-12."""
    if rows.shape[1] == 2:
        top = np.maximum(rows[:, 0], rows[:, 1])
        gap = top - np.minimum(rows[:, 0], rows[:, 1])  # inf when the other class has P = 0
        wrong = np.where(truth < top, gap, 0.0)  # the true class is finite, so then gap is
        return alphas * float(v @ wrong) + v @ np.log1p(np.exp(-np.multiply.outer(gap, alphas)))
    return v @ (_grid_lse(alphas, rows) - alphas[None, :] * truth[:, None])


_LSE_ROWS = 64  # rows per part of _grid_lse: its (rows, grid) temporaries fit in the L2 cache


def _grid_lse(alphas: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``logsumexp(α_g · rows[t])`` for every event ``t`` and grid ``α_g``, shape (n, grid).

    With fewer than 8 classes, one contiguous (n, grid) array per class: the same float
    operations as the (n, grid, classes) tensor (whose sums over fewer than 8 classes add left to
    right), without its slow reductions over a short last axis; a test checks them bit for bit."""
    k = rows.shape[1]
    if k < 8 and len(rows) > _LSE_ROWS:  # in parts that stay in cache (the same operations per element)
        out = np.empty((len(rows), len(alphas)))
        for start in range(0, len(rows), _LSE_ROWS):
            out[start:start + _LSE_ROWS] = _grid_lse(alphas, rows[start:start + _LSE_ROWS])
        return out
    if k >= 8:
        z = alphas[None, :, None] * rows[:, None, :]  # (n, grid, classes); alpha > 0 keeps -inf
        top = z.max(axis=2, keepdims=True)
        return (top + np.log(np.exp(z - top).sum(axis=2, keepdims=True)))[:, :, 0]
    z = [alphas[None, :] * rows[:, c, None] for c in range(k)]
    top = z[0].copy()
    for zc in z[1:]:
        np.maximum(top, zc, out=top)
    total = np.exp(z[0] - top)
    for zc in z[1:]:
        total += np.exp(zc - top)
    return top + np.log(total)


def _rows_and_truths(log_proba: np.ndarray, true_index, weight) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = np.atleast_2d(np.asarray(log_proba, dtype=np.float64))
    idx = np.atleast_1d(np.asarray(true_index))
    n = rows.shape[0]
    if idx.shape != (n,) or not np.issubdtype(idx.dtype, np.integer):
        raise ModelError(f"expected {n} integer true-class indices, got {idx.dtype} of shape {idx.shape}")
    if n and (idx.min() < 0 or idx.max() >= rows.shape[1]):
        raise ModelError(f"true-class index out of range for rows of {rows.shape[1]} classes")
    w = np.broadcast_to(np.asarray(weight, dtype=np.float64), (n,))
    if not (np.isfinite(w).all() and (w >= 0).all()):
        raise ModelError("weights must be finite and >= 0")
    return rows, idx, w


def log_loss(log_proba: np.ndarray, true_index, weights=1.0) -> float:
    """Mean (weighted) ``-log P(true class)``.

    >>> round(log_loss(np.log([[0.5, 0.5], [0.9, 0.1]]), [1, 0]), 4)
    0.3993
    """
    rows, idx, w = _rows_and_truths(log_proba, true_index, weights)
    return float(-(rows[np.arange(len(idx)), idx] @ w) / w.sum())


def top_label(log_proba: np.ndarray, true_index) -> tuple[np.ndarray, np.ndarray]:
    """``(P(top class), top class is right)`` per row: the input of top-label calibration error."""
    rows, idx, _ = _rows_and_truths(log_proba, true_index, 1.0)
    top = rows.argmax(axis=1)
    return np.exp(rows[np.arange(len(idx)), top]), (top == idx)


class OnlineCalibrator:
    """Fits the squashing exponent ``α`` online by minimising prequential log loss (see module).

    ``alpha_min``, ``alpha_max``, ``per_decade``: the log-spaced grid of ``α``; ``prior``: weight
    of the Gaussian prior on ``log α`` (pulls towards ``α = 1`` while little is seen);
    ``half_life``: events after which an outcome counts half (None: never forget).
    """

    def __init__(self, alpha_min: float = 1e-3, alpha_max: float = 10.0, per_decade: int = 16,
                 prior: float = 1.0, half_life: float | None = None) -> None:
        if not (0 < alpha_min < 1 < alpha_max and math.isfinite(alpha_max)):
            raise ModelError(f"need 0 < alpha_min < 1 < alpha_max, got {alpha_min}, {alpha_max}")
        if per_decade < 1 or prior < 0 or (half_life is not None and not half_life > 0):
            raise ModelError(f"need per_decade >= 1, prior >= 0, half_life > 0 or None; got "
                             f"{per_decade}, {prior}, {half_life}")
        self.alpha_min = alpha_min
        self.alpha_max = alpha_max
        self.per_decade = per_decade
        self.prior = prior
        self.half_life = half_life
        size = int(round(math.log10(alpha_max / alpha_min) * per_decade)) + 1
        self._u = np.linspace(math.log(alpha_min), math.log(alpha_max), size)
        self._alphas = np.exp(self._u)
        self._loss = np.zeros(size)  # L_g: faded weighted log loss at each grid alpha
        self.weight = 0.0
        self.n_events = 0
        self._alpha: float | None = None

    def params(self) -> dict:
        return {"alpha_min": self.alpha_min, "alpha_max": self.alpha_max, "per_decade": self.per_decade,
                "prior": self.prior, "half_life": self.half_life}

    @property
    def alpha(self) -> float:
        """The current exponent (1.0 before any update, with the default prior)."""
        if self._alpha is None:
            self._alpha = self._fit()
        return self._alpha

    def _fit(self) -> float:
        j = self._loss + 0.5 * self.prior * self._u ** 2
        g = int(np.argmin(j))
        u = self._u[g]
        if 0 < g < len(j) - 1:  # step 3: vertex of the parabola through g-1, g, g+1
            curvature = j[g + 1] - 2 * j[g] + j[g - 1]
            if curvature > 0:
                h = self._u[1] - self._u[0]
                u = u - h * (j[g + 1] - j[g - 1]) / (2 * curvature)
        return float(np.exp(u))

    def transform(self, log_proba: np.ndarray) -> np.ndarray:
        """Squash log-posterior rows with the current ``α`` (call before :meth:`update`)."""
        return squash(log_proba, self.alpha)

    def update(self, log_proba: np.ndarray, true_index, weight=1.0) -> None:
        """Add the outcomes of predictions already made: raw (unsquashed) log-posterior rows, the
        true class index of each and event weights."""
        rows, idx, w = _rows_and_truths(log_proba, true_index, weight)
        n = len(idx)
        if not n:
            return
        truth = rows[np.arange(n), idx]
        if not np.isfinite(truth).all():
            raise ModelError("calibration update: the true class has probability 0 (log-probability "
                             "-inf); no exponent can repair a zero, leave such events out")
        if self.half_life is None:
            self._loss += _weighted_grid_loss(self._alphas, rows, truth, w)  # step 1: Σ w ℓ_t(α_g)
            self.weight += float(w.sum())
        else:
            fade = 0.5 ** (1.0 / self.half_life)
            ages = fade ** np.arange(n - 1, -1, -1, dtype=np.float64)
            self._loss = self._loss * fade ** n + _weighted_grid_loss(self._alphas, rows, truth,
                                                                      w * ages)
            self.weight = self.weight * fade ** n + float(w @ ages)
        self.n_events += n
        self._alpha = None

    def merge(self, other: OnlineCalibrator) -> None:
        """Add the statistics of a calibrator fitted on a disjoint stream (same parameters)."""
        if other.params() != self.params():
            raise ModelError(f"cannot merge calibrators with different parameters: {self.params()} "
                             f"vs {other.params()}")
        self._loss = self._loss + other._loss
        self.weight += other.weight
        self.n_events += other.n_events
        self._alpha = None

    def to_state(self) -> dict:
        """Plain floats and one ndarray: ``params``, ``loss`` (per grid α), ``weight``, ``n_events``."""
        return {"params": self.params(), "loss": self._loss.copy(), "weight": self.weight,
                "n_events": self.n_events}

    @classmethod
    def from_state(cls, state: Mapping) -> OnlineCalibrator:
        cal = cls(**state["params"])
        loss = np.asarray(state["loss"], dtype=np.float64)
        if loss.shape != cal._loss.shape:
            raise ModelError(f"calibrator state has {loss.shape} losses, its grid needs {cal._loss.shape}")
        cal._loss = loss.copy()
        cal.weight = float(state["weight"])
        cal.n_events = int(state["n_events"])
        return cal


# -- calibration error ---------------------------------------------------------------------
@dataclass(frozen=True)
class Reliability:
    """Equal-width bins of predicted probability: per bin the (weighted) mean prediction, the
    observed frequency (NaN where a bin is empty) and the weight of its events."""

    edges: np.ndarray
    mean_predicted: np.ndarray
    observed: np.ndarray
    weight: np.ndarray


def reliability(p: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, n_bins: int = 10,
                weights: Sequence[float] | None = None) -> Reliability:
    """Bin predictions ``p`` of events with outcomes ``y`` (1 happened, 0 not) into ``n_bins``
    equal-width bins on [0, 1] (the last bin includes 1).

    >>> r = reliability([0.1, 0.2, 0.9, 0.95], [0, 1, 1, 1], n_bins=2)
    >>> r.mean_predicted.round(3).tolist(), r.observed.tolist(), r.weight.tolist()
    ([0.15, 0.925], [0.5, 1.0], [2.0, 2.0])
    """
    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    w = np.ones(len(p)) if weights is None else np.asarray(weights, dtype=np.float64)
    if not (p.ndim == 1 and p.shape == y.shape == w.shape):
        raise ModelError(f"reliability needs equally long 1-D inputs, got {p.shape}, {y.shape}, {w.shape}")
    if len(p) and not (np.isfinite(p).all() and p.min() >= 0 and p.max() <= 1):
        raise ModelError("reliability: probabilities must be finite and within [0, 1]")
    if n_bins < 1:
        raise ModelError(f"n_bins must be >= 1, got {n_bins}")
    bins = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)
    weight = np.bincount(bins, weights=w, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(bins, weights=w * p, minlength=n_bins) / weight
        observed = np.bincount(bins, weights=w * y, minlength=n_bins) / weight
    empty = weight == 0
    mean[empty] = np.nan
    observed[empty] = np.nan
    return Reliability(np.linspace(0.0, 1.0, n_bins + 1), mean, observed, weight)


def expected_calibration_error(p: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray,
                               n_bins: int = 10, weights: Sequence[float] | None = None) -> float:
    """``Σ_b (W_b / W) |mean predicted_b − observed_b|`` over equal-width bins (Naeini et al. 2015).

    Pass ``P(positive)`` with 0/1 labels, or the top-class probability with 1 where it was right
    (top-label ECE, see :func:`top_label`).

    >>> round(expected_calibration_error([0.1, 0.2, 0.9, 0.95], [0, 1, 1, 1], n_bins=2), 6)
    0.2125
    """
    r = reliability(p, y, n_bins, weights)
    full = r.weight > 0
    if not full.any():
        return math.nan
    gap = np.abs(r.mean_predicted[full] - r.observed[full])
    return float(gap @ r.weight[full] / r.weight.sum())


__all__ = ["OnlineCalibrator", "Reliability", "expected_calibration_error", "log_loss", "reliability",
           "squash", "top_label"]
