"""Top-k clues of a whole micro-batch at once: the batch's log-odds terms as flat arrays.

A clue is (feature, its term in ``log P(top|x) - log P(second|x)``). ``clues_one`` scores one
event; here every component gives the terms of *all* events as flat arrays (row, name, per-class
vector), the per-row differences top - runner-up are taken in one indexing, and the k-th largest
|term| of each row by ``np.partition`` of matrices padded with -inf: (events x 32, or k if larger)
for the events with at most that many terms, (longer events x the longest) for the others, while a
matrix is not much larger than its terms (else one ``np.lexsort`` on (row, -|term|)), so a long
document costs its own length only. The picked terms (the k largest of each row and any tied with
the k-th) are ordered by a stable sort of each row, again as a narrow padded matrix. Only the
picked terms are named (from the places the featurizer kept,
:meth:`~streambayes.features.Batch.token_names`). Ties are ordered as ``clues_one`` orders them: by
|term| (descending), then name, then term order, so the two agree exactly, ties included.
Components without a batched form (the semi-naive ones) are asked row by row, as ``clues_one``
does. A batch of at most :data:`SMALL_TERMS` terms (a few events: a predictor at low load) is
sorted in Python instead, every term named: the numpy passes' fixed cost is most of its time.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from streambayes.features import Batch
from streambayes.models.field_components import Categorical, Gaussian
from streambayes.models.token_components import TokenTable

PARTITION_CELLS = 1 << 20  # the padded matrices of _kth_largest and _by_size: at most 8 MiB each
KTH_WIDTH = 32  # rows of up to this many terms: one (rows x 32) matrix; longer rows apart
SORT_WIDTH = 16  # the picked terms of a row sorted in a matrix row while no row has more
SMALL_TERMS = 160  # a batch with at most this many terms: sorted in Python (the numpy passes' fixed
# cost, ~0.3 ms, is most of a few events' clue time: the predictor's small batches at low load)


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
    return top_clue_batch(rows, diffs, name_of, n, k).lists()


class ClueBatch:
    """The clues of a batch of ``n`` events before they are made Python lists: event ``i``'s are
    the terms ``picked[bounds[i]:bounds[i+1]]`` (term indices, in clue order), worth ``values``.
    :meth:`lists` gives ``[[(name, value), ...], ...]``; :meth:`name_spans` gives the names as
    byte spans of one UTF-8 buffer when they are words of the texts, so that a writer can make
    the clues' JSON for the whole batch at once, with no string per clue."""

    __slots__ = ("n", "picked", "bounds", "values", "name_of")

    def __init__(self, n: int, picked: np.ndarray, bounds: np.ndarray, values: np.ndarray,
                 name_of) -> None:
        self.n, self.picked, self.bounds, self.values, self.name_of = n, picked, bounds, values, name_of

    @classmethod
    def none(cls, n: int) -> ClueBatch:
        """No clue for any of ``n`` events."""
        return cls(n, np.zeros(0, np.int64), np.zeros(n + 1, np.int64), np.zeros(0), None)

    def lists(self) -> list[list[tuple[str, float]]]:
        pairs = list(zip(self.name_of(self.picked), self.values.tolist(), strict=True)) \
            if len(self.picked) else []
        bounds = self.bounds.tolist()
        return [pairs[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def name_spans(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, str] | None:
        """(UTF-8 buffer, starts, ends, prefix): name ``j`` is ``prefix`` then ``buffer[starts[j]:
        ends[j]]`` decoded; None when the names are not all such words."""
        spans = getattr(self.name_of, "byte_spans", None)
        got = spans(self.picked) if spans is not None and len(self.picked) else None
        return got


def top_clue_batch(rows: np.ndarray, diffs: np.ndarray, name_of, n: int, k: int) -> ClueBatch:
    """:func:`top_clues` as a :class:`ClueBatch`: each row's k terms with the largest |diff|."""
    if not len(rows) or k <= 0:
        return ClueBatch.none(n)
    size = np.abs(diffs)
    size[np.isnan(size)] = -1.0
    if len(rows) <= SMALL_TERMS:
        return _top_few(rows, diffs, size, name_of, n, k)
    by_row = None
    if len(rows) > 1 and not (rows[1:] >= rows[:-1]).all():  # one component's rows ascend already
        by_row = np.argsort(rows, kind="stable")
        rows, size = rows[by_row], size[by_row]
    kth = _kth_largest(rows, size, n, k)
    picked = np.flatnonzero(size >= kth[rows])  # the top k and every term tied with the k-th
    picked = _by_size(picked, rows[picked], size[picked], n)  # stable: ties keep term order
    r, s = rows[picked], size[picked]
    if by_row is not None:
        picked = by_row[picked]
    tie = (r[1:] == r[:-1]) & (s[1:] == s[:-1])
    if tie.any():  # equal |diff| in a row: by name, then position (a stable sort of each run)
        _names_first(picked, tie, name_of)
    first = np.searchsorted(r, np.arange(n))  # each row's first picked term
    chosen = np.flatnonzero(np.arange(len(r)) - first[r] < k)  # the first k of each row
    picked = picked[chosen]
    return ClueBatch(n, picked, np.searchsorted(r[chosen], np.arange(n + 1)), diffs[picked], name_of)


def _top_few(rows: np.ndarray, diffs: np.ndarray, size: np.ndarray, name_of, n: int,
             k: int) -> ClueBatch:
    """:func:`top_clue_batch` of a few terms by one Python sort on (row, -size, name, position):
    every term named (a few strings), no padded matrix."""
    r, s, names = rows.tolist(), size.tolist(), name_of(np.arange(len(rows)))
    counts, picked = [0] * n, []
    for j in sorted(range(len(r)), key=lambda j: (r[j], -s[j], names[j], j)):
        if counts[r[j]] < k:
            counts[r[j]] += 1
            picked.append(j)
    bounds = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=bounds[1:])
    chosen = np.array(picked, np.int64)
    return ClueBatch(n, chosen, bounds, diffs[chosen], _Named(names, name_of))


class _Named:
    """A namer that gives names made already (``byte_spans`` kept from the one that made them)."""

    __slots__ = ("names", "byte_spans")

    def __init__(self, names: list[str], name_of) -> None:
        self.names, self.byte_spans = names, getattr(name_of, "byte_spans", None)

    def __call__(self, idx: np.ndarray) -> list[str]:
        return [self.names[i] for i in np.asarray(idx).tolist()]


def _by_size(picked: np.ndarray, rows: np.ndarray, size: np.ndarray, n: int) -> np.ndarray:
    """``picked`` (ascending rows, positions ascending in each row) ordered by row, then size
    (descending), then position: a stable sort of each row's few picked terms as the rows of a
    narrow padded matrix while they fit :data:`SORT_WIDTH` (a stable argsort of rows that short is
    an insertion sort: 0.04 ms for 1,000 rows against 0.5 ms for a ``lexsort`` of their 5,000
    terms), else one ``lexsort``."""
    counts = np.bincount(rows, minlength=n)
    widest = int(counts.max()) if len(counts) else 0
    if widest > SORT_WIDTH or n * widest > _cells(len(rows)):
        return picked[np.lexsort((-size, rows))]
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    matrix = np.full((n, widest), np.inf)
    matrix[rows, np.arange(len(rows)) - starts[rows]] = -size
    order = np.argsort(matrix, axis=1, kind="stable")
    order += starts[:-1, None]
    return picked[order[np.arange(widest) < counts[:, None]]]


def _cells(terms: int) -> int:
    """The largest padded matrix worth making for ``terms`` terms (pads cost too)."""
    return min(16 * terms + 65536, PARTITION_CELLS)


def _kth_largest(rows: np.ndarray, size: np.ndarray, n: int, k: int) -> np.ndarray:
    """The k-th largest size of each row (-inf for a row with fewer terms), rows ascending.

    One ``np.partition`` of a matrix padded with -inf (a short row's k-th largest is then a pad):
    (rows x up to ``KTH_WIDTH``) for the rows that fit it, and (longer rows x longest row) for the
    others; a matrix much larger than its terms gives way to one sort of them."""
    counts = np.bincount(rows, minlength=n)
    longest = int(counts.max())
    kth = np.full(n, -np.inf)
    if longest < k:
        return kth
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    column = np.arange(len(rows)) - starts[rows]
    width = max(min(longest, KTH_WIDTH), k)
    short = counts <= width
    inside = short[rows]
    some = int(np.count_nonzero(inside))
    if some and n * width <= _cells(some):
        _partition_into(kth, None, rows[inside], column[inside], size[inside], n, width, k)
    else:
        short[:] = False  # every row by the other ways
        inside[:] = False
    long_rows = np.flatnonzero(~short)
    if not len(long_rows):
        return kth
    outside = ~inside
    terms = int(np.count_nonzero(outside))
    if len(long_rows) * longest <= _cells(terms):
        place = np.cumsum(~short) - 1  # each long row's row in the second matrix
        _partition_into(kth, long_rows, place[rows[outside]], column[outside], size[outside],
                        len(long_rows), longest, k)
        return kth
    rows, size = rows[outside], size[outside]
    order = np.lexsort((-size, rows))
    first = np.cumsum(counts[long_rows]) - counts[long_rows]  # each row's first in ``order``
    full = counts[long_rows] >= k
    kth[long_rows[full]] = size[order[first[full] + k - 1]]
    return kth


def _partition_into(kth: np.ndarray, at: np.ndarray | None, rows: np.ndarray, column: np.ndarray,
                    size: np.ndarray, n: int, width: int, k: int) -> None:
    """``kth[at]`` (``at`` None: every row) = the k-th largest of each row of the (n x width)
    matrix of ``size`` at (``rows``, ``column``), padded with -inf."""
    matrix = np.full((n, width), -np.inf)
    matrix[rows, column] = size
    found = np.partition(matrix, width - k, axis=1)[:, width - k]
    if at is None:
        kth[:] = found
    else:
        kth[at] = found


def _names_first(picked: np.ndarray, tie: np.ndarray, name_of) -> None:
    """Reorder each run of tied terms (``tie[i]``: term i+1 ties term i) by name, stably, in place:
    one ``lexsort`` of the tied terms on (run, name), the names compared as Python compares them."""
    in_run = np.zeros(len(picked), bool)
    in_run[:-1] = tie
    in_run[1:] |= tie
    at = np.flatnonzero(in_run)
    run = np.cumsum(np.r_[True, ~tie])[at]  # the run of each tied term
    spans = getattr(name_of, "byte_spans", None)
    got = spans(picked[at]) if spans is not None else None
    names = _fixed_width(*got[:3]) if got is not None else None
    if names is None:
        names = np.empty(len(at), object)
        names[:] = name_of(picked[at])
    picked[at] = picked[at][np.lexsort((names, run))]


def _fixed_width(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray | None:
    """The words ``buf[starts[i]:ends[i]]`` as one numpy bytes array (``S<longest>``, padded with
    NUL), which orders them as their UTF-8 bytes, i.e. as their strings (one prefix for all); None
    when a word ends with a NUL byte (the padding would hide it), or when the array would be
    mostly padding (one long word among many short ones: the strings cost their own length)."""
    lengths = ends - starts
    width = int(lengths.max()) if len(lengths) else 0
    if not width or len(starts) * width > 4 * int(lengths.sum()) + 4096 or \
            (buf[ends[lengths > 0] - 1] == 0).any():
        return None  # no word, one long word among many (mostly padding), or a NUL at an end
    rows = np.repeat(np.arange(len(starts)), lengths)
    place = np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    matrix = np.zeros((len(starts), width), np.uint8)
    matrix[rows, place] = buf[starts[rows] + place]
    return matrix.view(f"S{width}").reshape(-1)


def batch_terms(components, batch: Batch, scale: float, a: np.ndarray, b: np.ndarray):
    """(rows, diffs, name_of) of every component's terms, in component order."""
    rows, diffs, namers, offsets = [], [], [], [0]
    for comp in components:
        r, vecs, name_of = contributions_many(comp, batch, scale)
        if len(r):
            rows.append(r)
            at = np.arange(len(r)) * vecs.shape[1]  # flat places: one gather each
            flat = vecs.reshape(-1)
            diffs.append(flat[at + a[r]] - flat[at + b[r]])
            namers.append(name_of)
            offsets.append(offsets[-1] + len(r))
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0), lambda idx: []
    if len(namers) == 1:  # one component's terms: its own namer (offset 0)
        return rows[0], diffs[0], namers[0]
    bounds = np.array(offsets[1:])

    def name_of(idx: np.ndarray) -> list[str]:
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
    # the scores the prediction made (per distinct id, then gathered: the same numbers)
    keep, scores = comp.scores_kept_for(buckets, scale)
    if keep is not None:
        rows, buckets, values = rows[keep], buckets[keep], values[keep]
    scores = scores * values  # (classes, kept entries)
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
        return out_rows, totals, _TokenNames(batch, entries, named_by, len(keys))
    return np.concatenate([out_rows, np.arange(batch.n)]), \
        np.concatenate([totals, np.broadcast_to(const, (batch.n, len(const)))]), \
        _TokenNames(batch, entries, named_by, len(keys))


class _TokenNames:
    """The names of a token table's terms (term ``i`` < ``n_terms`` is the word of entry
    ``named_by[i]``; the ones after are "(absent words)"), as strings or as byte spans."""

    __slots__ = ("batch", "entries", "named_by", "n_terms")

    def __init__(self, batch: Batch, entries, named_by: np.ndarray, n_terms: int) -> None:
        self.batch, self.entries, self.named_by, self.n_terms = batch, entries, named_by, n_terms

    def __call__(self, idx: np.ndarray) -> list[str]:
        tokens = idx < self.n_terms
        if tokens.all():  # no "(absent words)" term picked
            return _entry_names(self.batch, self.entries, self.named_by[idx])
        names = _entry_names(self.batch, self.entries, self.named_by[idx[tokens]])
        it = iter(names)
        return [next(it) if t else "(absent words)" for t in tokens.tolist()]

    def byte_spans(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, str] | None:
        """The names as (UTF-8 buffer, starts, ends, "tok:"), when every one is a word kept in
        place (no folded field, no "(absent words)"), else None."""
        if self.entries is not self.batch.tokens or not (idx < self.n_terms).all():
            return None
        got = self.batch.token_byte_spans(self.named_by[idx])
        return None if got is None else (*got, "tok:")


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
