"""Calibrated serving: the learner fits the squashing exponent online, the predictor serves with it.

Naive Bayes posteriors on long texts are far too confident (issue 11: log loss 0.25 on real mail
where a calibrated filter reaches 0.12). :class:`~streambayes.evaluate.calibration.OnlineCalibrator`
fits ``α`` of ``P^α / Σ P^α`` by log loss; here it runs inside the services:

1. The learn loop, before it learns a micro-batch, predicts that batch with the current model and
   adds each event's outcome to the calibrator (prequential: no event is scored by a model that
   has learned it). Events of a class the model has not seen yet, or whose true class has
   probability 0, are left out (no exponent can repair a zero).
2. The calibrator's sufficient statistics (the loss on a fixed grid of ``α``, a few hundred bytes)
   go into the snapshot's ``config`` under ``"calibration"``; restoring resumes them. Shards'
   calibrators add, like their counts.
3. The predictor squashes every log-posterior with the snapshot's ``α`` before deciding, and
   publishes the calibrated ``posterior`` together with ``calibration_alpha`` and the raw
   ``raw_log_proba`` (natural-log posteriors of the model as it is).

Each event adds to the calibrator exactly once, also across a crash (its snapshot holds the
statistics up to the offsets it stores). Its contribution is computed with the model as of the
start of its micro-batch, so after a restart, whose micro-batches are cut elsewhere, the sums
may differ in their last digits from an uninterrupted run; the model's counts are exact.
Per-key models are served uncalibrated.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import Any

import numpy as np

from streambayes.errors import ModelError
from streambayes.evaluate.calibration import OnlineCalibrator, squash

__all__ = ["CONFIG_KEY", "OnlineCalibrator", "can_calibrate", "from_config", "merged", "squash",
           "to_config", "update_before_learning"]

logger = logging.getLogger(__name__)
CONFIG_KEY = "calibration"


def can_calibrate(model: Any) -> bool:
    """True for a single model that gives log-posteriors in batches (not a per-key model)."""
    return getattr(model, "name", None) != "perkey" and hasattr(model, "predict_log_proba_many")


def update_before_learning(model: Any, calibrator: OnlineCalibrator, X: Any,
                           labels: Sequence[Any], weights: Sequence[float]) -> int:
    """Step 1: predict the featurized batch ``X`` with ``model`` (not yet trained on it) and add
    the outcomes; returns the number of events used."""
    classes = list(model.classes)
    if len(classes) < 2 or not len(labels):
        return 0
    index = {c: i for i, c in enumerate(classes)}
    log_proba = np.asarray(model.predict_log_proba_many(X), dtype=np.float64)
    codes = np.fromiter(map(index.get, labels, repeat(-1)), np.int64, len(labels))  # (in C)
    rows = np.flatnonzero(codes >= 0)
    if not len(rows):
        return 0
    truth = codes[rows]
    sub = log_proba[rows]
    finite = np.isfinite(sub[np.arange(len(rows)), truth]) & np.isfinite(sub.max(axis=1))
    if not finite.any():
        return 0
    w = np.asarray(weights, dtype=np.float64)[rows][finite]
    calibrator.update(sub[finite], truth[finite], w)
    return int(finite.sum())


def to_config(calibrator: OnlineCalibrator) -> dict[str, Any]:
    """Step 2: the calibrator as plain JSON for the snapshot's ``config``."""
    state = calibrator.to_state()
    return {"alpha": calibrator.alpha, "params": state["params"],
            "loss": [float(v) for v in state["loss"]], "weight": float(state["weight"]),
            "n_events": int(state["n_events"])}


def from_config(config: Mapping[str, Any] | None) -> OnlineCalibrator | None:
    """The calibrator a snapshot's ``config`` holds, or None (none, or not readable: logged)."""
    stored = (config or {}).get(CONFIG_KEY)
    if not isinstance(stored, Mapping):
        return None
    try:
        return OnlineCalibrator.from_state(stored)
    except (KeyError, TypeError, ValueError, ModelError) as exc:
        logger.warning("snapshot calibration is unreadable (%s); serving uncalibrated", exc)
        return None


def merged(configs: Sequence[Mapping[str, Any] | None]) -> OnlineCalibrator | None:
    """The shards' calibrators added together; None unless every shard has one."""
    calibrators = [from_config(config) for config in configs]
    if not calibrators or any(c is None for c in calibrators):
        return None
    total = calibrators[0]
    try:
        for other in calibrators[1:]:
            total.merge(other)
    except ModelError as exc:
        logger.warning("shard calibrations do not merge (%s); serving uncalibrated", exc)
        return None
    return total
