"""The Bayesian (Dirichlet) score gain of an extra parent, from class × value × value counts.

Weka's BayesNet scores a TAN edge by how much the parent raises the log marginal likelihood of
the child's family (its ``BAYES`` score: Cooper & Herskovits 1992 with a pseudo-count ``alpha``
per cell). :func:`bayes_gain` computes the matrix of those gains from the sparse
:class:`~streambayes.stats.PairCounts`, :func:`bayes_gain_dense` from a dense table.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from streambayes.stats.keyed import unpack
from streambayes.stats.pairs import BITS


def onehot(attr_of: np.ndarray, n_attrs: int) -> np.ndarray:
    """(codes, attributes) indicator of each global code's attribute."""
    out = np.zeros((len(attr_of), n_attrs))
    out[np.arange(len(attr_of)), attr_of] = 1.0
    return out


def bayes_gain(pairs, attr_of: np.ndarray, n_attrs: int, n_values: np.ndarray, alpha: float,
               scale: float = 1.0) -> np.ndarray:
    """(attributes, attributes) matrix ``gain[i, j]``: how much attribute ``j`` as a parent of
    ``x_i`` (besides the class) raises the log marginal likelihood of ``x_i``'s family, the
    Bayesian (Dirichlet, ``alpha`` per cell) score Weka's BayesNet scores edges with
    (Cooper & Herskovits 1992 with pseudo-count ``alpha``):

        score(x_i | y, x_j) − score(x_i | y),  score = Σ_config [Σ_v lnΓ(α + n_v) − lnΓ(α)]
                                                      − [lnΓ(Σ_v n_v + α·r_i) − lnΓ(α·r_i)]

    both over the events where ``x_i`` and ``x_j`` are known (the same events on each side, so a
    missing cell neither helps nor hurts an edge); counts are the stored ones times ``scale``.
    The diagonal is 0."""
    a, alpha = attr_of, float(alpha)
    r = np.maximum(np.asarray(n_values, np.float64), 1.0)
    lg = gammaln(alpha)
    c, lo, hi = unpack(pairs.pairs.keys, 3, BITS)
    cells = np.zeros((n_attrs, n_attrs))  # Σ over (c, v_i, v_j) of lnΓ(α + n) − lnΓ(α): symmetric
    np.add.at(cells, (a[lo], a[hi]), gammaln(alpha + pairs.pairs.counts * scale) - lg)
    cells = cells + cells.T
    known = pairs.known(attr_of)  # (c, g, j): events of class c with code g and attribute j known
    kc, kg, kj = unpack(known.keys, 3, BITS)
    n = known.counts * scale
    configs = np.zeros((n_attrs, n_attrs))  # [child j, parent a(g)]: the parent configurations' norms
    np.add.at(configs, (kj, a[kg]), gammaln(n + alpha * r[kj]) - gammaln(alpha * r[kj]))
    base_cells = np.zeros((n_attrs, n_attrs))  # [child a(g), other j]: x_i's cells given the class only
    np.add.at(base_cells, (a[kg], kj), gammaln(alpha + n) - lg)
    single = pairs.singles()
    k = single.shape[0]
    block = np.zeros((k, n_attrs, n_attrs))  # [c, i, j]: events of class c with i and j known
    np.add.at(block, (kc, a[kg], kj), n)
    base_norm = (gammaln(block + alpha * r[None, :, None]) - gammaln(alpha * r)[None, :, None]).sum(axis=0)
    gain = cells - configs - (base_cells - base_norm)
    np.fill_diagonal(gain, 0.0)
    return gain


def bayes_gain_dense(t: np.ndarray, attr_of: np.ndarray, n_attrs: int, n_values: np.ndarray,
                     alpha: float) -> np.ndarray:
    """:func:`bayes_gain` from a dense (classes, codes, codes) table of (true) counts."""
    h = onehot(attr_of, n_attrs)
    r = np.maximum(np.asarray(n_values, np.float64), 1.0)
    lg = gammaln(alpha)
    cells = h.T @ (gammaln(alpha + t) - lg).sum(axis=0) @ h  # [i, j]
    known = t @ h  # [c, g, j]: events of class c with code g and attribute j known
    configs = (h.T @ (gammaln(known + alpha * r) - gammaln(alpha * r)).sum(axis=0)).T  # [child j, parent i]
    base_cells = h.T @ (gammaln(alpha + known) - lg).sum(axis=0)  # [child i, other j]
    block = np.einsum("gi,cgj->cij", h, known)
    base_norm = (gammaln(block + alpha * r[None, :, None]) - gammaln(alpha * r)[None, :, None]).sum(axis=0)
    gain = cells - configs - (base_cells - base_norm)
    np.fill_diagonal(gain, 0.0)
    return gain
