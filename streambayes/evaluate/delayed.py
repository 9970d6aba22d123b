"""Prequential evaluation with label delay, several models side by side.

Spam reports arrive after the message: a model must predict event ``t`` when it arrives, but may
learn its label only ``delay`` events later. :class:`DelayedPrequential` replays mini-batches so:

1. **Predict.** Every model predicts the whole batch (as :class:`Prequential` does); the
   predictions wait with their events.
2. **Release.** At the end of the batch, every waiting event at stream position ``p`` whose label
   is due (``p + delay <= last position seen``) is released, oldest batch first.
3. **Score, then learn.** A released event is scored with the prediction made when it arrived,
   then learned. Scoring at release time is when the error becomes known, so the windowed
   accuracies and the drift detector see the errors in label-arrival order.

The delay is counted in stream positions (bad events included) and applied at mini-batch
granularity: with ``delay=0`` a batch is learned right after it is predicted, and the summary is
exactly that of :class:`Prequential` on the same batches (its events within one batch are already
predicted without each other's labels). A per-event delay list can be passed to
:meth:`DelayedPrequential.step`. Labels still waiting at the end are counted as ``pending``; they
were predicted but never scored nor learned.

Besides :class:`ModelScore`'s metrics, each model keeps a sliding-window accuracy (last
``window`` events), a fading accuracy (factor ``alpha``; Gama, Sebastião & Rodrigues 2013) and an
ADWIN drift monitor over its 0/1 errors (:mod:`streambayes.evaluate.drift`); cold predictions feed
none of them, as in :mod:`streambayes.evaluate.prequential`. Rejections carry *stream positions*
(0-based over every event given to ``step``), because a label may be learned batches after its
event arrived.

>>> import math
>>> class Majority:  # a tiny learner with the streambayes protocol
...     def __init__(self): self.counts = {}
...     classes = property(lambda self: sorted(self.counts))
...     def featurize(self, xs): return xs
...     def predict_log_proba_many(self, X):
...         total = sum(self.counts.values())
...         row = [math.log(self.counts[c] / total) for c in self.classes]
...         return np.array([row] * len(X)).reshape(len(X), len(self.classes))
...     def learn_many(self, X, y, w=None):
...         for label in y: self.counts[label] = self.counts.get(label, 0) + 1
>>> batches = [([{"t": 1}] * 2, ["a", "a"])] * 3
>>> run = delayed_prequential({"majority": Majority()}, batches, delay=3)
>>> s = run.summary()["majority"]
>>> s["events"], s["cold"], s["pending"], s["accuracy"]  # labels 0-2 learned, 3-5 waiting
(3, 3, 3, None)
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streambayes.evaluate.drift import DriftMonitor
from streambayes.evaluate.prequential import Learner, Prequential, Rejection, describe, rejections
from streambayes.evaluate.windows import Fading, Sliding, WindowCurve


class WindowScore:
    """Sliding-window and fading accuracy, ADWIN drift points and their curve for one model."""

    def __init__(self, window: int, alpha: float, drift_delta: float) -> None:
        self.sliding = Sliding(window)
        self.fading = Fading(alpha)
        self.drift = DriftMonitor(drift_delta)
        self.curve = WindowCurve()

    def update(self, classes: list, log_proba: np.ndarray, ys: Sequence, ws: Sequence[float],
               positions: Sequence[int]) -> None:
        """Score released events predicted with ``classes`` (not cold) at their stream positions."""
        best = np.argmax(log_proba, axis=1)
        for b, y, w, at in zip(best.tolist(), ys, ws, positions, strict=True):
            correct = classes[b] == y
            self.sliding.update(float(correct), w)
            self.fading.update(float(correct), w)
            self.drift.update(not correct, at=at)

    def add_point(self, events: int) -> None:
        window, fading = self.sliding.get(), self.fading.get()
        if window is not None and fading is not None:
            self.curve.add(events, window, fading)

    def summary(self) -> dict[str, Any]:
        return {"window_accuracy": self.sliding.get(), "fading_accuracy": self.fading.get(),
                "drift_points": list(self.drift.points)}


@dataclass
class _Waiting:
    """The kept events of one mini-batch, their predictions, and which labels are learned."""

    positions: np.ndarray  # stream position of each event
    due: np.ndarray  # the label is released once this position has been seen
    xs: list[dict]
    ys: list
    ws: list[float]
    X: dict[str, Any]  # model -> featurized batch; dropped after a partial release
    predicted: dict[str, tuple[list, np.ndarray]]  # model -> (classes, log_proba) at arrival
    done: np.ndarray  # bool per event: label released


class DelayedPrequential(Prequential):
    """Predict on arrival, score and learn ``delay`` events later; see the module docstring."""

    def __init__(self, models: Mapping[str, Learner], delay: int = 0, positive: str | None = None,
                 window: int = 1000, alpha: float = 0.999, drift_delta: float = 0.002,
                 loss: Any = None) -> None:
        if delay < 0:
            raise ValueError(f"DelayedPrequential: delay must be >= 0, got {delay}")
        super().__init__(models, positive, loss, per_event=False)  # labels come late: by batch
        self.delay = delay
        self.window = window
        self.alpha = alpha
        self.drift_delta = drift_delta
        self.windows = {name: WindowScore(window, alpha, drift_delta) for name in self.models}
        self.position = 0  # events given to step so far, bad ones included: the stream clock
        self._waiting: deque[_Waiting] = deque()

    def step(self, xs: Sequence[dict], ys: Sequence, ws: Sequence[float] | None = None,
             delays: Sequence[int] | None = None) -> list[Rejection]:
        """Predict a mini-batch, then score and learn every label now due; returns bad events."""
        ws = list(ws) if ws is not None else [1.0] * len(xs)
        lags = self._lags(delays, len(xs))
        keep, predicted, rejected = self._predict_all(xs)
        base = self.position
        self.position += len(xs)
        self.events += len(keep)
        bad = {base + i: error for i, error in rejected.items()}
        if keep:
            idx = np.asarray(keep, dtype=np.int64)
            self._waiting.append(_Waiting(
                positions=base + idx, due=base + idx + lags[idx], xs=[xs[i] for i in keep],
                ys=[ys[i] for i in keep], ws=[ws[i] for i in keep],
                X={name: X for name, (X, _, _) in predicted.items()},
                predicted={name: (classes, lp) for name, (_, classes, lp) in predicted.items()},
                done=np.zeros(len(keep), dtype=bool)))
        bad.update(self._release(self.position - 1))
        for name, score in self.scores.items():
            if score.events > score.cold:
                score.curve.add(self.events, score.accuracy.get(), score.log_loss.get())
            self.windows[name].add_point(self.events)
        return rejections(bad)

    def _lags(self, delays: Sequence[int] | None, n: int) -> np.ndarray:
        if delays is None:
            return np.full(n, self.delay, dtype=np.int64)
        lags = np.asarray(delays, dtype=np.int64)
        if lags.shape != (n,) or (lags < 0).any():
            raise ValueError(f"DelayedPrequential.step: expected {n} delays >= 0, got {list(delays)}")
        return lags

    def _release(self, now: int) -> dict[int, str]:
        """Score and learn every waiting label due at position ``now``, oldest batch first."""
        bad: dict[int, str] = {}
        for chunk in self._waiting:
            due = ~chunk.done & (chunk.due <= now)
            if not due.any():
                continue
            whole = not chunk.done.any() and bool(due.all())
            bad.update(self._score_and_learn(chunk, np.flatnonzero(due), whole))
            chunk.done |= due
            chunk.X = {}  # later releases featurize their subset again
        self._waiting = deque(chunk for chunk in self._waiting if not chunk.done.all())
        return bad

    def _score_and_learn(self, chunk: _Waiting, sel: np.ndarray, whole: bool) -> dict[int, str]:
        xs = [chunk.xs[j] for j in sel]
        ys = [chunk.ys[j] for j in sel]
        ws = [chunk.ws[j] for j in sel]
        positions = chunk.positions[sel].tolist()
        for label, w in zip(ys, ws, strict=True):
            self.labels[label] = self.labels.get(label, 0.0) + w
        if self._auc_label is None:
            self._auc_label = ys[0]
        bad: dict[int, str] = {}
        for name in self.models:
            classes, log_proba = chunk.predicted[name]
            self.scores[name].update(classes, log_proba[sel], ys, ws, self._auc_label)
            if classes:
                self.windows[name].update(classes, log_proba[sel], ys, ws, positions)
            bad.update(self._learn_due(name, chunk.X[name] if whole else None, xs, ys, ws, positions))
        return bad

    def _learn_due(self, name: str, X: Any, xs: list[dict], ys: list, ws: list[float],
                   positions: list[int]) -> dict[int, str]:
        """Learn released events; ``X is None`` means featurize them now (a partial release)."""
        model = self.models[name]
        bad: dict[int, str] = {}
        if X is None:
            start = time.perf_counter()
            try:
                X = model.featurize(xs)
            except Exception:  # noqa: BLE001 (find the bad events, featurize the good ones)
                good = []
                for j, x in enumerate(xs):
                    try:
                        model.featurize([x])
                        good.append(j)
                    except Exception as exc:  # noqa: BLE001 (this event's own error)
                        bad[positions[j]] = describe(exc)
                xs, ys, ws, positions = ([v[j] for j in good] for v in (xs, ys, ws, positions))
                X = model.featurize(xs) if xs else None
            self.scores[name].seconds += time.perf_counter() - start
        if not xs:
            return bad
        return bad | self._learn(name, X, xs, ys, ws, positions)

    @property
    def pending(self) -> int:
        """Events predicted whose labels have not been released yet."""
        return int(sum((~chunk.done).sum() for chunk in self._waiting))

    def summary(self) -> dict[str, dict[str, Any]]:
        """:meth:`Prequential.summary` plus pending, window_accuracy, fading_accuracy, drift_points.

        ``events`` counts the scored (released) events; ``events + pending`` were predicted.
        """
        out = super().summary()
        pending = self.pending
        for name, row in out.items():
            row["pending"] = pending
            row.update(self.windows[name].summary())
        return out

    @property
    def window_curves(self) -> dict[str, WindowCurve]:
        return {name: w.curve for name, w in self.windows.items()}

    @property
    def drift_points(self) -> dict[str, list[int]]:
        return {name: list(w.drift.points) for name, w in self.windows.items()}


def delayed_prequential(models: Mapping[str, Learner], batches: Iterable[tuple],
                        delay: int = 0, positive: str | None = None, window: int = 1000,
                        alpha: float = 0.999, drift_delta: float = 0.002) -> DelayedPrequential:
    """Run :class:`DelayedPrequential` over ``(xs, ys)``, ``(xs, ys, ws)`` or
    ``(xs, ys, ws, delays)`` mini-batches."""
    run = DelayedPrequential(models, delay, positive, window, alpha, drift_delta)
    for batch in batches:
        run.step(*batch)
    return run
