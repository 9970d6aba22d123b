"""Class × value × value × value co-occurrence counts: the sufficient statistics of kDB with
k = 2 (Sahami 1996), P(x_i | c, x_p1, x_p2).

As in :class:`~streambayes.stats.PairCounts`, every (attribute, value) pair has a global code;
``table[c, g, h, l]`` is the weighted number of events of class ``c`` in which all three coded
values occur (repeats included: ``table[c, g, g, h]`` is the pair count). The table is dense and
symmetric, grows by doubling capacity, and refuses to grow past ``max_bytes``
(:class:`ModelError`): it holds classes × codes³ floats.

>>> t = TripleCounts()
>>> t.grow(n_classes=1, n_codes=3)
>>> t.add(np.array([0]), np.array([[0, 2, -1]]), np.ones(1))
>>> t.view()[0, 0].tolist()
[[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 1.0]]
"""

from __future__ import annotations

import numpy as np

from streambayes.errors import ModelError

_FLOAT = np.dtype(np.float64).itemsize
_CHUNK = 2**20  # index entries per np.add.at call


class TripleCounts:
    """A growable dense (classes, codes, codes, codes) table of weighted co-occurrence counts."""

    def __init__(self, max_bytes: int = 512 * 2**20) -> None:
        self.max_bytes = max_bytes
        self.n_classes = 0
        self.n_codes = 0
        self._table = np.zeros((0, 0, 0, 0))

    def view(self) -> np.ndarray:
        """The live (classes, codes, codes, codes) counts (a view: do not write)."""
        g = self.n_codes
        return self._table[: self.n_classes, :g, :g, :g]

    def check(self, n_classes: int, n_codes: int) -> None:
        """Raise :class:`ModelError` if ``n_classes`` × ``n_codes``³ counts exceed ``max_bytes``."""
        need = max(n_classes, self.n_classes) * max(n_codes, self.n_codes) ** 3 * _FLOAT
        if need > self.max_bytes:
            raise ModelError(f"the class × value × value × value table would need {need:,} bytes "
                             f"({n_classes} classes, {n_codes} attribute values), over max_bytes="
                             f"{self.max_bytes:,}; lower max_values or bins, or use k=1")

    def grow(self, n_classes: int, n_codes: int) -> None:
        """Room for ``n_classes`` and ``n_codes``: capacity doubles, as far as ``max_bytes`` allows."""
        self.check(n_classes, n_codes)
        k, g = self._table.shape[0], self._table.shape[1]
        need = max(n_codes, self.n_codes)
        new_k = max(n_classes, k)
        fits = int((self.max_bytes / (max(new_k, 1) * _FLOAT)) ** (1 / 3))
        new_g = max(need, min(g if need <= g else max(2 * g, 8), fits))
        if new_k > k or new_g != g:
            table = np.zeros((new_k, new_g, new_g, new_g))
            old = min(g, new_g)
            table[:k, :old, :old, :old] = self._table[:, :old, :old, :old]
            self._table = table
        self.n_classes = max(self.n_classes, n_classes)
        self.n_codes = need

    def add(self, rows: np.ndarray, codes: np.ndarray, weights: np.ndarray) -> None:
        """Add every triple of present codes of each event (``codes`` (n, d), -1 = missing)."""
        d = codes.shape[1]
        cap = self._table.shape[1]
        kind = np.int32 if self._table.size < 2**31 else np.int64
        step = max(1, _CHUNK // max(d**3, 1))
        for lo in range(0, len(rows), step):  # in chunks: (events, d, d, d) index arrays
            c, g, w = rows[lo:lo + step].astype(kind), codes[lo:lo + step], weights[lo:lo + step]
            present = g >= 0
            g = np.where(present, g, 0).astype(kind)  # a missing value's triples add weight 0
            pair = (c[:, None, None] * cap + g[:, :, None]) * cap + g[:, None, :]
            flat = (pair[:, :, :, None] * cap + g[:, None, None, :]).ravel()
            if present.all():
                self._add_flat(flat, np.repeat(w, d**3))
            else:
                p = present.astype(np.float64)
                w = w[:, None, None, None] * p[:, :, None, None] * p[:, None, :, None] * p[:, None, None, :]
                self._add_flat(flat, w.ravel())

    def _add_flat(self, flat: np.ndarray, w: np.ndarray) -> None:
        table = self._table.reshape(-1)
        if table.size <= 4 * len(flat):  # small table: one dense tally, then one addition
            table += np.bincount(flat, w, minlength=table.size)
        else:
            np.add.at(table, flat, w)

    def add_with(self, c: int, code: int, others: np.ndarray, weight: float) -> None:
        """Add the triples of ``others`` ∪ {``code``} that contain ``code`` (a replayed event whose
        value ``code`` just got its code; the triples among ``others`` are counted already)."""
        s = np.append(others, code)
        ix = np.ix_(s, s, s)
        block = np.ones((len(s),) * 3)
        block[:-1, :-1, :-1] = 0.0
        np.add.at(self._table[c], ix, block * weight)

    def merge(self, counts: np.ndarray, class_map: np.ndarray, code_map: np.ndarray,
              factor: float = 1.0) -> None:
        """Add another table's ``counts``; its class ``i`` is our ``class_map[i]`` and its code
        ``g`` ours ``code_map[g]`` (both maps one-to-one)."""
        self.grow(int(class_map.max(initial=-1)) + 1, int(code_map.max(initial=-1)) + 1)
        self._table[np.ix_(class_map, code_map, code_map, code_map)] += counts * factor

    def scale(self, factor: float) -> None:
        self._table *= factor

    def permuted(self, order: np.ndarray) -> np.ndarray:
        """A copy of the counts with codes renumbered: new code ``i`` is old code ``order[i]``."""
        return self.view()[np.ix_(np.arange(self.n_classes), order, order, order)]

    @classmethod
    def from_array(cls, table: np.ndarray, max_bytes: int = 512 * 2**20) -> TripleCounts:
        t = cls(max_bytes)
        t.grow(table.shape[0], table.shape[1])
        g = table.shape[1]
        t._table[: table.shape[0], :g, :g, :g] = table
        return t

    def memory_bytes(self) -> int:
        return self._table.nbytes
