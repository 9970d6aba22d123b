"""Counts per (class, feature id) for the ids seen so far, in memory that follows the data.

Feature ids are stable 32-bit token hashes (``[0, 2^32)``). :class:`IdIndex` maps each id
ever added to a *column* (0, 1, 2, … as ids appear; a batch's new ids in ascending order)
with a sorted array of the seen ids and the column of each (``np.searchsorted`` for a batch
of lookups, a merge for a batch of new ids): no Python object per id, and no structure sized
by the hash space.
:class:`SparseCounts` keeps a (classes, capacity) float64 table of those columns whose capacity
grows by a quarter when full (amortised O(1) per new id; at most 25% of it unused).

Chosen over a numpy open-addressing table and a dense 2^20 remap array by measuring on SMS and
20 Newsgroups (``bench/token_index.py``): the smallest, and the fastest of the two that do not
cost O(hash space) per model. Inserting is O(seen ids) per batch that brings new ids.

Columns are in first-seen order, so sums over the vocabulary go through
:meth:`SparseCounts.sorted_counts` (ascending id), the order a dense ``classes × 2^k`` table has.

>>> ix = IdIndex()
>>> ix.add(np.array([70, 5, 70, 9])).tolist(), ix.ids.tolist()
([2, 0, 2, 1], [5, 9, 70])
>>> ix.add(np.array([6, 9])).tolist(), ix.lookup(np.array([9, 8, 6])).tolist()
([3, 1], [1, -1, 3])
>>> c = SparseCounts(n_classes=2)
>>> c.add(np.array([1, 1, 0]), np.array([70, 5, 70]), np.array([1.0, 2.0, 3.0]))
>>> c.gather(np.array([5, 70, 6])).tolist()
[[0.0, 3.0, 0.0], [2.0, 1.0, 0.0]]
"""

from __future__ import annotations

import numpy as np

_SENTINEL = np.int64(2**62)  # above every 32-bit id: ends the sorted ids so lookups need no clip
_COL = np.int32  # columns: 4 bytes each (a table of 2^31 ids would not fit in memory anyway)
_MIN_CAPACITY = 64
_GROWTH = 4  # a full table grows by a quarter: at most 25% unused room (many small per-key models)
_FEW = 16
_COARSE_MIN = 1024  # queries (and seen ids) from which a lookup goes through the coarse table
# A table of that many seen ids or more, spread over at most _DENSE_SPREAD times as many id values
# (the 130k+ buckets a long-mail stream fills of 2^20), finds ids through a direct map from id to
# place (4 bytes per id value: at most 64 bytes per seen id, counted in ``nbytes``): one gather
# instead of the coarse table's halvings (1.4 ms -> 0.1 ms for a batch of 256 Enron mails).
_DENSE_MIN = 1 << 16
_DENSE_SPREAD = 16


def _coarse_table(ids: np.ndarray) -> tuple[int, np.ndarray]:
    """(shift, bounds) for ascending ``ids``: the ids with ``id >> shift == b`` are
    ``ids[bounds[b]:bounds[b + 1]]``, about four per bucket (a table of about a quarter as many
    entries as ids: memory follows the data); ``bounds`` ends with an empty bucket for the
    queries above every id."""
    bits = max(1, (len(ids) // 4).bit_length())
    shift = max(0, int(ids[-1]).bit_length() - bits)
    counts = np.bincount(ids >> shift)
    bounds = np.zeros(len(counts) + 2, np.int64)
    np.cumsum(counts, out=bounds[1:-1])
    bounds[-1] = bounds[-2]
    return shift, bounds


def _bucket_search(sorted_ids: np.ndarray, q: np.ndarray, shift: int, bounds: np.ndarray) -> np.ndarray:
    """``sorted_ids.searchsorted(q)`` (left) for non-negative ``q`` given :func:`_coarse_table`."""
    b = np.minimum(q >> shift, len(bounds) - 2)
    lo = bounds[b]
    n = bounds[b + 1] - lo
    for _ in range(int(n.max()).bit_length()):  # halve every query's range at once
        half = n >> 1
        mid = lo + half
        right = sorted_ids[mid] < q
        lo = np.where(right, mid + 1, lo)
        n = np.where(right, n - half - 1, half)
    return lo


class IdIndex:
    """Seen ids (sorted, unique) and the column of each; columns are dense, in first-seen order.

    Both arrays end with a sentinel (id ``2^62``, column -1), so a lookup is one
    ``searchsorted``, two gathers and a compare, whatever the ids.
    """

    def __init__(self) -> None:
        self._ids = np.array([_SENTINEL], np.int64)
        self._cols = np.array([-1], _COL)
        self._coarse: tuple | None = None  # (the _ids array it was built for, shift, bounds)
        self._dense: tuple | None = None  # (the _ids array it was built for, id -> place)

    def __len__(self) -> int:
        return len(self._ids) - 1

    @property
    def ids(self) -> np.ndarray:
        """The seen ids in ascending order (read-only view)."""
        return self._ids[:-1]

    @property
    def columns(self) -> np.ndarray:
        """The column of each id of :attr:`ids` (read-only view)."""
        return self._cols[:-1]

    def find(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """(where each id sits in the seen ids — an id not added: a place holding another —,
        which were added, whether all were); valid until the next :meth:`add` that brings a
        new id."""
        at = self._positions(ids)
        hit = self._ids[at] == ids
        return at, hit, np.count_nonzero(hit) == len(hit)  # cheaper than hit.all() on a few ids

    def _positions(self, ids: np.ndarray) -> np.ndarray:
        """``self._ids.searchsorted(ids)``; for a batch's many ids through a coarse table of the
        seen ids' high bits (:func:`_coarse_table`, rebuilt when an id was added: ``_ids`` is
        then a new array) and a few vectorised halvings within each id's bucket, which touch
        far less memory than a binary search over every seen id per query."""
        if len(ids) < _COARSE_MIN or len(self) < _COARSE_MIN or ids.dtype.kind != "i" or ids.min() < 0:
            return self._ids.searchsorted(ids)  # the method: no dispatch overhead per event
        dense = self._dense_places()
        if dense is not None:  # an id past the last seen one: the sentinel's place
            return dense[np.minimum(ids.astype(np.int64, copy=False), len(dense) - 1)]
        coarse = self._coarse
        if coarse is None or coarse[0] is not self._ids:
            coarse = self._coarse = (self._ids, *_coarse_table(self._ids[:-1]))
        return _bucket_search(self._ids, ids, coarse[1], coarse[2])

    def _dense_places(self) -> np.ndarray | None:
        """The place of every id value up to one past the largest seen id (a value not seen: the
        sentinel's place), when at least ``_DENSE_MIN`` ids are seen and they spread over at most
        ``_DENSE_SPREAD`` times as many values; else None. Made again after an id is added
        (``_ids`` is then a new array): O(largest id), less than one batch's halvings."""
        dense = self._dense
        if dense is not None and dense[0] is self._ids:
            return dense[1]
        self._dense = None
        n = len(self)
        if n < _DENSE_MIN or int(self._ids[n - 1]) + 2 > _DENSE_SPREAD * n:
            return None
        places = np.full(int(self._ids[n - 1]) + 2, n, np.int32)  # n: the sentinel's place
        places[self._ids[:n]] = np.arange(n, dtype=np.int32)
        self._dense, self._coarse = (self._ids, places), None  # (the coarse table is not needed)
        return places

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Column of each id (int32), -1 for ids never added."""
        return self.columns_found(self.find(ids))

    def columns_found(self, found: tuple[np.ndarray, np.ndarray, bool]) -> np.ndarray:
        """:meth:`lookup` of the ids :meth:`find` returned ``found`` for (a new array)."""
        at, hit, every = found
        cols = self._cols[at]
        if not every:
            cols[~hit] = -1
        return cols

    def known(self, found: tuple[np.ndarray, np.ndarray, bool]) -> np.ndarray:
        """Columns of the added ids among those :meth:`find` returned ``found`` for, in order."""
        at, hit, every = found
        return self._cols[at] if every else self._cols[at[hit]]

    def add(self, ids: np.ndarray, found: tuple | None = None) -> np.ndarray:
        """Column of each id, giving the unseen ones new columns (ascending id among them);
        ``found`` is :meth:`find` of these ids if already at hand."""
        q = np.asarray(ids, np.int64)
        at, hit, every = self.find(q) if found is None else found
        cols = self._cols[at]
        if every:
            return cols
        miss = ~hit
        new = q[miss]
        n = len(self)
        if len(new) <= _FEW:  # an event's new words: a few scalars, one splice
            few = sorted(set(new.tolist()))
            if few[0] < 0 or few[-1] >= 2**32:
                raise ValueError("ids must be in [0, 2^32)")
            self._splice(few, n)
            cols[miss] = n + np.searchsorted(few, new)
            return cols
        fresh = np.unique(new)
        if fresh[0] < 0 or fresh[-1] >= 2**32:
            raise ValueError("ids must be in [0, 2^32)")
        self._insert(fresh, np.arange(n, n + len(fresh)))
        cols[miss] = n + fresh.searchsorted(new)
        return cols

    def _splice(self, few: list[int], n: int) -> None:
        """Insert a few ascending new ids (columns ``n, n + 1, …``) by joining slices."""
        ids, idx, prev = [], [], 0
        for j, at in enumerate(self._ids.searchsorted(few).tolist()):
            ids += [self._ids[prev:at], [few[j]]]
            idx += [self._cols[prev:at], [n + j]]
            prev = at
        self._dense = None  # (made again for the new ids when asked)
        self._ids = np.concatenate([*ids, self._ids[prev:]])
        self._cols = np.concatenate([*idx, self._cols[prev:]], dtype=_COL)

    def _insert(self, fresh: np.ndarray, cols: np.ndarray) -> None:
        """Merge ascending ``fresh`` ids (none present) and their columns: O(seen + fresh)."""
        dest = self._ids.searchsorted(fresh) + np.arange(len(fresh))
        old = np.ones(len(self._ids) + len(fresh), bool)
        old[dest] = False
        ids, idx = np.empty(len(old), np.int64), np.empty(len(old), _COL)
        ids[dest], idx[dest] = fresh, cols
        ids[old], idx[old] = self._ids, self._cols
        self._dense = None
        self._ids, self._cols = ids, idx

    @classmethod
    def from_sorted(cls, ids: np.ndarray) -> IdIndex:
        """An index of ascending unique ``ids`` whose columns are 0, 1, 2, … in that order."""
        ids = np.asarray(ids, np.int64).reshape(-1)
        if np.any(np.diff(ids) <= 0) or (len(ids) and (ids[0] < 0 or ids[-1] >= 2**32)):
            raise ValueError("ids must be ascending, unique and in [0, 2^32)")
        ix = cls()
        ix._ids = np.append(ids, _SENTINEL)
        ix._cols = np.append(np.arange(len(ids), dtype=_COL), _COL(-1))
        return ix

    @property
    def nbytes(self) -> int:
        dense = self._dense
        held = dense[1].nbytes if dense is not None and dense[0] is self._ids else 0
        return self._ids.nbytes + self._cols.nbytes + held


class SparseCounts:
    """Weighted counts per (class, id) for the ids seen so far (unseen ids count 0)."""

    def __init__(self, n_classes: int = 0) -> None:
        self.index = IdIndex()
        self._table = np.zeros((n_classes, 0))

    @property
    def n_classes(self) -> int:
        return self._table.shape[0]

    def __len__(self) -> int:
        return len(self.index)

    def view(self) -> np.ndarray:
        """The live (classes, columns) counts, columns in first-seen order (a view)."""
        return self._table[:, : len(self.index)]

    def grow_classes(self, k: int) -> None:
        extra = k - self.n_classes
        if extra > 0:
            self._table = np.vstack([self._table, np.zeros((extra, self._table.shape[1]))])

    def columns(self, ids: np.ndarray, found: tuple | None = None) -> np.ndarray:
        """Columns of ``ids``, adding unseen ones (and room for them); ``found`` as in
        :meth:`IdIndex.add`."""
        cols = self.index.add(ids, found)
        need = len(self.index)
        cap = self._table.shape[1]
        if need > cap:
            new_cap = max(need, cap + cap // _GROWTH, _MIN_CAPACITY)
            table = np.zeros((self.n_classes, new_cap))
            table[:, :cap] = self._table
            self._table = table
        return cols

    def add(self, rows: np.ndarray, ids: np.ndarray, vals: np.ndarray) -> None:
        """Add ``vals`` at (row, id) in the given order (ids become seen)."""
        self.add_columns(rows, self.columns(ids), vals)

    def add_columns(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> None:
        """Add ``vals`` at (row, column) in the given order (columns from :meth:`columns`)."""
        np.add.at(self._table.reshape(-1), rows * self._table.shape[1] + cols, vals)

    def add_row(self, row: int, cols: np.ndarray, weight: float) -> None:
        """Add ``weight`` once per occurrence of each column (from :meth:`columns`) to class ``row``."""
        np.add.at(self._table[row], cols, weight)

    def gather(self, ids: np.ndarray) -> np.ndarray:
        """Counts of ``ids`` for every class, shape (classes, len(ids)) (a new array)."""
        cols = self.index.lookup(ids)
        out = self._table.take(np.maximum(cols, 0), axis=1) if len(self.index) else \
            np.zeros((self.n_classes, len(cols)))
        out[:, cols < 0] = 0.0
        return out

    def gather_columns(self, cols: np.ndarray) -> np.ndarray:
        """Counts at known columns, shape (classes, len(cols)) (a new array)."""
        return self._table.take(cols, axis=1)

    def sorted_counts(self) -> np.ndarray:
        """(classes, seen ids) counts in ascending id order (a new array)."""
        return self._table.take(self.index.columns, axis=1)

    def scale(self, factor: float) -> None:
        self._table *= factor

    def merge(self, other: SparseCounts, class_map: np.ndarray, factor: float = 1.0) -> None:
        """Add ``other``'s counts; its class ``i`` is our ``class_map[i]`` (one-to-one)."""
        self.grow_classes(int(class_map.max(initial=-1)) + 1)
        cols = self.columns(other.index.ids)
        self._table[np.ix_(class_map, cols)] += other.sorted_counts() * factor

    @classmethod
    def from_sorted(cls, ids: np.ndarray, counts: np.ndarray) -> SparseCounts:
        """Counts (classes, len(ids)) of ascending unique ``ids``."""
        c = cls()
        c.index = IdIndex.from_sorted(ids)
        c._table = np.array(counts, np.float64, order="C", ndmin=2)  # add() writes via reshape
        if c._table.ndim != 2 or c._table.shape[1] != len(c.index):
            raise ValueError(f"counts must be (classes, {len(c.index)}), got {c._table.shape}")
        return c

    @property
    def nbytes(self) -> int:
        return self.index.nbytes + self._table.nbytes
