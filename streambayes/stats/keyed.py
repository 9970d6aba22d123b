"""Weighted counts keyed by packed tuples of small codes, stored only for the keys that occur.

A key packs (class, code, code[, code]) into one int64: ``((c << b) | g) << b | h …`` with ``b``
bits per code. :class:`KeyedCounts` keeps the keys that occurred, sorted and unique, with the
weighted count of each (two arrays, 16 bytes a key): a batch is added with one ``np.unique``,
one ``searchsorted`` and one ``np.insert`` of its new keys; a lookup is one ``searchsorted``.
So memory follows the value combinations the data holds, not the product of the domains.

>>> t = KeyedCounts()
>>> t.add(pack([np.array([0, 1, 0]), np.array([3, 2, 3])], 4), np.array([1.0, 2.0, 0.5]))
>>> t.get(pack([np.array([0, 1, 1]), np.array([3, 2, 3])], 4)).tolist()
[1.5, 2.0, 0.0]
>>> [c.tolist() for c in unpack(t.keys, 2, 4)]
[[0, 1], [3, 2]]
"""

from __future__ import annotations

import numpy as np

ENTRY_BYTES = 16  # an int64 key and a float64 count


def pack(columns: list[np.ndarray], bits: int) -> np.ndarray:
    """One int64 key per row of the given columns (the first one the most significant)."""
    key = np.asarray(columns[0], np.int64).copy()
    for col in columns[1:]:
        key <<= bits
        key |= np.asarray(col, np.int64)
    return key


def unpack(keys: np.ndarray, n: int, bits: int) -> list[np.ndarray]:
    """The ``n`` columns packed in ``keys`` (inverse of :func:`pack`)."""
    mask = (1 << bits) - 1
    cols = [(keys >> (bits * (n - 1 - i))) & mask for i in range(1, n)]
    return [keys >> (bits * (n - 1))] + cols


class KeyedCounts:
    """Sorted unique int64 keys and their float64 counts."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, np.int64)
        self.counts = np.zeros(0)

    def __len__(self) -> int:
        return len(self.keys)

    def find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(where each key sits in :attr:`keys`, whether it is there)."""
        at = np.searchsorted(self.keys, keys)
        if not len(self.keys):
            return at, np.zeros(len(at), bool)
        hit = self.keys[np.minimum(at, len(self.keys) - 1)] == keys
        return at, hit

    def get(self, keys: np.ndarray) -> np.ndarray:
        """The count of each key (0 for keys never added); any shape."""
        flat = np.asarray(keys, np.int64).reshape(-1)
        at, hit = self.find(flat)
        out = np.zeros(len(flat))
        out[hit] = self.counts[at[hit]]
        return out.reshape(np.shape(keys))

    def n_new(self, keys: np.ndarray) -> int:
        """How many distinct keys among ``keys`` are not stored yet."""
        u = np.unique(keys)
        return int(len(u) - np.count_nonzero(self.find(u)[1]))

    def add(self, keys: np.ndarray, weights: np.ndarray) -> None:
        """Add ``weights`` at ``keys`` (repeats summed in order); new keys are inserted."""
        if not len(keys):
            return
        u, inv = np.unique(keys, return_inverse=True)
        self.add_unique(u, np.bincount(inv.reshape(-1), weights, minlength=len(u)))

    def add_unique(self, u: np.ndarray, sums: np.ndarray) -> None:
        """Add ``sums`` at ascending unique keys ``u``."""
        at, hit = self.find(u)
        self.counts[at[hit]] += sums[hit]
        if not hit.all():
            new = ~hit
            self.keys = np.insert(self.keys, at[new], u[new])
            self.counts = np.insert(self.counts, at[new], sums[new])

    def scale(self, factor: float) -> None:
        self.counts *= factor

    @classmethod
    def from_items(cls, keys: np.ndarray, counts: np.ndarray) -> KeyedCounts:
        """Counts of (possibly repeated, unsorted) keys; zero counts are not stored."""
        t = cls()
        keep = np.asarray(counts) != 0
        t.keys, inv = np.unique(np.asarray(keys, np.int64)[keep], return_inverse=True)
        sums = np.bincount(inv.reshape(-1), np.asarray(counts, np.float64)[keep], minlength=len(t.keys))
        t.counts = sums.astype(np.float64)  # bincount of nothing is int64
        return t

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.counts.nbytes
