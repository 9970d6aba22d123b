"""Forgetting metrics for streams: a sliding window and a fading factor over per-event losses.

A cumulative prequential metric weighs the first event as much as the last, so it reacts ever
more slowly to a change. Gama, Sebastião & Rodrigues 2013 ("On evaluating stream learning
algorithms", Machine Learning 90, §4) propose two forgetting estimates of the loss ``L_i`` of
event ``i``:

1. **Sliding window** of the last ``window`` events: ``sum(w L) / sum(w)`` over that window.
2. **Fading factor** ``0 < α ≤ 1``: ``S_i = w_i L_i + α S_{i-1}``, ``N_i = w_i + α N_{i-1}``,
   metric ``S_i / N_i`` (``w_i = 1`` gives the paper's ``S_i = L_i + α S_{i-1}``; ``α = 1`` is the
   cumulative mean). The effective memory is about ``1 / (1 - α)`` events.

Both update in O(1) (the window amortised) and never subtract a sum, so no rounding error builds
up over an unbounded stream. :meth:`Sliding.merge` and :meth:`Fading.merge` append another
estimate's events after this one's (STYLE habit 3). ``get()`` is ``None`` before any weight.

>>> acc = SlidingAccuracy(window=3)
>>> for y, p in [("a", "a"), ("a", "b"), ("b", "b"), ("b", "b")]:
...     acc.update(y, p)
>>> round(acc.get(), 4)  # the first (correct) event has left the window
0.6667
>>> fade = FadingAccuracy(alpha=0.5)
>>> for y, p in [("a", "a"), ("a", "b")]:
...     fade.update(y, p)
>>> fade.get()  # (0 + 0.5 * 1) / (1 + 0.5 * 1)
0.3333333333333333
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

LOG_LOSS_CLAMP = 1e-15  # River's CrossEntropy clamp, so both report the same loss
_CURVE_MAX_POINTS = 2000


class Sliding:
    """Weighted mean of a per-event value over the last ``window`` events.

    A queue made of two stacks (the "two-stacks" sliding-window aggregation): new events push
    onto a back stack with running sums; when the oldest must leave and the front stack is empty,
    the back stack is flipped onto it with suffix sums. Every event is moved once, so updates are
    amortised O(1), and a sum is never taken back by subtraction: a huge value that has left the
    window leaves no rounding error behind.

    >>> s = Sliding(window=2)
    >>> s.update(1.0); s.update(0.0, w=3.0); s.get()
    0.25
    >>> s.update(1.0); s.get()  # the first event left: (0 * 3 + 1 * 1) / 4
    0.25
    """

    def __init__(self, window: int) -> None:
        if window < 1:
            raise ValueError(f"Sliding: window must be >= 1, got {window}")
        self.window = window
        self._back: list[tuple[float, float]] = []  # (w * value, w), oldest first
        self._back_sum = 0.0
        self._back_weight = 0.0
        self._front: list[tuple[float, float, float, float]] = []  # (w*value, w, suffix sums), oldest last

    def update(self, value: float, w: float = 1.0) -> None:
        """Add one event's ``value`` with weight ``w``, dropping the oldest beyond the window."""
        self._back.append((w * value, w))
        self._back_sum += w * value
        self._back_weight += w
        if self.n > self.window:
            if not self._front:
                self._flip()
            self._front.pop()

    def _flip(self) -> None:
        total, weight = 0.0, 0.0
        for item_sum, item_weight in reversed(self._back):
            total += item_sum
            weight += item_weight
            self._front.append((item_sum, item_weight, total, weight))
        self._back, self._back_sum, self._back_weight = [], 0.0, 0.0

    def _items(self) -> list[tuple[float, float]]:
        return [(s, w) for s, w, _, _ in reversed(self._front)] + self._back

    def merge(self, other: Sliding) -> None:
        """Append ``other``'s events after this one's (keeping the last ``window``)."""
        if other.window != self.window:
            raise ValueError(f"Sliding.merge: window {other.window} differs from {self.window}")
        items = (self._items() + other._items())[-self.window:]
        self._front = []
        self._back = items
        self._back_sum = math.fsum(s for s, _ in items)
        self._back_weight = math.fsum(w for _, w in items)

    @property
    def n(self) -> int:
        """Events in the window."""
        return len(self._front) + len(self._back)

    def get(self) -> float | None:
        total, weight = self._back_sum, self._back_weight
        if self._front:
            total += self._front[-1][2]
            weight += self._front[-1][3]
        return total / weight if weight > 0 else None


class Fading:
    """Fading-factor mean ``S / N`` of a per-event value (Gama et al. 2013, §4.2).

    >>> f = Fading(alpha=0.9)
    >>> f.update(1.0); f.update(0.0); round(f.get(), 6)  # 0.9 / 1.9
    0.473684
    """

    def __init__(self, alpha: float) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"Fading: alpha must be in (0, 1], got {alpha}")
        self.alpha = alpha
        self._sum = 0.0  # S_i
        self._weight = 0.0  # N_i
        self.n = 0  # updates seen, for merge

    def update(self, value: float, w: float = 1.0) -> None:
        """``S_i = w L_i + α S_{i-1}``, ``N_i = w + α N_{i-1}``."""
        self._sum = w * value + self.alpha * self._sum
        self._weight = w + self.alpha * self._weight
        self.n += 1

    def merge(self, other: Fading) -> None:
        """Append ``other``'s events after this one's: this state fades by ``α^other.n``."""
        if other.alpha != self.alpha:
            raise ValueError(f"Fading.merge: alpha {other.alpha} differs from {self.alpha}")
        decay = self.alpha**other.n
        self._sum = decay * self._sum + other._sum
        self._weight = decay * self._weight + other._weight
        self.n += other.n

    def get(self) -> float | None:
        return self._sum / self._weight if self._weight > 0 else None


def _log_loss(y_true: Any, y_pred: Mapping[Any, float]) -> float:
    """``-log p(y_true)`` clamped to [1e-15, 1 - 1e-15] like River; an absent label has p = 0.

    River's ``CrossEntropy`` adds 0 for a label missing from ``y_pred``; here it costs ≈ 34.5.
    """
    return -math.log(min(max(y_pred.get(y_true, 0.0), LOG_LOSS_CLAMP), 1.0 - LOG_LOSS_CLAMP))


class SlidingAccuracy(Sliding):
    """Accuracy over the last ``window`` events; River's ``update(y_true, y_pred, w)`` signature."""

    def update(self, y_true: Any, y_pred: Any, w: float = 1.0) -> None:  # type: ignore[override]
        super().update(float(y_true == y_pred), w)


class FadingAccuracy(Fading):
    """Fading-factor accuracy; River's ``update(y_true, y_pred, w)`` signature."""

    def update(self, y_true: Any, y_pred: Any, w: float = 1.0) -> None:  # type: ignore[override]
        super().update(float(y_true == y_pred), w)


class SlidingLogLoss(Sliding):
    """Log loss over the last ``window`` events; ``y_pred`` is ``{label: p}``, see ``_log_loss``.

    >>> s = SlidingLogLoss(window=10)
    >>> s.update("a", {"a": 0.5, "b": 0.5}); round(s.get(), 4)
    0.6931
    """

    def update(self, y_true: Any, y_pred: Mapping[Any, float], w: float = 1.0) -> None:  # type: ignore[override]
        super().update(_log_loss(y_true, y_pred), w)


class FadingLogLoss(Fading):
    """Fading-factor log loss; ``y_pred`` is ``{label: p}``, clamped like River (see ``_log_loss``)."""

    def update(self, y_true: Any, y_pred: Mapping[Any, float], w: float = 1.0) -> None:  # type: ignore[override]
        super().update(_log_loss(y_true, y_pred), w)


@dataclass
class WindowCurve:
    """Sliding-window and fading accuracy of one model after each mini-batch, over events."""

    events: list[int] = field(default_factory=list)
    window_accuracy: list[float] = field(default_factory=list)
    fading_accuracy: list[float] = field(default_factory=list)

    def add(self, events: int, window_accuracy: float, fading_accuracy: float) -> None:
        self.events.append(events)
        self.window_accuracy.append(window_accuracy)
        self.fading_accuracy.append(fading_accuracy)
        if len(self.events) > _CURVE_MAX_POINTS:  # thin to bound memory on unbounded streams
            for values in (self.events, self.window_accuracy, self.fading_accuracy):
                del values[1:-1:2]
