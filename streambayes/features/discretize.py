"""Equal-frequency discretization of a numeric attribute, with edges fixed after a warm-up.

The first ``warmup`` (weighted) values of an attribute, in stream order, fix its bin edges at
their quantiles; from then on a value's bin is ``searchsorted(edges, value)`` (a value equal to an
edge falls in the lower bin). The edges are part of the learner's state, so snapshots and
merges stay consistent.

>>> edges = equal_frequency_edges(np.arange(100.0), bins=4)
>>> edges.tolist(), bin_codes(edges, np.array([0.0, 24.0, 25.0, 99.0, 1e9])).tolist()
([24.0, 49.0, 74.0], [0, 0, 1, 3, 3])
"""

from __future__ import annotations

import numpy as np


def equal_frequency_edges(values: np.ndarray, bins: int, weights: np.ndarray | None = None) -> np.ndarray:
    """Inner edges at the weighted ``1/bins … (bins-1)/bins`` quantiles: for each, the smallest
    value whose cumulative weight reaches that fraction (a weight-w value counts as w values);
    duplicates dropped."""
    values = np.asarray(values, np.float64)
    if len(values) == 0 or bins < 2:
        return np.zeros(0)
    order = np.argsort(values, kind="stable")
    w = np.ones(len(values)) if weights is None else np.asarray(weights, np.float64)[order]
    cum = np.cumsum(w)
    at = np.searchsorted(cum, np.arange(1, bins) * cum[-1] / bins, side="left")
    return np.unique(values[order][np.minimum(at, len(values) - 1)])


def bin_codes(edges: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Bin of each value: 0 … len(edges); a value equal to an edge falls in the lower bin."""
    return np.searchsorted(edges, values, side="left").astype(np.int64)
