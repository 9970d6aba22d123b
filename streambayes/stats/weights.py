"""Per-event weights: fractional counts, checked once for every learner."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streambayes.errors import ModelError


def event_weights(w: Sequence[float] | None, n: int) -> np.ndarray:
    """``n`` weights as float64 (all 1 when ``w`` is None); finite and >= 0, else ModelError.

    >>> event_weights(None, 2).tolist(), event_weights([0.5, 2], 2).tolist()
    ([1.0, 1.0], [0.5, 2.0])
    """
    if w is None:
        return np.ones(n)
    weights = np.asarray(w, np.float64)
    if weights.shape != (n,):
        raise ModelError(f"expected {n} weights, got shape {weights.shape}")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ModelError("weights must be finite and >= 0")
    return weights
