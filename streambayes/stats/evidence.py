"""Lidstone smoothing chosen from the counts: the ``alpha`` that maximises the Dirichlet evidence.

For multinomial counts ``n_cw`` (class ``c``, id ``w`` among ``V`` seen ids, ``N_c = Σ_w n_cw``)
under a symmetric Dirichlet(``α``) prior per class, the marginal likelihood of the counts is, up
to a term free of ``α`` (MacKay & Peto 1995; Minka 2000):

    E(α) = Σ_c [ lgamma(Vα) - lgamma(N_c + Vα) + Σ_w ( lgamma(n_cw + α) - lgamma(α) ) ]

Zero counts add nothing to the inner sum, and equal counts (most are 1, 2, 3, ...) share one
``lgamma``, so one evaluation costs a sort of the nonzero counts and ``lgamma`` of the distinct ones. ``E`` is
evaluated on a log grid (:data:`GRID`) and the best interior point refined by the vertex of the
parabola through it and its neighbours (in ``log α``). The answer is a pure function of the counts
(given in a fixed order): the same counts, restored or merged, give the same ``α``.

>>> import numpy as np
>>> counts = np.array([[30.0, 1, 0, 0], [0, 2, 25, 3]])
>>> a = evidence_alpha(counts, counts.sum(axis=1), 4)
>>> bool(GRID[0] <= a <= GRID[-1]), round(a, 3) == round(evidence_alpha(counts, counts.sum(axis=1), 4), 3)
(True, True)
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

GRID = 10.0 ** np.arange(-3.0, 1.01, 0.5)  # 0.001 … 10, half a decade apart
REFIT_BITS = 3  # alpha="auto" is refitted after event n when n has at most this many significant bits


def is_refit_point(n: int) -> bool:
    """Whether ``alpha="auto"`` is refitted right after the ``n``-th event learned: when ``n``
    written in binary has at most :data:`REFIT_BITS` significant bits (1 … 8, 10, 12, 14, 16, 20,
    24, 28, 32, 40, …: four refits per doubling, each at most 25% more events than the last).
    The points depend on the event count only, not on mini-batch boundaries or predictions.

    >>> [n for n in range(1, 50) if is_refit_point(n)]
    [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48]
    """
    if n < 1:
        return False
    shift = max(n.bit_length() - REFIT_BITS, 0)
    return (n >> shift) << shift == n


def refit_points(start: int, stop: int) -> list[int]:
    """The refit points ``n`` with ``start < n <= stop`` (see :func:`is_refit_point`), ascending.

    >>> refit_points(9, 33), refit_points(40, 47)
    ([10, 12, 14, 16, 20, 24, 28, 32], [])
    """
    out, n = [], max(start + 1, 1)
    while n <= stop:
        shift = max(n.bit_length() - REFIT_BITS, 0)
        n = ((n + (1 << shift) - 1) >> shift) << shift  # the first point >= n
        if n.bit_length() - REFIT_BITS > shift:  # rounding up carried into a new bit length
            shift += 1
        if n <= stop:
            out.append(n)
        n += 1 << shift
    return out


def log_evidence(counts: np.ndarray, totals: np.ndarray, n_values: int, alphas: np.ndarray) -> np.ndarray:
    """``E(α)`` for each ``α`` of ``alphas``; ``counts`` (classes, ids), ``totals`` (classes,)."""
    nz = counts[counts > 0]
    values, times = _distinct(nz)
    a = np.asarray(alphas, np.float64)
    inner = (gammaln(values[None, :] + a[:, None]) * times).sum(axis=1) - len(nz) * gammaln(a)
    va = n_values * a
    outer = (gammaln(va)[:, None] - gammaln(np.asarray(totals)[None, :] + va[:, None])).sum(axis=1)
    return inner + outer


def _distinct(nz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``nz`` (ascending) and how often each occurs: counts repeat (1, 2,
    3, ...), so ``lgamma`` is taken once per value; whole counts are tallied by ``bincount``."""
    if len(nz) and nz.max() < 1 << 16:  # (nz holds positive counts only)
        whole = nz.astype(np.int64)
        if np.array_equal(whole, nz):
            times = np.bincount(whole)
            values = np.flatnonzero(times)
            return values.astype(np.float64), times[values]
    return np.unique(nz, return_counts=True)


def evidence_alpha(counts: np.ndarray, totals: np.ndarray, n_values: int, grid: np.ndarray = GRID) -> float:
    """The ``α`` of ``grid`` (refined by a parabola in ``log α``) that maximises :func:`log_evidence`;
    ``1.0`` (Laplace) while there is nothing to fit."""
    if n_values < 1 or not np.any(counts > 0):
        return 1.0
    e = log_evidence(counts, totals, n_values, grid)
    i = int(np.argmax(e))
    if i == 0 or i == len(grid) - 1:
        return float(grid[i])
    x = np.log(grid[i - 1:i + 2])
    y = e[i - 1:i + 2]
    den = (x[0] - x[1]) * (x[0] - x[2]) * (x[1] - x[2])
    a2 = (x[2] * (y[1] - y[0]) + x[1] * (y[0] - y[2]) + x[0] * (y[2] - y[1])) / den
    a1 = (x[2] ** 2 * (y[0] - y[1]) + x[1] ** 2 * (y[2] - y[0]) + x[0] ** 2 * (y[1] - y[2])) / den
    if not a2 < 0:  # not concave here: keep the grid point
        return float(grid[i])
    return float(np.exp(np.clip(-a1 / (2 * a2), x[0], x[2])))
