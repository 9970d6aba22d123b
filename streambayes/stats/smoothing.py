"""Smoothed log-probabilities from counts: Lidstone/Laplace, m-estimate, class priors.

Counts stay counts (STYLE habit 2); these functions add the prior's pseudo-counts and
normalise, in log space. A zero count under ``alpha = 0`` gives ``-inf``: that is the
maximum-likelihood answer, and the caller decides what an all-``-inf`` row means.

Lidstone (Laplace when ``alpha = 1``): ``(n + α) / (N + α·V)``

>>> import numpy as np
>>> round(float(np.exp(lidstone_log(np.array(3.0), 8.0, 3, 1.0))), 12)  # watermelon: (3+1)/(8+3)
0.363636363636

m-estimate (Mitchell 6.9.1.1; Cestnik 1990): ``(n + m·p) / (N + m)``; with ``p = 1/V`` and
``m = V`` it is Mitchell's text rule ``(n_k + 1) / (n + |Vocabulary|)``.

>>> float(np.exp(m_estimate_log(np.array(2.0), 10.0, m=5.0, p=0.2)))
0.2
"""

from __future__ import annotations

import numpy as np


def lidstone_log(counts: np.ndarray, totals, n_values, alpha: float) -> np.ndarray:
    """``log((counts + α) / (totals + α·n_values))``, broadcasting."""
    if alpha > 0:  # no zero can reach the log: skip the (costly) error-state switch
        return np.log(counts + alpha) - np.log(totals + alpha * n_values)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(counts + alpha) - np.log(totals + alpha * np.asarray(n_values, np.float64))


def m_estimate_log(counts: np.ndarray, totals, m: float, p) -> np.ndarray:
    """``log((counts + m·p) / (totals + m))``, broadcasting."""
    with np.errstate(divide="ignore"):
        return np.log(counts + m * np.asarray(p, np.float64)) - np.log(totals + m)


def class_prior_log(class_counts: np.ndarray, alpha: float = 0.0) -> np.ndarray:
    """``log((|D_c| + α) / (|D| + α·N))``: maximum likelihood for ``α = 0``, Laplace for 1.

    >>> np.allclose(class_prior_log(np.array([8.0, 9.0]), 1.0), np.log([9 / 19, 10 / 19]))
    True
    """
    return lidstone_log(class_counts, class_counts.sum(), len(class_counts), alpha)


def log_normalize(jll: np.ndarray) -> np.ndarray:
    """Row-wise ``jll - logsumexp(jll)``; a row of all ``-inf`` becomes uniform.

    >>> log_normalize(np.array([[0.0, np.log(3.0)]])).round(4).tolist()
    [[-1.3863, -0.2877]]
    """
    jll = np.asarray(jll, np.float64)
    if jll.shape[1] == 0:
        return jll
    top = jll.max(axis=1, keepdims=True)
    dead = ~np.isfinite(top)
    top = np.where(dead, 0.0, top)
    with np.errstate(divide="ignore"):
        out = jll - top - np.log(np.exp(jll - top).sum(axis=1, keepdims=True))
    if dead.any():
        out[dead[:, 0]] = -np.log(jll.shape[1])
    return out
