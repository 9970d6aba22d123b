"""Fresh learners by CLI name (``--model``), without importing the evaluation layer: a learner
or predictor process starts in a fraction of the time a replay needs (River's metrics and
scipy.stats are not loaded), which is most of a group member's take-over time under load."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from streambayes.errors import ModelError, NetworkError, UsageError

if TYPE_CHECKING:
    from streambayes.evaluate.prequential import Learner


def build_models(names: Sequence[str], network: Path | None = None,
                 class_variable: str | None = None,
                 bounds: Mapping[str, int] | None = None) -> dict[str, Learner]:
    """Fresh learners by CLI name; an unknown or repeated name is a :class:`UsageError`.

    ``bn`` (a Bayesian network) needs ``network`` (a BIF file); its ``class_variable`` is the
    label field. ``bounds`` (``max_classes``, ``max_fields``, ``max_values``) go to every other
    model (a network's states bound a ``bn`` already)."""
    from streambayes.models import MODEL_NAMES, make_model

    models: dict[str, Learner] = {}
    for name in names:
        if name in models:
            raise UsageError(f"model {name!r} is given twice")
        if name not in MODEL_NAMES:
            raise UsageError(f"unknown model {name!r} (valid: {', '.join(MODEL_NAMES)})")
        try:
            params = {"network": str(network), "class_variable": class_variable} if name == "bn" \
                else dict(bounds or {})
            if name == "bn" and network is None:
                raise UsageError("model 'bn' needs --network FILE.bif")
            models[name] = make_model(name, **params)
        except (ModelError, NetworkError) as exc:
            raise UsageError(str(exc)) from None
    return models
