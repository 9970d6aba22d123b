"""Rows of a batch by event key, and the positive log-odds that rank them, for
:class:`~streambayes.models.perkey.PerKeyModel`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streambayes.errors import FeatureError, ModelError
from streambayes.features import Batch, SparseRows


def _check_keys(keys, n: int, doing: str) -> list[str]:
    """The keys as a list of non-empty str, one per event, or FeatureError naming the event."""
    if keys is None:
        raise FeatureError(f"per-key {doing} needs a key for every event; no keys were given")
    keys = list(keys)
    if len(keys) != n:
        raise ModelError(f"per-key {doing} got {n} events but {len(keys)} keys")
    for i, key in enumerate(keys):
        if key is None or key == "":
            raise FeatureError(f"per-key {doing} needs a key for every event; event {i} has none")
        if not isinstance(key, str):
            raise FeatureError(f"per-key {doing}: event {i} has key {key!r} of type "
                               f"{type(key).__name__}, expected str")
    return keys


def _groups(keys: list[str]) -> list[tuple[str, np.ndarray]]:
    """(key, its event indices in stream order), keys in first-seen order."""
    rows: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        rows.setdefault(key, []).append(i)
    return [(key, np.array(idx, np.int64)) for key, idx in rows.items()]


def _take(batch: Batch, rows: np.ndarray) -> Batch:
    """The events ``rows`` of ``batch`` (in that order) as a batch of their own."""
    ip = batch.tokens.indptr
    lengths = ip[rows + 1] - ip[rows]
    indptr = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=indptr[1:])
    pos = np.repeat(ip[rows] - indptr[:-1], lengths) + np.arange(indptr[-1], dtype=np.int64)
    tokens = SparseRows(indptr, batch.tokens.indices[pos], batch.tokens.values[pos])
    return Batch(len(rows), tokens, {k: c[rows] for k, c in batch.categorical.items()},
                 {k: c[rows] for k, c in batch.numeric.items()},
                 None if batch.words is None else [batch.words[i] for i in rows])


def positive_log_odds(log_proba: np.ndarray, classes: Sequence, positive) -> np.ndarray:
    """``log P(positive | x) - log P(not positive | x)`` per row; zeros when ``positive`` is
    unknown or the only class (no ranking information)."""
    classes = list(classes)
    if positive not in classes or len(classes) < 2:
        return np.zeros(len(log_proba))
    j = classes.index(positive)
    return log_proba[:, j] - np.logaddexp.reduce(np.delete(log_proba, j, axis=1), axis=1)
