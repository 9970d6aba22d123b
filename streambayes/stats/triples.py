"""Class × value × value × value co-occurrence counts: the sufficient statistics of kDB with
k = 2 (Sahami 1996), P(x_i | c, x_p1, x_p2), stored only where they occur.

As in :class:`~streambayes.stats.PairCounts`, every (attribute, value) pair has a global code.
Only triples of three different codes are kept (a triple with a repeated code is a pair or a
single count, which :class:`PairCounts` holds): one :class:`KeyedCounts` entry (16 bytes) per
(class, g < h < l) that occurred. Memory follows the data, not classes × codes³.
:meth:`view` gives the dense table of those triples (every order), for small tables.

>>> t = TripleCounts()
>>> t.grow(n_classes=1, n_codes=4)
>>> t.add(np.array([0]), np.array([[0, 2, 3, -1]]), np.ones(1))
>>> float(t.view()[0, 3, 0, 2]), len(t.triples)
(1.0, 1)
>>> t.lookup(np.array([2]), np.array([0]), np.array([3])).tolist()
[[1.0]]
"""

from __future__ import annotations

import itertools

import numpy as np

from streambayes.stats.keyed import ENTRY_BYTES, KeyedCounts, pack, unpack
from streambayes.stats.pairs import event_tuples

BITS = 16  # bits per code in a key: up to 2^16 codes, 2^15 classes


class TripleCounts:
    """Sparse counts of (class, g < h < l) over three different codes."""

    def __init__(self, max_bytes: int = 512 * 2**20) -> None:
        self.max_bytes = max_bytes
        self.n_classes = 0
        self.n_codes = 0
        self.triples = KeyedCounts()

    def grow(self, n_classes: int, n_codes: int) -> None:
        self.n_classes = max(self.n_classes, n_classes)
        self.n_codes = max(self.n_codes, n_codes)

    def view(self) -> np.ndarray:
        """Dense (classes, codes, codes, codes) counts of the triples of three different codes
        (0 where a code repeats; a new array: for small tables)."""
        g = self.n_codes
        t = np.zeros((self.n_classes, g, g, g))
        c, *abc = unpack(self.triples.keys, 4, BITS)
        for p in itertools.permutations(range(3)):
            t[c, abc[p[0]], abc[p[1]], abc[p[2]]] = self.triples.counts
        return t

    def add(self, rows: np.ndarray, codes: np.ndarray, weights: np.ndarray) -> None:
        """Add every triple of present codes of each event (``codes`` (n, d), -1 = missing)."""
        for c, g, w in event_tuples(rows, codes, weights, 3):
            self.triples.add(pack([c, g[:, 0], g[:, 1], g[:, 2]], BITS), w)

    def add_with(self, c: int, code: int, others: np.ndarray, weight: float) -> None:
        """Add the triples of ``code`` with two of ``others`` (a replayed event whose value
        ``code`` just got its code; the triples among ``others`` are counted already)."""
        others = np.asarray(others, np.int64)
        i, j = np.triu_indices(len(others), 1)
        g = np.sort(np.stack([np.full(len(i), code), others[i], others[j]], axis=1), axis=1)
        self.triples.add(pack([np.full(len(i), c), g[:, 0], g[:, 1], g[:, 2]], BITS),
                         np.full(len(i), float(weight)))

    def merge(self, other: TripleCounts, class_map: np.ndarray, code_map: np.ndarray,
              factor: float = 1.0) -> None:
        """Add ``other``'s counts; its class ``i`` is our ``class_map[i]`` and its code ``g``
        ours ``code_map[g]`` (-1: dropped; both maps one-to-one)."""
        self.grow(int(class_map.max(initial=-1)) + 1, int(code_map.max(initial=-1)) + 1)
        c, *abc = unpack(other.triples.keys, 4, BITS)
        g = np.stack([code_map[x] for x in abc], axis=1)
        ok = (g >= 0).all(axis=1)
        g = np.sort(g[ok], axis=1)
        self.triples.add(pack([class_map[c[ok]], g[:, 0], g[:, 1], g[:, 2]], BITS),
                         other.triples.counts[ok] * factor)

    def scale(self, factor: float) -> None:
        self.triples.scale(factor)

    # -- lookups (sparse prediction) -----------------------------------------------------------
    def lookup(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Counts of ``(class, a, b, c)`` (three different codes) for every class:
        (classes, *broadcast shape)."""
        g = np.sort(np.stack(np.broadcast_arrays(a, b, c), axis=-1).astype(np.int64), axis=-1)
        cs = np.arange(self.n_classes).reshape((-1,) + (1,) * (g.ndim - 1))
        shape = (self.n_classes, *g.shape[:-1])
        return self.triples.get(pack([np.broadcast_to(cs, shape), g[..., 0], g[..., 1], g[..., 2]], BITS))

    def known(self, attr_of: np.ndarray) -> KeyedCounts:
        """Sparse |D_c,g,h,j| (events of class c with g, h and attribute j known; j another
        attribute than g's and h's): keys (c, g < h, j)."""
        c, a, b, l3 = unpack(self.triples.keys, 4, BITS)
        keys = np.concatenate([pack([c, a, b, attr_of[l3]], BITS), pack([c, a, l3, attr_of[b]], BITS),
                               pack([c, b, l3, attr_of[a]], BITS)])
        return KeyedCounts.from_items(keys, np.tile(self.triples.counts, 3))

    # -- state ------------------------------------------------------------------------------------
    def to_arrays(self, order: np.ndarray) -> dict:
        """The triples with codes renumbered (new code ``i`` is old code ``order[i]``), as
        (class, g, h, l) rows with g < h < l, in key order."""
        inv = np.empty(len(order), np.int64)
        inv[order] = np.arange(len(order))
        c, *abc = unpack(self.triples.keys, 4, BITS)
        g = np.sort(np.stack([inv[x] for x in abc], axis=1), axis=1)
        keys = pack([c, g[:, 0], g[:, 1], g[:, 2]], BITS)
        at = np.argsort(keys, kind="stable")
        rows = np.stack(unpack(keys[at], 4, BITS), axis=1) if len(keys) else np.zeros((0, 4), np.int64)
        return {"triple_codes": rows, "triple_counts": self.triples.counts[at].copy()}

    @classmethod
    def from_arrays(cls, n_classes: int, n_codes: int, rows: np.ndarray, counts: np.ndarray,
                    max_bytes: int = 512 * 2**20) -> TripleCounts:
        t = cls(max_bytes)
        t.grow(n_classes, n_codes)
        r = np.asarray(rows, np.int64).reshape(-1, 4)
        t.triples = KeyedCounts.from_items(pack([r[:, 0], r[:, 1], r[:, 2], r[:, 3]], BITS), counts)
        return t

    @classmethod
    def from_array(cls, table: np.ndarray, max_bytes: int = 512 * 2**20) -> TripleCounts:
        """From a dense (classes, codes, codes, codes) table (snapshots before the sparse store)."""
        c, a, b, l3 = np.nonzero(table)
        keep = (a < b) & (b < l3)
        rows = np.stack([c[keep], a[keep], b[keep], l3[keep]], axis=1)
        return cls.from_arrays(table.shape[0], table.shape[1], rows, table[c, a, b, l3][keep], max_bytes)

    @staticmethod
    def entries_per_event(d: int) -> int:
        return d * (d - 1) * (d - 2) // 6

    def memory_bytes(self) -> int:
        return self.triples.nbytes

    def bytes_after(self, new_entries: int) -> int:
        return (len(self.triples) + new_entries) * ENTRY_BYTES
