"""Exponential forgetting, applied lazily so an update stays O(batch).

After ``t`` events the event number ``i`` has true weight ``γ^(t-i)``. Instead of
multiplying every statistic by ``γ`` at every event (O(table)), each new event is stored
with weight ``γ^(-i)`` and the true value of any statistic is ``stored · γ^t``: the
common factor cancels in every normalised probability. When ``γ^(-t)`` grows large
the learner folds ``γ^t`` into its tables once and ``t`` restarts (amortised O(1)).

>>> f = Forgetting(0.5)
>>> f.multipliers(3).tolist(), f.to_true()
([2.0, 4.0, 8.0], 0.125)
>>> Forgetting(None).multipliers(2) is None
True
"""

from __future__ import annotations

import math

import numpy as np

from streambayes.errors import ModelError

_LOG_RESCALE_AT = math.log(1e150)


class Forgetting:
    """Decay factor ``γ`` in (0, 1]; ``None`` or 1 means no forgetting."""

    def __init__(self, factor: float | None = None, t: int = 0) -> None:
        if factor is not None and not 0.0 < factor <= 1.0:
            raise ModelError(f"decay factor must be in (0, 1], got {factor}")
        self.factor = None if factor in (None, 1.0) else float(factor)
        self.t = t

    @property
    def active(self) -> bool:
        return self.factor is not None

    def due(self, n: int) -> bool:
        """Whether the stored weights of the next ``n`` events would grow too large."""
        return self.factor is not None and -(self.t + n) * math.log(self.factor) > _LOG_RESCALE_AT

    def multipliers(self, n: int) -> np.ndarray | None:
        """Stored-weight multipliers for the next ``n`` events (and advance time)."""
        if self.factor is None:
            return None
        m = self.factor ** -(self.t + 1 + np.arange(n, dtype=np.float64))
        self.t += n
        return m

    def to_true(self) -> float:
        """Factor converting stored statistics to their true (decayed) values."""
        return 1.0 if self.factor is None else self.factor**self.t

    def restart(self, ahead: int = 0) -> float:
        """Restart time so the next ``ahead`` events get stored weights of at most 1; the caller
        multiplies every stored statistic by the returned factor (tiny factors may reach 0: those
        statistics have decayed away).

        >>> f = Forgetting(0.5, t=3)
        >>> f.restart(ahead=2), f.multipliers(2).tolist(), f.t
        (0.03125, [0.5, 1.0], 0)
        """
        if self.factor is None:
            return 1.0
        f = self.factor ** (self.t + ahead)
        self.t = -ahead
        return f
