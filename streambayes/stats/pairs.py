"""Class × value × value co-occurrence counts: the sufficient statistics of the
one-dependence family (SPODE, AODE, TAN, kDB with k = 1).

Every (attribute, value) pair has a *global code* ``g``; ``table[c, g, h]`` is the weighted
number of events of class ``c`` in which both coded values occur (so ``table[c, g, g]`` is
``|D_c,x_i|``). The table is dense, symmetric, and grows (by doubling capacity) when a value
appears mid-stream; missing values simply add nothing.

>>> t = PairCounts()
>>> t.grow(n_classes=2, n_codes=3)
>>> t.add(np.array([0, 1]), np.array([[0, 2], [1, -1]]), np.ones(2))
>>> t.view()[0].tolist()
[[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 1.0]]
"""

from __future__ import annotations

import numpy as np


class PairCounts:
    """A growable dense (classes, codes, codes) table of weighted co-occurrence counts."""

    def __init__(self, max_bytes: int = 512 * 2**20) -> None:
        self.max_bytes = max_bytes
        self.n_classes = 0
        self.n_codes = 0
        self._table = np.zeros((0, 0, 0))

    def view(self) -> np.ndarray:
        """The live (classes, codes, codes) counts (a view: do not write)."""
        return self._table[: self.n_classes, : self.n_codes, : self.n_codes]

    def grow(self, n_classes: int, n_codes: int) -> None:
        k, g = self._table.shape[0], self._table.shape[1]
        if n_classes > k or n_codes > g:
            new_k = max(n_classes, k)
            fits = int((self.max_bytes / (max(new_k, 1) * 8)) ** 0.5)  # doubling stops at max_bytes
            new_g = g if n_codes <= g else max(n_codes, min(max(2 * g, 8), fits))
            table = np.zeros((new_k, new_g, new_g))
            table[:k, :g, :g] = self._table
            self._table = table
        self.n_classes = max(self.n_classes, n_classes)
        self.n_codes = max(self.n_codes, n_codes)

    def add(self, rows: np.ndarray, codes: np.ndarray, weights: np.ndarray) -> None:
        """Add every pair of present codes of each event (``codes`` (n, d), -1 = missing), the
        diagonal included, event by event in stream order."""
        present = codes >= 0
        pair = present[:, :, None] & present[:, None, :]
        cap = self._table.shape[1]
        flat = (rows[:, None, None] * cap + codes[:, :, None]) * cap + codes[:, None, :]
        w = np.broadcast_to(weights[:, None, None], pair.shape)
        np.add.at(self._table.reshape(-1), flat[pair], w[pair])

    def add_pairs(self, c: int, code: int, others: np.ndarray, weight: float) -> None:
        """Add ``(code, code)`` and both ``(code, o)``, ``(o, code)`` for each other code ``o``."""
        t = self._table
        t[c, code, code] += weight
        np.add.at(t[c, code], others, weight)
        np.add.at(t[c, :, code], others, weight)

    def merge(self, counts: np.ndarray, class_map: np.ndarray, code_map: np.ndarray,
              factor: float = 1.0) -> None:
        """Add another table's ``counts`` (classes, codes, codes); its class ``i`` is our
        ``class_map[i]`` and its code ``g`` ours ``code_map[g]`` (both maps one-to-one)."""
        self.grow(int(class_map.max(initial=-1)) + 1, int(code_map.max(initial=-1)) + 1)
        self._table[np.ix_(class_map, code_map, code_map)] += counts * factor

    def scale(self, factor: float) -> None:
        self._table *= factor

    def permuted(self, order: np.ndarray) -> np.ndarray:
        """A copy of the counts with codes renumbered: new code ``i`` is old code ``order[i]``."""
        return self.view()[:, order][:, :, order].copy()

    @staticmethod
    def bytes_needed(n_classes: int, n_codes: int) -> int:
        return n_classes * n_codes**2 * 8

    @classmethod
    def from_array(cls, table: np.ndarray, max_bytes: int = 512 * 2**20) -> PairCounts:
        t = cls(max_bytes)
        t.grow(table.shape[0], table.shape[1])
        t._table[: table.shape[0], : table.shape[1], : table.shape[1]] = table
        return t

    def memory_bytes(self) -> int:
        return self._table.nbytes
