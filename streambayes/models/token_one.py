"""One event of plain tokens through a multinomial token table, with the fewest numpy calls.

Per-event streaming (River's ``predict_proba_one`` then ``learn_one``) spends most of its time
in per-call overhead, not in arithmetic: one short message has a dozen tokens and two classes.
These functions do what :meth:`~streambayes.models.token_components.Multinomial.score_buckets`
and :meth:`~streambayes.models.token_components.TokenTable.learn_buckets` do for the plain case
(counts as they come, Lidstone ``alpha > 0``, the vocabulary seen so far), reaching into the
sparse table once: one ``searchsorted`` for the event's ids, one gather of their counts, the
per-class constants in plain floats. A prequential ``learn_one`` right after ``predict_proba_one``
of the same event reuses the lookup (when no id was added meanwhile).

The additions are those of :meth:`learn_buckets` in the same order (the same state, bit for bit);
the scores equal ``score_buckets`` up to the last bits of the logarithms of the class constants
(``math.log`` against numpy's), as tests check.
"""

from __future__ import annotations

import math

import numpy as np

from streambayes.models.token_components import Multinomial


def fits(comp: Multinomial) -> bool:
    """Whether ``comp`` is a table these functions serve (else the general path)."""
    return comp.plain and comp.m is None and comp.vocab_size is None and comp._alpha() > 0


def _lookup(comp: Multinomial, buckets: np.ndarray) -> tuple:
    """:meth:`IdIndex.find` of ``buckets``, kept for a following learn of the same array."""
    last = comp._last_lookup
    index = comp.table.index
    n = len(index._ids)
    if last is not None and last[0] is buckets and last[1] == n - 1:
        return last[2]
    ids = index._ids
    at = ids.searchsorted(buckets)
    hit = ids[at] == buckets
    found = (at, hit, np.count_nonzero(hit) == len(hit))
    comp._last_lookup = (buckets, n - 1, found)
    return found


def score_one(comp: Multinomial, buckets: np.ndarray, log_prior: list[float]) -> list[float]:
    """``log P(c) + Σ_tokens log((n_cw + α) / (n_c + α·V))`` per class; tokens never learned are
    left out (as :meth:`Multinomial.score_buckets` does)."""
    at, hit, every = _lookup(comp, buckets)
    cols = comp.table.index._cols[at if every else at[hit]]
    n = len(cols)
    vocabulary = len(comp.table.index)
    if not n or not vocabulary:
        return list(log_prior)
    a = comp._alpha()
    logs = comp.table._table.take(cols, axis=1)
    logs += a
    np.log(logs, out=logs)
    sums = np.add.reduce(logs, axis=1).tolist()
    av = a * vocabulary
    log = math.log
    return [p + s - n * log(t + av)
            for p, s, t in zip(log_prior, sums, comp.totals.tolist(), strict=True)]


def learn_one(comp: Multinomial, c: int, buckets: np.ndarray, w: float) -> None:
    """Add one event of plain tokens (value 1 each, weight ``w``) to class ``c``."""
    table = comp.table
    cols = table.columns(buckets, _lookup(comp, buckets))
    np.add.at(table._table[c], cols, w)
    total = float(comp.totals[c])
    for _ in range(len(buckets)):
        total += w  # one addition per occurrence, as np.add.at does in learn()
    comp.totals[c] = total
    if comp._cache:
        comp._cache.clear()
