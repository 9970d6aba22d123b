"""Prequential (test-then-train) evaluation over mini-batches, several models side by side.

For every mini-batch, each model first predicts the whole batch (``predict_log_proba_many``),
the metrics are updated event by event, and only then does the model learn the batch
(``learn_many``): every event is predicted before it is learned (Dawid 1984, "Present position
and potential developments: the prequential approach"; Gama, Sebastião & Rodrigues 2013, "On
evaluating stream learning algorithms", Machine Learning 90).

Metrics come from ``river.metrics``: ``Accuracy``, ``CrossEntropy`` (reported as ``log_loss``;
it is the multi-class log loss, equal to ``LogLoss`` for two classes), ``MacroF1`` and ``ROCAUC``
(reported only when exactly two labels were seen). Rules:

- **Cold predictions.** A model that has learned nothing returns an empty posterior; like
  River's ``evaluate.progressive_val_score``, such a prediction updates no metric. It is counted
  in ``events`` and in ``cold``, so the first mini-batch of a stream is not scored.
- **Unseen labels.** An event whose label the model has never learned gets probability 0 for its
  true class: wrong for accuracy, and log loss ``-log(1e-15)`` ≈ 34.5 (River's clamp).
- **ROC AUC** is symmetric in the two classes; it is reported for ``positive`` (default: the
  lexicographically larger label, e.g. ``spam`` over ``ham``). River's ``ROCAUC`` approximates the
  curve on a grid of thresholds in [0, 1]; it is fed ``0.5 + atan(log-odds / 8) / π``, a strictly
  monotone map of the posterior (so the exact AUC is unchanged) that spreads naive Bayes' extreme
  posteriors over the grid instead of piling them at 0 and 1.
- **Weights** of events weight every metric.
- **Bad events.** If ``featurize`` or ``predict_log_proba_many`` raises (a :class:`FeatureError`,
  or any other exception of one event), the batch is probed event by event; the bad events are
  dropped for every model (all models see the same stream) and returned by
  :meth:`Prequential.step` as :class:`Rejection` values (reason ``bad_feature`` for a
  :class:`FeatureError`, else ``model_error``). If ``learn_many`` raises, the batch is learned
  event by event and the bad ones are returned too (they were already scored, and other models
  may have learned them). An error that no single event reproduces is raised.

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
>>> run = prequential({"majority": Majority()},
...                   [([{"t": 1}] * 2, ["a", "a"]), ([{"t": 1}] * 2, ["a", "b"])])
>>> s = run.summary()["majority"]
>>> s["events"], s["cold"], s["accuracy"], s["roc_auc"]
(4, 2, 0.5, 0.5)
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from streambayes.errors import FeatureError, LimitError, ModelError
from streambayes.evaluate.threshold_auc import BatchROCAUC, _log_odds_many, auc_score

AUC_THRESHOLDS = 50
KEY = "__streambayes_key__"  # an event's key inside its x dict, for per-key evaluation
_CURVE_MAX_POINTS = 2000


class Learner(Protocol):
    """The part of the streambayes learner protocol that prequential evaluation uses."""

    @property
    def classes(self) -> list: ...

    def featurize(self, xs: list[dict]) -> Any: ...

    def predict_log_proba_many(self, X: Any) -> np.ndarray: ...

    def learn_many(self, X: Any, y: Sequence, w: Sequence[float] | None = None) -> None: ...


@dataclass(frozen=True)
class Rejection:
    """An event of the last batch that a model could not featurize or learn; ``reason`` is the
    dead-letter reason: ``limit`` when it would take a model past a bound, else ``bad_feature``."""

    index: int
    error: str
    reason: str = "bad_feature"  # "limit" (a LimitError), "model_error" (not a FeatureError)


class Refusal(str):
    """An error message that remembers its dead-letter reason (see :class:`Rejection`)."""

    reason = "bad_feature"


@dataclass
class Curve:
    """Learning curve of one model: running accuracy and log loss after each mini-batch."""

    events: list[int] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    log_loss: list[float] = field(default_factory=list)

    def add(self, events: int, accuracy: float, log_loss: float) -> None:
        self.events.append(events)
        self.accuracy.append(accuracy)
        self.log_loss.append(log_loss)
        if len(self.events) > _CURVE_MAX_POINTS:  # thin to bound memory on unbounded streams
            for values in (self.events, self.accuracy, self.log_loss):
                del values[1:-1:2]


class ModelScore:
    """Metrics, counts and time of one model; with a loss matrix, also decisions and their cost.

    Per scored event it keeps the top-class probability and whether it was right (for the
    calibration error and the reliability diagram) and ``p(positive)`` with the truth (for ROC
    and cost-vs-cutoff plots): three floats per event.
    """

    def __init__(self, loss: Any = None) -> None:
        self.loss = loss
        self.cost = 0.0
        self.unsure = 0.0
        self.weight = 0.0
        self.p_top: list[float] = []
        self.correct: list[bool] = []
        self.p_positive: list[float] = []
        self.is_positive: list[bool] = []
        self.weights: list[float] = []
        self.keys: list = []  # per scored event, when the replay is per key
        from streambayes.evaluate.calibration import OnlineCalibrator

        self.calibrator = OnlineCalibrator()  # fit prequentially: predict with α, then update it
        self.p_top_calibrated: list[float] = []
        self.log_loss_calibrated = 0.0
        from river import metrics  # here, not at import: river.metrics brings scipy.stats (0.7 s)

        self.accuracy = metrics.Accuracy()
        self.log_loss = metrics.CrossEntropy()
        self.macro_f1 = metrics.MacroF1()
        self.roc_auc = BatchROCAUC(n_thresholds=AUC_THRESHOLDS)  # River's ROCAUC, per batch
        self.events = 0
        self.cold = 0
        self.seconds = 0.0
        self.curve = Curve()

    def update(self, classes: list, log_proba: np.ndarray, ys: Sequence, ws: Sequence[float],
               auc_label: Any, keys: Sequence | None = None) -> None:
        """Score one predicted batch: row ``i`` of ``log_proba`` is the posterior of ``ys[i]``."""
        self.events += len(ys)
        if not classes:
            self.cold += len(ys)
            return
        proba = np.exp(log_proba)
        best = np.argmax(log_proba, axis=1)
        pos = classes.index(auc_label) if auc_label in classes else None
        self._update_metrics(classes, proba, best, ys, ws)
        self.roc_auc.update_many(np.array([y == auc_label for y in ys], dtype=bool),
                                 np.array([auc_score(v) for v in _log_odds_many(log_proba, pos)]),
                                 np.asarray(ws, dtype=np.float64))
        if keys is not None:
            self.keys.extend(keys)
        self._calibrate(classes, log_proba, ys, ws)
        self.p_top.extend(proba[np.arange(len(ys)), best].tolist())
        self.correct.extend(classes[b] == y for b, y in zip(best, ys, strict=True))
        self.p_positive.extend(proba[:, pos].tolist() if pos is not None else [0.0] * len(ys))
        self.is_positive.extend(y == auc_label for y in ys)
        self.weights.extend(ws)
        self.weight += float(sum(ws))
        if self.loss is not None:
            self._decide(classes, log_proba, ys, ws)

    def _update_metrics(self, classes: list, proba: np.ndarray, best: np.ndarray, ys: Sequence,
                        ws: Sequence[float]) -> None:
        """River's accuracy, macro F1 and log loss, as if updated event by event: the confusion
        matrices once per distinct (truth, prediction) with the summed weight (and the sample
        count), the log loss's weighted mean with each event's ``CrossEntropy`` term in order."""
        cells: dict[tuple, list] = {}
        for y, b, w in zip(ys, best.tolist(), ws, strict=True):
            cell = cells.setdefault((y, classes[b]), [0.0, 0])
            cell[0] += w
            cell[1] += 1
        for (y, y_pred), (w, count) in cells.items():
            for metric in (self.accuracy, self.macro_f1):
                metric.update(y, y_pred, w)
                metric.cm.n_samples += count - 1
        # a label the model has never learned gets probability 0 (River then clamps to 1e-15)
        index = {c: i for i, c in enumerate(classes)}
        truth = np.array([index.get(y, -1) for y in ys], dtype=np.int64)
        p_true = np.where(truth >= 0, proba[np.arange(len(ys)), np.maximum(truth, 0)], 0.0).tolist()
        add = self.log_loss._mean.update  # CrossEntropy: the weighted mean of -log clamp(p, 1e-15)
        for p, w in zip(p_true, ws, strict=True):
            add(-math.log(min(max(p, 1e-15), 1 - 1e-15)), w)

    def _calibrate(self, classes: list, log_proba: np.ndarray, ys: Sequence, ws: Sequence[float]) -> None:
        """Score the batch with the calibrated posteriors, then fit α on it (prequential)."""
        calibrated = self.calibrator.transform(log_proba)
        rows = np.arange(len(ys))
        self.p_top_calibrated.extend(np.exp(calibrated[rows, np.argmax(calibrated, axis=1)]).tolist())
        index = {c: i for i, c in enumerate(classes)}
        truth = np.array([index.get(y, -1) for y in ys], dtype=np.int64)
        known = truth >= 0
        p_true = np.exp(calibrated[rows[known], truth[known]])
        w = np.asarray(ws, dtype=np.float64)
        self.log_loss_calibrated += float(np.sum(w[known] * -np.log(np.clip(p_true, 1e-15, 1.0))))
        self.log_loss_calibrated += float(np.sum(w[~known]) * -math.log(1e-15))
        usable = known & np.isfinite(log_proba[rows, np.where(known, truth, 0)])
        if usable.any():
            self.calibrator.update(log_proba[usable], truth[usable], w[usable])

    def _decide(self, classes: list, log_proba: np.ndarray, ys: Sequence, ws: Sequence[float]) -> None:
        from streambayes.decide import UNSURE, decide

        decisions = decide(self.loss, log_proba, [str(c) for c in classes], log=True)
        index = {c: i for i, c in enumerate(self.loss.classes)}
        for d, y, w in zip(decisions, ys, ws, strict=True):
            if str(y) not in index:
                raise ModelError(f"label {y!r} is not a class of the loss matrix "
                                 f"({', '.join(self.loss.classes)})")
            if d == UNSURE:
                self.unsure += w
                self.cost += w * self.loss.reject
            else:
                self.cost += w * float(self.loss.loss[index[d], index[str(y)]])

    def summary(self, n_labels: int) -> dict[str, Any]:
        from streambayes.evaluate.calibration import expected_calibration_error

        scored = self.events > self.cold
        decided = self.loss is not None and self.weight > 0
        return {
            "ece": expected_calibration_error(self.p_top, self.correct, weights=self.weights)
            if scored else None,
            "ece_calibrated": expected_calibration_error(self.p_top_calibrated, self.correct,
                                                         weights=self.weights) if scored else None,
            "log_loss_calibrated": self.log_loss_calibrated / self.weight if scored else None,
            "calibration_alpha": self.calibrator.alpha if scored else None,
            "expected_cost": self.cost / self.weight if decided else None,
            "unsure_rate": self.unsure / self.weight if decided else None,
            "events": self.events,
            "accuracy": float(self.accuracy.get()) if scored else None,
            "log_loss": float(self.log_loss.get()) if scored else None,
            "macro_f1": float(self.macro_f1.get()) if scored else None,
            "roc_auc": float(self.roc_auc.get()) if scored and n_labels == 2 else None,
            "cold": self.cold,
            "seconds": self.seconds,
            "events_per_s": self.events / self.seconds if self.seconds > 0 else None,
        }


class Prequential:
    """Predict-then-learn over mini-batches for several models; see the module docstring."""

    def __init__(self, models: Mapping[str, Learner], positive: str | None = None,
                 loss: Any = None, per_event: bool = True) -> None:
        self.models = dict(models)
        self.per_event = per_event  # exact per-event predictions where a model allows (see step)
        self.batched = set() if per_event else set(self.models)  # models that predicted the last
        self.per_event_events = dict.fromkeys(self.models, 0)    # batch from its start; per event
        self.positive = positive
        self.loss = loss  # a streambayes.decide.LossMatrix: decisions, expected cost, unsure rate
        self.scores = {name: ModelScore(loss) for name in self.models}
        self.labels: dict[Any, float] = {}  # label -> total weight seen
        self._auc_label: Any = positive
        self.events = 0

    def step(self, xs: Sequence[dict], ys: Sequence, ws: Sequence[float] | None = None,
             ) -> list[Rejection]:
        """Predict, score, then learn one mini-batch; returns the events dropped as bad.

        With ``per_event`` (default), a model that :func:`~streambayes.models.prequential_block.
        supports` the batch predicts each event with the model of every event before it, as
        event-by-event predict-then-learn would, at mini-batch cost; the others predict the
        batch with the model of its start."""
        ws = list(ws) if ws is not None else [1.0] * len(xs)
        keep, predicted, rejected = self._predict_all(xs, self.per_event)
        ys_kept = [ys[i] for i in keep]
        ws_kept = [ws[i] for i in keep]
        for label, w in zip(ys_kept, ws_kept, strict=True):
            self.labels[label] = self.labels.get(label, 0.0) + w
        if self._auc_label is None and ys_kept:
            self._auc_label = ys_kept[0]
        self.events += len(keep)
        keys = [xs[i].get(KEY) for i in keep] if keep and KEY in xs[keep[0]] else None
        self.batched = {name for name, (_, _, log_proba) in predicted.items() if log_proba is not None}
        for name, (X, classes, log_proba) in predicted.items():
            if log_proba is None:  # per event, in blocks (models.prequential_block)
                log_proba = self._per_event(name, X, ys_kept, ws_kept, keys)
                if log_proba is None:
                    self.per_event_events[name] += len(ys_kept)
                    continue
                self.batched.add(name)
                classes = list(self.models[name].classes)  # the block could not be learned whole
            self.scores[name].update(classes, log_proba, ys_kept, ws_kept, self._auc_label, keys)
            rejected.update(self._learn(name, X, [xs[i] for i in keep], ys_kept, ws_kept, keep))
        for score in self.scores.values():
            if score.events > score.cold:
                score.curve.add(self.events, score.accuracy.get(), score.log_loss.get())
        return rejections(rejected)

    def _per_event(self, name: str, X: Any, ys: list, ws: list[float], keys: list | None,
                   ) -> np.ndarray | None:
        """Score and learn the block event by event exactly; if it cannot be learned whole,
        the model's batch prediction (scored and learned by the caller)."""
        from streambayes.models.prequential_block import predict_learn

        model, score = self.models[name], self.scores[name]
        start = time.perf_counter()
        parts = predict_learn(model, X, ys, ws)
        if parts is None:
            log_proba = model.predict_log_proba_many(X)
        score.seconds += time.perf_counter() - start
        if parts is None:
            return log_proba
        for a, b, classes, part in parts:
            score.update(classes, part, ys[a:b], ws[a:b], self._auc_label,
                         None if keys is None else keys[a:b])
        return None

    def _predict_all(self, xs: Sequence[dict], per_event: bool = False,
                     ) -> tuple[list[int], dict, dict[int, str]]:
        """Featurize and predict (``per_event``: the models that predict per event only featurize)."""
        from streambayes.models.prequential_block import supports

        keep = list(range(len(xs)))
        rejected: dict[int, str] = {}
        while True:
            predicted: dict[str, tuple[Any, list, np.ndarray]] = {}
            bad: dict[int, str] = {}
            sub = [xs[i] for i in keep]
            for name, model in self.models.items():
                start = time.perf_counter()
                try:
                    X = model.featurize(sub)
                    if per_event and supports(model, X):
                        predicted[name] = (X, [], None)
                    else:
                        predicted[name] = (X, list(model.classes), model.predict_log_proba_many(X))
                except Exception as exc:  # noqa: BLE001 (probed event by event below)
                    found = _probe(model, sub)
                    if not found:
                        raise exc
                    bad.update({keep[j]: error for j, error in found.items()})
                self.scores[name].seconds += time.perf_counter() - start
            if not bad:
                return keep, predicted, rejected
            rejected.update(bad)
            keep = [i for i in keep if i not in bad]

    def _learn(self, name: str, X: Any, xs: list[dict], ys: list, ws: list[float],
               keep: list[int]) -> dict[int, str]:
        model = self.models[name]
        start = time.perf_counter()
        bad: dict[int, str] = {}
        try:
            model.learn_many(X, ys, ws)
        except Exception:  # noqa: BLE001 (learn event by event to keep the good ones)
            for j, x in enumerate(xs):
                try:
                    model.learn_many(model.featurize([x]), [ys[j]], [ws[j]])
                except Exception as exc:  # noqa: BLE001 (this event's own error)
                    bad[keep[j]] = describe(exc)
        self.scores[name].seconds += time.perf_counter() - start
        return bad

    @property
    def positive_label(self) -> Any:
        """The class whose ROC AUC is reported: ``positive``, else the larger of two labels."""
        if self.positive is not None:
            return self.positive
        return max(self.labels, key=str) if len(self.labels) == 2 else None

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per model: events, accuracy, log_loss, macro_f1, roc_auc, cold, seconds, events_per_s,
        ece (before and after online calibration), and under a loss matrix expected_cost,
        unsure_rate and, for two classes with a reject cost, the three-way ``cutoffs`` on
        p(positive) that would have minimised the cost of this replay."""
        n_labels = len(self.labels)
        if self.positive is not None and self.positive not in self.labels:
            n_labels = 0  # the requested positive class never occurred: no AUC to report
        out = {name: score.summary(n_labels) for name, score in self.scores.items()}
        for name, score in self.scores.items():
            out[name]["cutoffs"] = self._cutoffs(score)
            out[name].update(self._ranking(score))
        return out

    def _ranking(self, score: ModelScore) -> dict[str, Any]:
        """Per-key ranking quality of p(positive): precision of each key's top 10% and NDCG,
        averaged over keys (only when events carry keys and there are two labels)."""
        if not score.keys or len(self.labels) != 2 or len(score.keys) != len(score.p_positive):
            return {}
        from streambayes.evaluate.ranking import ndcg_per_key, precision_at_fraction_per_key

        p, y = self.positive_scores(score)
        precision = precision_at_fraction_per_key(score.keys, p, y, fraction=0.10)
        gain = ndcg_per_key(score.keys, p, y.astype(np.float64))
        return {"precision_at_10pct": precision.mean, "ndcg": gain.mean,
                "keys": len(set(score.keys))}

    def positive_scores(self, score: ModelScore) -> tuple[np.ndarray, np.ndarray]:
        """``(p(positive), is positive)`` per scored event, for :attr:`positive_label` (two labels).

        Events are stored against the label chosen when scoring began; with two labels the other
        label's probability is one minus it."""
        p = np.asarray(score.p_positive, dtype=np.float64)
        y = np.asarray(score.is_positive, dtype=bool)
        if self._auc_label != self.positive_label:
            return 1.0 - p, ~y
        return p, y

    def _cutoffs(self, score: ModelScore) -> dict[str, Any] | None:
        loss, positive = self.loss, self.positive_label
        if loss is None or loss.reject is None or len(self.labels) != 2 or not score.p_positive \
                or str(positive) not in loss.classes:
            return None
        from streambayes.decide import tune_cutoffs

        negative = str(next(label for label in self.labels if label != positive))
        if negative not in loss.classes:
            return None
        index = {c: i for i, c in enumerate(loss.classes)}
        p, n = index[str(positive)], index[negative]
        p_pos, is_pos = self.positive_scores(score)
        tuned = tune_cutoffs(p_pos, is_pos, score.weights,
                             fp_cost=float(loss.loss[p, n]), fn_cost=float(loss.loss[n, p]),
                             unsure_cost=float(loss.reject))
        return {"positive": str(positive), "low": tuned.low, "high": tuned.high,
                "expected_cost": tuned.cost, "unsure_rate": tuned.unsure_rate}

    @property
    def curves(self) -> dict[str, Curve]:
        return {name: score.curve for name, score in self.scores.items()}


def _probe(model: Learner, xs: Sequence[dict]) -> dict[int, str]:
    """Featurize and predict event by event; the events that raise, with their errors."""
    bad: dict[int, str] = {}
    for i, x in enumerate(xs):
        try:
            model.predict_log_proba_many(model.featurize([x]))
        except Exception as exc:  # noqa: BLE001 (this event's own error)
            bad[i] = describe(exc)
    return bad


_MODEL_ERROR = "model error: "


def describe(exc: BaseException) -> Refusal:
    """A rejected event's error and its reason: a :class:`FeatureError`'s message (reason
    ``limit`` for a :class:`LimitError`, else ``bad_feature``), any other error marked as a model
    error (reason ``model_error``).

    >>> describe(FeatureError("field 'x': bad")), describe(OverflowError("too big"))
    ("field 'x': bad", 'model error: OverflowError: too big')
    >>> describe(OverflowError("too big")).reason
    'model_error'
    """
    if isinstance(exc, FeatureError):
        out = Refusal(str(exc))
        out.reason = "limit" if isinstance(exc, LimitError) else "bad_feature"
        return out
    out = Refusal(f"{_MODEL_ERROR}{type(exc).__name__}: {exc}")
    out.reason = "model_error"
    return out


def rejections(bad: Mapping[int, str]) -> list[Rejection]:
    """:class:`Rejection` values by index, with the reason :func:`describe` gave each."""
    return [Rejection(i, error, getattr(error, "reason", "bad_feature"))
            for i, error in sorted(bad.items())]


def prequential(models: Mapping[str, Learner],
                batches: Iterable[tuple[Sequence[dict], Sequence] |
                                  tuple[Sequence[dict], Sequence, Sequence[float]]],
                positive: str | None = None, per_event: bool = True) -> Prequential:
    """Run :class:`Prequential` over ``(xs, ys)`` or ``(xs, ys, ws)`` mini-batches."""
    run = Prequential(models, positive, per_event=per_event)
    for batch in batches:
        run.step(*batch)
    return run
