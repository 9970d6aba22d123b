"""Counts per (class, feature id) for the ids seen so far, in memory that follows the data.

Feature ids are stable 32-bit token hashes (``[0, 2^32)``). :class:`IdIndex` maps each id
ever added to a *column* (0, 1, 2, … as ids appear; a batch's new ids in ascending order)
with a sorted array of the seen ids and the column of each (``np.searchsorted`` for a batch
of lookups, a merge for a batch of new ids): no Python object per id, and no structure sized
by the hash space.
:class:`SparseCounts` keeps a (classes, capacity) float64 table of those columns whose capacity
doubles when full (amortised O(1) per new id).

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

ID_DTYPE = np.uint32  # ids are 32-bit hashes; queries are cast to it (never the sorted array)
_MIN_CAPACITY = 64


class IdIndex:
    """Seen ids (sorted, unique) and the column of each; columns are dense, in first-seen order."""

    def __init__(self) -> None:
        self._ids = np.zeros(0, ID_DTYPE)
        self._cols = np.zeros(0, np.int64)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> np.ndarray:
        """The seen ids in ascending order (read-only view)."""
        return self._ids

    @property
    def columns(self) -> np.ndarray:
        """The column of each id of :attr:`ids` (read-only view)."""
        return self._cols

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Column of each id (int64), -1 for ids never added."""
        q = np.asarray(ids).astype(ID_DTYPE, copy=False)
        n = len(self._ids)
        if not n or not len(q):
            return np.full(len(q), -1, np.int64)
        at = np.searchsorted(self._ids, q)
        np.minimum(at, n - 1, out=at)
        return np.where(self._ids[at] == q, self._cols[at], -1)

    def add(self, ids: np.ndarray) -> np.ndarray:
        """Column of each id, giving the unseen ones new columns (ascending id among them)."""
        q = np.asarray(ids).astype(ID_DTYPE, copy=False)
        cols = self.lookup(q)
        miss = cols < 0
        if miss.any():
            fresh = np.unique(q[miss])
            n = len(self._ids)
            at = np.searchsorted(self._ids, fresh)
            self._ids = np.insert(self._ids, at, fresh)
            self._cols = np.insert(self._cols, at, np.arange(n, n + len(fresh)))
            cols[miss] = n + np.searchsorted(fresh, q[miss])
        return cols

    @classmethod
    def from_sorted(cls, ids: np.ndarray) -> IdIndex:
        """An index of ascending unique ``ids`` whose columns are 0, 1, 2, … in that order."""
        ix = cls()
        ix._ids = np.asarray(ids).astype(ID_DTYPE)
        if np.any(np.diff(ix._ids.astype(np.int64)) <= 0):
            raise ValueError("ids must be ascending and unique")
        ix._cols = np.arange(len(ix._ids), dtype=np.int64)
        return ix

    @property
    def nbytes(self) -> int:
        return self._ids.nbytes + self._cols.nbytes


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

    def columns(self, ids: np.ndarray) -> np.ndarray:
        """Columns of ``ids``, adding unseen ones (and room for them)."""
        cols = self.index.add(ids)
        need = len(self.index)
        cap = self._table.shape[1]
        if need > cap:
            new_cap = max(need, 2 * cap, _MIN_CAPACITY)
            table = np.zeros((self.n_classes, new_cap))
            table[:, :cap] = self._table
            self._table = table
        return cols

    def add(self, rows: np.ndarray, ids: np.ndarray, vals: np.ndarray) -> None:
        """Add ``vals`` at (row, id) in the given order (ids become seen)."""
        cols = self.columns(ids)
        np.add.at(self._table.reshape(-1), rows * self._table.shape[1] + cols, vals)

    def add_row(self, row: int, ids: np.ndarray, weight: float) -> None:
        """Add ``weight`` once per occurrence of each id to class ``row``."""
        cols = self.columns(ids)
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
