"""Class × value^r co-occurrence counts for r = 3, 4, …: the sufficient statistics of kDB with
k = r - 1 parents besides the class (Sahami 1996), P(x_i | c, x_p1, …, x_pk), stored only where
they occur.

As in :class:`~streambayes.stats.PairCounts`, every (attribute, value) pair has a global code.
Only tuples of ``r`` different codes are kept (a tuple with a repeated code is a shorter one,
which the pair table or a lower-order table holds): one :class:`KeyedCounts` entry (16 bytes)
per (class, g1 < g2 < … < gr) that occurred. Memory follows the data, not classes × codes^r.
A key packs the class and ``r`` codes in 63 bits: 16 bits a code for r = 3 (65,536 codes,
32,768 classes), fewer for higher orders (:func:`key_bits`).
:meth:`view` gives the dense table of those tuples (every order of the codes), for small tables.

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


def key_bits(order: int) -> tuple[int, int]:
    """(bits per code, bits for the class) of a key of ``order`` codes."""
    code = min(16, (63 - 8) // order)
    return code, 63 - order * code


BITS = key_bits(3)[0]


class TupleCounts:
    """Sparse counts of (class, g1 < … < g_order) over ``order`` different codes."""

    def __init__(self, max_bytes: int = 512 * 2**20, order: int = 3) -> None:
        if order < 3:
            raise ValueError(f"order must be >= 3 (pairs are PairCounts), got {order}")
        self.max_bytes, self.order = max_bytes, order
        self.bits, self.class_bits = key_bits(order)
        self.n_classes = 0
        self.n_codes = 0
        self.triples = KeyedCounts()  # the tuples (named for order 3, the common case)

    def grow(self, n_classes: int, n_codes: int) -> None:
        self.n_classes = max(self.n_classes, n_classes)
        self.n_codes = max(self.n_codes, n_codes)

    def _columns(self) -> list[np.ndarray]:
        return unpack(self.triples.keys, self.order + 1, self.bits)

    def view(self) -> np.ndarray:
        """Dense (classes, codes, …) counts of the tuples of different codes (0 where a code
        repeats; a new array: for small tables)."""
        t = np.zeros((self.n_classes,) + (self.n_codes,) * self.order)
        c, *g = self._columns()
        for p in itertools.permutations(range(self.order)):
            t[(c, *(g[i] for i in p))] = self.triples.counts
        return t

    def _key(self, c: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Keys of classes ``c`` and ascending codes ``g`` (…, order)."""
        return pack([c, *(g[..., i] for i in range(g.shape[-1]))], self.bits)

    def add(self, rows: np.ndarray, codes: np.ndarray, weights: np.ndarray) -> None:
        """Add every tuple of present codes of each event (``codes`` (n, d), -1 = missing)."""
        for c, g, w in event_tuples(rows, codes, weights, self.order):
            self._add(c, g, w)

    def _add(self, c: np.ndarray, g: np.ndarray, w: np.ndarray) -> None:
        """Add weights at classes ``c`` and ascending codes ``g`` (m, order): tallied densely when
        classes × codes^order is small next to the batch."""
        n = self.n_codes
        size = self.n_classes * n**self.order
        if size > max(2**16, 4 * len(c)):
            self.triples.add(self._key(c, g), w)
            return
        flat = c.astype(np.int64)
        for i in range(self.order):
            flat = flat * n + g[:, i]
        seen = np.flatnonzero(np.bincount(flat, minlength=size))
        sums = np.bincount(flat, w, minlength=size)[seen]
        cols, rest = [], seen
        for _ in range(self.order):
            rest, col = np.divmod(rest, n)
            cols.append(col)
        self.triples.add_unique(self._key(rest, np.stack(cols[::-1], axis=1)), sums)

    def add_with(self, c: int, code: int, others: np.ndarray, weight: float) -> None:
        """Add the tuples of ``code`` with ``order - 1`` of ``others`` (a replayed event whose
        value ``code`` just got its code; the tuples among ``others`` are counted already)."""
        others = np.asarray(others, np.int64)
        combos = np.array(list(itertools.combinations(range(len(others)), self.order - 1)), np.int64)
        if not len(combos):
            return
        g = np.sort(np.concatenate([np.full((len(combos), 1), code), others[combos]], axis=1), axis=1)
        self.triples.add(self._key(np.full(len(g), c), g), np.full(len(g), float(weight)))

    def merge(self, other: TupleCounts, class_map: np.ndarray, code_map: np.ndarray,
              factor: float = 1.0) -> None:
        """Add ``other``'s counts; its class ``i`` is our ``class_map[i]`` and its code ``g``
        ours ``code_map[g]`` (-1: dropped; both maps one-to-one)."""
        self.grow(int(class_map.max(initial=-1)) + 1, int(code_map.max(initial=-1)) + 1)
        c, *cols = other._columns()
        g = np.stack([code_map[x] for x in cols], axis=1)
        ok = (g >= 0).all(axis=1)
        keys = self._key(class_map[c[ok]], np.sort(g[ok], axis=1))
        self.triples.add(keys, other.triples.counts[ok] * factor)

    def scale(self, factor: float) -> None:
        self.triples.scale(factor)

    # -- lookups (sparse prediction) -----------------------------------------------------------
    def lookup(self, *codes: np.ndarray) -> np.ndarray:
        """Counts of ``(class, codes…)`` (``order`` different codes, broadcast) for every class:
        (classes, *broadcast shape)."""
        g = np.sort(np.stack(np.broadcast_arrays(*codes), axis=-1).astype(np.int64), axis=-1)
        cs = np.arange(self.n_classes).reshape((-1,) + (1,) * (g.ndim - 1))
        return self.triples.get(self._key(np.broadcast_to(cs, (self.n_classes, *g.shape[:-1])), g))

    def known(self, attr_of: np.ndarray) -> KeyedCounts:
        """Sparse events of class c with the ``order - 1`` codes g… and attribute j known (j
        another attribute than theirs): keys (c, ascending g…, j)."""
        c, *g = self._columns()
        keys = [pack([c, *(g[i] for i in range(self.order) if i != drop), attr_of[g[drop]]], self.bits)
                for drop in range(self.order)]
        return KeyedCounts.from_items(np.concatenate(keys), np.tile(self.triples.counts, self.order))

    def known_key(self, cs: np.ndarray, g: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Keys of :meth:`known` for classes ``cs``, codes ``g`` (…, order - 1) and attributes ``j``."""
        g = np.sort(g, axis=-1)
        return pack([cs, *(g[..., i] for i in range(g.shape[-1])), j], self.bits)

    # -- state ------------------------------------------------------------------------------------
    @property
    def state_keys(self) -> tuple[str, str]:
        name = "triple" if self.order == 3 else f"tuple{self.order}"
        return f"{name}_codes", f"{name}_counts"

    def to_arrays(self, order: np.ndarray) -> dict:
        """The tuples with codes renumbered (new code ``i`` is old code ``order[i]``), as
        (class, g1, …) rows with ascending codes, in key order."""
        inv = np.empty(len(order), np.int64)
        inv[order] = np.arange(len(order))
        c, *cols = self._columns()
        g = np.sort(np.stack([inv[x] for x in cols], axis=-1), axis=-1).reshape(-1, self.order)
        keys = self._key(c, g)
        at = np.argsort(keys, kind="stable")
        rows = np.stack(unpack(keys[at], self.order + 1, self.bits), axis=1).reshape(-1, self.order + 1)
        names = self.state_keys
        return {names[0]: rows, names[1]: self.triples.counts[at].copy()}

    def load_arrays(self, n_classes: int, n_codes: int, rows: np.ndarray, counts: np.ndarray) -> None:
        self.grow(n_classes, n_codes)
        r = np.asarray(rows, np.int64).reshape(-1, self.order + 1)
        self.triples = KeyedCounts.from_items(self._key(r[:, 0], r[:, 1:]), counts)

    def entries_per_event(self, d: int) -> int:
        return int(np.prod([d - i for i in range(self.order)]) // np.prod(range(1, self.order + 1)))

    def memory_bytes(self) -> int:
        return self.triples.nbytes

    def bytes_after(self, new_entries: int) -> int:
        return (len(self.triples) + new_entries) * ENTRY_BYTES


class TripleCounts(TupleCounts):
    """Order 3: kDB with k = 2."""

    def __init__(self, max_bytes: int = 512 * 2**20) -> None:
        super().__init__(max_bytes, 3)

    @classmethod
    def from_arrays(cls, n_classes: int, n_codes: int, rows: np.ndarray, counts: np.ndarray,
                    max_bytes: int = 512 * 2**20) -> TripleCounts:
        t = cls(max_bytes)
        t.load_arrays(n_classes, n_codes, rows, counts)
        return t

    @classmethod
    def from_array(cls, table: np.ndarray, max_bytes: int = 512 * 2**20) -> TripleCounts:
        """From a dense (classes, codes, codes, codes) table (snapshots before the sparse store)."""
        c, a, b, l3 = np.nonzero(table)
        keep = (a < b) & (b < l3)
        rows = np.stack([c[keep], a[keep], b[keep], l3[keep]], axis=1)
        return cls.from_arrays(table.shape[0], table.shape[1], rows, table[c, a, b, l3][keep], max_bytes)
