"""Mutual information from the class × value × value table (maximum-likelihood estimates).

``I(x_i; x_j | y) = Σ_{c, vi, vj} P(c, vi, vj) log [P(vi, vj | c) / (P(vi | c) P(vj | c))]``
(reference 003; Friedman, Geiger & Goldszmidt 1997), each pair over the events where both
attributes are known; ``I(x_i; y)`` likewise from the diagonal.
"""

from __future__ import annotations

import numpy as np


def _sum_by_attribute(values: np.ndarray, attr_of: np.ndarray, n_attrs: int) -> np.ndarray:
    """(codes, codes) → (attributes, attributes) sums, by index (no 0·NaN products)."""
    out = np.zeros((n_attrs, n_attrs))
    np.add.at(out, (attr_of[:, None], attr_of[None, :]), values)
    return out


def onehot(attr_of: np.ndarray, n_attrs: int) -> np.ndarray:
    """(codes, attributes) indicator of each global code's attribute."""
    out = np.zeros((len(attr_of), n_attrs))
    out[np.arange(len(attr_of)), attr_of] = 1.0
    return out


def _log(x: np.ndarray, where: np.ndarray) -> np.ndarray:
    return np.log(np.where(where, x, 1.0))


def conditional_mutual_information(table: np.ndarray, attr_of: np.ndarray, n_attrs: int) -> np.ndarray:
    """(attributes, attributes) matrix of I(x_i; x_j | y); the diagonal is 0.

    Logs are taken of positive counts only (decayed counts may be subnormal), as
    ``log n + log n_c,i,j − log n_c,g,j − log n_c,i,h``."""
    h = onehot(attr_of, n_attrs)
    known = table @ h  # [c, g, j]: events of class c with value g and attribute j known
    block = np.einsum("gi,cgj->cij", h, known)  # [c, i, j]: events of class c with i and j known
    total = block.sum(axis=0)  # [i, j]
    a = attr_of
    pos = table > 0
    log_ratio = (_log(table, pos) + _log(block[:, a][:, :, a], pos)
                 - _log(known[:, :, a], pos) - _log(np.swapaxes(known, 1, 2)[:, a, :], pos))
    terms = np.where(pos, table * log_ratio, 0.0).sum(axis=0)  # [g, g']
    sums = _sum_by_attribute(terms, a, n_attrs)
    cmi = np.where(total > 0, sums / np.where(total > 0, total, 1.0), 0.0)
    np.fill_diagonal(cmi, 0.0)
    return np.maximum(cmi, 0.0)


def class_mutual_information(table: np.ndarray, attr_of: np.ndarray, n_attrs: int) -> np.ndarray:
    """(attributes,) vector of I(x_i; y) over the events where x_i is known."""
    return _class_mi(np.diagonal(table, axis1=1, axis2=2), attr_of, n_attrs)


def _class_mi(single: np.ndarray, attr_of: np.ndarray, n_attrs: int) -> np.ndarray:
    """I(x_i; y) from the (classes, codes) single counts."""
    h = onehot(attr_of, n_attrs)
    per_class = single @ h  # [c, i]
    per_value = single.sum(axis=0)  # [g]
    total = per_class.sum(axis=0)  # [i]
    a = attr_of
    pos = single > 0
    log_ratio = (_log(single, pos) + _log(np.broadcast_to(total[a], single.shape), pos)
                 - _log(per_class[:, a], pos) - _log(np.broadcast_to(per_value, single.shape), pos))
    terms = np.where(pos, single * log_ratio, 0.0).sum(axis=0)  # [g]
    mi = np.zeros(n_attrs)
    np.add.at(mi, a, terms)
    return np.maximum(np.where(total > 0, mi / np.where(total > 0, total, 1.0), 0.0), 0.0)


def sparse_information(pairs, attr_of: np.ndarray, n_attrs: int) -> tuple[np.ndarray, np.ndarray]:
    """``I(x_i; y)`` and ``I(x_i; x_j | y)`` as the dense functions give them, from the sparse
    :class:`~streambayes.stats.PairCounts` (its singles and the pairs that occurred)."""
    from streambayes.stats.keyed import unpack
    from streambayes.stats.pairs import BITS

    single = pairs.singles()
    mi = _class_mi(single, attr_of, n_attrs)
    a = attr_of
    k = single.shape[0]
    known = pairs.known(attr_of)  # [c, g, j], j another attribute than g's
    c, g, j = unpack(known.keys, 3, BITS)
    block = np.zeros((k, n_attrs, n_attrs))  # [c, i, j]: events of class c with i and j known
    np.add.at(block, (c, a[g], j), known.counts)
    h = onehot(a, n_attrs)
    diag = single @ h  # [c, i]
    block[:, np.arange(n_attrs), np.arange(n_attrs)] = diag
    total = block.sum(axis=0)
    c, lo, hi = unpack(pairs.pairs.keys, 3, BITS)
    n = pairs.pairs.counts
    pos = n > 0
    k_lo = known.get(np.left_shift(np.left_shift(c, BITS) | lo, BITS) | a[hi])  # known[c, lo, a(hi)]
    k_hi = known.get(np.left_shift(np.left_shift(c, BITS) | hi, BITS) | a[lo])
    log_ratio = (_log(n, pos) + _log(block[c, a[lo], a[hi]], pos) - _log(k_lo, pos) - _log(k_hi, pos))
    terms = np.where(pos, n * log_ratio, 0.0)
    sums = np.zeros((n_attrs, n_attrs))
    np.add.at(sums, (a[lo], a[hi]), terms)
    sums = sums + sums.T
    cmi = np.where(total > 0, sums / np.where(total > 0, total, 1.0), 0.0)
    np.fill_diagonal(cmi, 0.0)
    return mi, np.maximum(cmi, 0.0)

