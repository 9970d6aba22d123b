"""One event of plain tokens through a multinomial token table, with the fewest numpy calls.

Per-event streaming (River's ``predict_proba_one`` then ``learn_one``) spends most of its time
in per-call overhead, not in arithmetic: one short message has a dozen tokens and two classes.
These functions do what :meth:`~streambayes.models.token_components.Multinomial.score_buckets`
and :meth:`~streambayes.models.token_components.TokenTable.learn_buckets` do for the plain case
(counts as they come, Lidstone ``alpha > 0``, the vocabulary seen so far), reaching into the
sparse table once: one ``searchsorted`` for the event's ids, one gather of their counts, the
per-class constants in plain floats. A prequential ``learn_one`` right after ``predict_proba_one``
of the same event reuses the lookup (when no id was added meanwhile; ``_one_lookup`` on the table,
a cache that snapshots leave out, dropped once a learn adds ids).

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
    """(where each id sits in the index, which were learned, whether all were, the columns of
    those learned), kept on the table for a following learn of the same array: valid while the
    index holds the same id array (a new id makes a new one)."""
    ids = comp.table.index._ids
    last = getattr(comp, "_one_lookup", None)
    if last is not None and last[0] is buckets and last[1] is ids:
        return last[2]
    at = ids.searchsorted(buckets)
    hit = ids[at] == buckets
    every = np.count_nonzero(hit) == len(hit)
    found = (at, hit, every, comp.table.index._cols[at if every else at[hit]])
    comp._one_lookup = (buckets, ids, found)
    return found


def score_one(comp: Multinomial, buckets: np.ndarray, log_prior: list[float]) -> list[float]:
    """``log P(c) + Σ_tokens log((n_cw + α) / (n_c + α·V))`` per class; tokens never learned are
    left out (as :meth:`Multinomial.score_buckets` does)."""
    cols = _lookup(comp, buckets)[3]
    n = len(cols)
    vocabulary = len(comp.table.index._ids) - 1
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
    at, hit, every, cols = _lookup(comp, buckets)
    if not every:  # new ids: columns for them (and room)
        cols = table.columns(buckets, (at, hit, every))
        comp._one_lookup = None  # do not hold on to the old id array
    np.add.at(table._table[c], cols, w)
    total = float(comp.totals[c])
    n = len(buckets)
    if w == 1.0 and total.is_integer() and total + n < 2**53:
        total += n  # every partial sum is an exact integer: the same as n additions of 1.0
    else:
        for _ in range(n):
            total += w  # one addition per occurrence, as np.add.at does in learn()
    comp.totals[c] = total
    if comp._cache:
        comp._cache.clear()
