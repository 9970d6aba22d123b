"""Top-k clues of a whole micro-batch at once: the batch's log-odds terms as flat arrays.

A clue is (feature, its term in ``log P(top|x) - log P(second|x)``). ``clues_one`` scores one event;
here every component gives the terms of *all* events as flat arrays (row, name, per-class vector),
the per-row differences top - runner-up are taken in one indexing, and the k-th largest |term| of
each row by one ``np.partition`` of the (events x longest event) matrix padded with -inf while it
is small (at most ``PARTITION_CELLS``, and 16 times the terms), else by one ``np.lexsort`` on
(row, -|term|), so a long document costs its own length only. Only the picked terms are named
(from the places the featurizer kept, :meth:`~streambayes.features.Batch.token_names`). Ties are
ordered as
``clues_one`` orders them: by |term| (descending), then name, then term order, so the two agree
exactly, ties included. Components without a batched form (the semi-naive ones) are asked row by
row, as ``clues_one`` does.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from streambayes.features import Batch
from streambayes.models.field_components import Categorical, Gaussian
from streambayes.models.token_components import TokenTable

PARTITION_CELLS = 1 << 20  # the padded matrix of _kth_largest: at most 8 MiB (and its copy)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off while a batch's clue tuples are built (they hold no cycles), then
    back on as it was: building them otherwise runs a collection every 700 containers, and the
    older generations' passes over the whole heap, which cost more than the clues themselves."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def clue_key(term: tuple[str, float]) -> tuple[float, str]:
    """Sort key of a clue: larger |term| first (NaN last), then by name."""
    value = abs(term[1])
    return (-value if value == value else 1.0, term[0])


def top_clues(rows: np.ndarray, diffs: np.ndarray, name_of, n: int, k: int) -> list[list]:
    """The k terms of each of n rows with the largest |diff| (ties: name, then position).

    ``name_of(indices)`` names the terms at those positions: only the picked ones are named.
    """
    if not len(rows) or k <= 0:
        return [[] for _ in range(n)]
    size = np.abs(diffs)
    size[np.isnan(size)] = -1.0
    kth = _kth_largest(rows, size, n, k)
    picked = np.flatnonzero(size >= kth[rows])  # the top k and every term tied with the k-th
    picked = picked[np.lexsort((-size[picked], rows[picked]))]  # stable: ties keep term order
    names = name_of(picked)
    r, s = rows[picked], size[picked]
    ties = np.flatnonzero((r[1:] == r[:-1]) & (s[1:] == s[:-1]))
    if len(ties):  # equal |diff| in a row: by name, then position (a stable sort of each run)
        picked, names = _names_first(picked, names, ties)
    chosen = np.flatnonzero(np.arange(len(r)) - np.searchsorted(r, r) < k)  # the first k of each row
    pairs = list(zip(map(names.__getitem__, chosen.tolist()), diffs[picked[chosen]].tolist(),
                     strict=True))
    bounds = np.searchsorted(r[chosen], np.arange(n + 1)).tolist()
    return [pairs[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _kth_largest(rows: np.ndarray, size: np.ndarray, n: int, k: int) -> np.ndarray:
    """The k-th largest size of each row (-inf for a row with fewer terms): one ``np.partition``
    of the (rows x longest row) matrix, padded with -inf, when it is not much larger than the terms (a
    short row's k-th largest is then a pad), else one sort."""
    counts = np.bincount(rows, minlength=n)
    longest = int(counts.max())
    if longest < k:
        return np.full(n, -np.inf)
    if len(rows) > 1 and not (rows[1:] >= rows[:-1]).all():  # one component's rows ascend already
        by_row = np.argsort(rows, kind="stable")
        rows, size = rows[by_row], size[by_row]
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    # a partition is some 20x cheaper per cell than a sort; the matrix (and its copy) stay small
    if n * longest <= min(16 * len(rows) + 65536, PARTITION_CELLS):
        matrix = np.full((n, longest), -np.inf)
        matrix[rows, np.arange(len(rows)) - starts[rows]] = size
        return np.partition(matrix, longest - k, axis=1)[:, longest - k]
    kth = np.full(n, -np.inf)
    full = np.flatnonzero(counts >= k)
    order = np.lexsort((-size, rows))
    kth[full] = size[order[starts[full] + k - 1]]
    return kth


def _names_first(picked: np.ndarray, names: list[str], ties: np.ndarray):
    """Reorder each run of tied terms by name (stable), in place."""
    runs: list[list[int]] = []
    for t in ties.tolist():
        if runs and runs[-1][1] == t:
            runs[-1][1] = t + 1
        else:
            runs.append([t, t + 1])
    for lo, hi in runs:
        hi += 1
        part = sorted(zip(names[lo:hi], range(hi - lo), picked[lo:hi].tolist(), strict=True))
        names[lo:hi] = [p[0] for p in part]
        picked[lo:hi] = [p[2] for p in part]
    return picked, names


def batch_terms(components, batch: Batch, scale: float, a: np.ndarray, b: np.ndarray):
    """(rows, diffs, name_of) of every component's terms, in component order."""
    rows, diffs, namers, offsets = [], [], [], [0]
    for comp in components:
        r, vecs, name_of = contributions_many(comp, batch, scale)
        if len(r):
            rows.append(r)
            diffs.append(vecs[np.arange(len(r)), a[r]] - vecs[np.arange(len(r)), b[r]])
            namers.append(name_of)
            offsets.append(offsets[-1] + len(r))
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0), lambda idx: []
    bounds = np.array(offsets[1:])

    def name_of(idx: np.ndarray) -> list[str]:
        if len(namers) == 1:
            return namers[0](idx)
        comp = np.searchsorted(bounds, idx, side="right")
        names = np.empty(len(idx), object)
        for c in np.unique(comp).tolist():
            at = np.flatnonzero(comp == c)
            names[at] = namers[c](idx[at] - offsets[c])
        return names.tolist()

    return np.concatenate(rows), np.concatenate(diffs), name_of


def contributions_many(comp, batch: Batch, scale: float):
    """``comp.contributions`` of every row: rows (m,), vectors (m, classes), name_of(indices)."""
    if isinstance(comp, TokenTable):
        return _tokens(comp, batch, scale)
    if isinstance(comp, Categorical):
        rows, fields, values, logp = comp._known(batch, scale)
        names = comp.fields.values
        return np.asarray(rows, np.int64), logp, \
            lambda idx: [f"{names[fields[i]]}={values[i]}" for i in idx.tolist()]
    if isinstance(comp, Gaussian):
        if not batch.numeric or not len(comp.fields):
            return np.zeros(0, np.int64), np.zeros((0, 0)), None
        values, known, logpdf = comp._log_density(batch, scale)
        r, j = np.nonzero(~np.isnan(values))
        fields = known[j]
        return r, logpdf[r, :, j], lambda idx: [str(comp.fields.values[i]) for i in fields[idx].tolist()]
    rows, names, vecs = [], [], []  # row by row, as clues_one asks
    for i in range(batch.n):
        for name, vec in comp.contributions(batch.slice(i, i + 1), scale):
            if name != "prior":  # the prior is no clue
                rows.append(i)
                names.append(name)
                vecs.append(vec)
    return np.asarray(rows, np.int64), np.array(vecs).reshape(len(rows), -1), \
        lambda idx: [names[i] for i in idx.tolist()]


def _tokens(comp: TokenTable, batch: Batch, scale: float):
    """TokenTable.contributions of every row, summed per (row, bucket) in entry order.

    A row's entries with one bucket share one name (``clues_one`` names a bucket by its last entry),
    so summing per (row, bucket) is summing per (row, name); only the picked terms get named.
    """
    if comp.vocabulary == 0:
        return np.zeros(0, np.int64), np.zeros((0, 0)), None
    nf = comp.n_features
    sr = comp._presence(batch)
    rows, buckets, values = sr.row_ids(), sr.indices, sr.values
    keep, counts = comp._counts_of(buckets)
    if keep is not None:
        rows, buckets, values = rows[keep], buckets[keep], values[keep]
    scores = comp.entry_scores(counts, scale) * values  # (classes, kept entries)
    flat = rows * nf + buckets
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    new = np.empty(len(flat), bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    keys = ordered[starts]
    inverse = np.empty(len(flat), np.int64)
    inverse[order] = np.cumsum(new) - 1
    totals = np.empty((len(keys), scores.shape[0]))
    for c in range(scores.shape[0]):  # bincount adds in entry order, as clues_one sums
        totals[:, c] = np.bincount(inverse, scores[c], minlength=len(keys))
    entries = comp.entries(batch)
    if sr is entries:  # one bucket is kept or dropped as a whole: its last kept entry is its last
        last = order[np.append(starts[1:], len(flat)) - 1] if len(flat) else starts  # no word
        named_by = last if keep is None else np.flatnonzero(keep)[last]
    else:
        ekeys = entries.row_ids() * nf + entries.indices
        seen, last = np.unique(ekeys[::-1], return_index=True)
        named_by = (len(ekeys) - 1 - last)[np.searchsorted(seen, keys)]  # the last entry of each
    out_rows = keys // nf
    const = comp.row_constant(scale)
    if const is None:
        return out_rows, totals, lambda idx: _entry_names(batch, entries, named_by[idx])
    n_terms = len(keys)

    def name_of(idx: np.ndarray) -> list[str]:
        tokens = idx < n_terms
        if tokens.all():  # no "(absent words)" term picked
            return _entry_names(batch, entries, named_by[idx])
        names = _entry_names(batch, entries, named_by[idx[tokens]])
        it = iter(names)
        return [next(it) if t else "(absent words)" for t in tokens.tolist()]

    return np.concatenate([out_rows, np.arange(batch.n)]), \
        np.concatenate([totals, np.broadcast_to(const, (batch.n, len(const)))]), name_of


def _entry_names(batch: Batch, entries, at: np.ndarray) -> list[str]:
    """Readable names of the entries at positions ``at`` of ``comp.entries(batch)``: only these
    words are made (:meth:`Batch.token_names`)."""
    if entries is batch.tokens:  # no fields folded in: the entries are the tokens
        return batch.token_names(at, "tok:")
    indptr = batch.tokens.indptr
    rows = [np.repeat(np.arange(batch.n), np.diff(indptr))]
    kinds = [np.arange(indptr[-1])]  # >= 0: a token; < 0: -1 - the position in `named`
    named: list[str] = []
    for field, column in batch.categorical.items():
        present = np.flatnonzero(column != None)  # noqa: E711  (object array: elementwise)
        rows.append(present)
        kinds.append(-1 - np.arange(len(named), len(named) + len(present)))
        named += [f"{field}={column[i]}" for i in present.tolist()]
    for field, column in batch.numeric.items():
        present = np.flatnonzero(~np.isnan(column))
        rows.append(present)
        kinds.append(-1 - np.arange(len(named), len(named) + len(present)))
        named += [str(field)] * len(present)
    kind = np.concatenate(kinds)[np.argsort(np.concatenate(rows), kind="stable")][at]
    words = iter(batch.token_names(kind[kind >= 0]))
    return ["tok:" + next(words) if c >= 0 else named[-1 - c] for c in kind.tolist()]
