"""PURE prequential evaluation over iterables of mini-batches, and report figures.

The names below are imported on first use (PEP 562): :mod:`.prequential` brings in
``river.metrics`` and with it ``scipy.stats`` (about 0.8 s), which a learner that only needs
:mod:`.calibration` should not pay for at start.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Curve", "ModelScore", "Prequential", "Rejection", "prequential"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        module = importlib.import_module("streambayes.evaluate.prequential")
        globals().update({n: getattr(module, n) for n in __all__})  # the function, not the module
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
