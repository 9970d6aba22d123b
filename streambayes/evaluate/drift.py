"""Concept-drift flags: ADWIN over a model's per-event 0/1 error.

ADWIN (Bifet & Gavaldà 2007, "Learning from time-changing data with adaptive windowing", SDM)
keeps a variable-length window of a bounded signal and cuts it when two sub-windows have means
that differ by more than a Hoeffding-style bound at confidence ``delta``; smaller ``delta`` means
fewer false alarms and later detections. :class:`DriftMonitor` feeds ``river.drift.ADWIN`` with
1 for a wrong prediction and 0 for a right one and records where it fired. ADWIN fires on both a
rise and a fall of the error rate; :attr:`DriftMonitor.points` keeps both.

>>> import random
>>> rng = random.Random(7)
>>> monitor = DriftMonitor()
>>> for i in range(4000):
...     _ = monitor.update(rng.random() < (0.05 if i < 2000 else 0.5))
>>> len(monitor.points) >= 1 and 2000 <= monitor.points[0] < 2300
True
"""

from __future__ import annotations

from river import drift


class DriftMonitor:
    """ADWIN on a stream of errors; ``points`` are the event indices where drift was detected.

    ``update(error, at)`` records ``at`` (e.g. a stream position) when ADWIN fires, else the
    0-based count of the errors fed so far. ``clock`` and ``grace_period`` are ADWIN's: how often
    it checks for a cut and how many values it needs first.
    """

    def __init__(self, delta: float = 0.002, clock: int = 32, grace_period: int = 10) -> None:
        if not 0.0 < delta < 1.0:
            raise ValueError(f"DriftMonitor: delta must be in (0, 1), got {delta}")
        self.delta = delta
        self.clock = clock
        self.grace_period = grace_period
        self._adwin = drift.ADWIN(delta=delta, clock=clock, grace_period=grace_period)
        self.points: list[int] = []
        self.n = 0

    def update(self, error: bool | float, at: int | None = None) -> bool:
        """Feed one error (1/True: wrong); returns True when drift is detected at this event."""
        index = self.n if at is None else at
        self.n += 1
        self._adwin.update(float(error))
        if self._adwin.drift_detected:
            self.points.append(index)
            return True
        return False

    @property
    def error_rate(self) -> float:
        """ADWIN's current estimate: the mean error over its window (since the last cut)."""
        return float(self._adwin.estimation)

    @property
    def width(self) -> int:
        """Events in ADWIN's current window."""
        return int(self._adwin.width)
