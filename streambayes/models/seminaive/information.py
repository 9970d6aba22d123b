"""Mutual information from the class × value × value table (maximum-likelihood estimates).

``I(x_i; x_j | y) = Σ_{c, vi, vj} P(c, vi, vj) log [P(vi, vj | c) / (P(vi | c) P(vj | c))]``
(reference 003; Friedman, Geiger & Goldszmidt 1997), each pair over the events where both
attributes are known; ``I(x_i; y)`` likewise from the diagonal.
"""

from __future__ import annotations

import numpy as np


def onehot(attr_of: np.ndarray, n_attrs: int) -> np.ndarray:
    """(codes, attributes) indicator of each global code's attribute."""
    out = np.zeros((len(attr_of), n_attrs))
    out[np.arange(len(attr_of)), attr_of] = 1.0
    return out


def conditional_mutual_information(table: np.ndarray, attr_of: np.ndarray, n_attrs: int) -> np.ndarray:
    """(attributes, attributes) matrix of I(x_i; x_j | y); the diagonal is 0."""
    h = onehot(attr_of, n_attrs)
    known = table @ h  # [c, g, j]: events of class c with value g and attribute j known
    block = np.einsum("gi,cgj->cij", h, known)  # [c, i, j]: events of class c with i and j known
    total = block.sum(axis=0)  # [i, j]
    a = attr_of
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (table * block[:, a][:, :, a]) / (known[:, :, a] * np.swapaxes(known, 1, 2)[:, a, :])
        terms = np.where(table > 0, table * np.log(ratio), 0.0).sum(axis=0)  # [g, g']
        cmi = (h.T @ terms @ h) / total
    cmi = np.where(total > 0, cmi, 0.0)
    np.fill_diagonal(cmi, 0.0)
    return np.maximum(cmi, 0.0)


def class_mutual_information(table: np.ndarray, attr_of: np.ndarray, n_attrs: int) -> np.ndarray:
    """(attributes,) vector of I(x_i; y) over the events where x_i is known."""
    h = onehot(attr_of, n_attrs)
    single = np.diagonal(table, axis1=1, axis2=2)  # [c, g]
    per_class = single @ h  # [c, i]
    per_value = single.sum(axis=0)  # [g]
    total = per_class.sum(axis=0)  # [i]
    a = attr_of
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = single * total[a] / (per_class[:, a] * per_value)
        terms = np.where(single > 0, single * np.log(ratio), 0.0).sum(axis=0)  # [g]
        mi = (terms @ h) / total
    return np.maximum(np.where(total > 0, mi, 0.0), 0.0)
