"""Class × value × value co-occurrence counts: the sufficient statistics of the
one-dependence family (SPODE, AODE, TAN, kDB with k = 1), stored only where they occur.

Every (attribute, value) pair has a *global code* ``g``; the count of ``(c, g, h)`` is the
weighted number of events of class ``c`` in which both coded values occur (``(c, g, g)`` is
``|D_c,x_i|``). The single counts are a dense classes × codes array (the size of a naive Bayes
table); the pairs of two different codes are sparse: one :class:`KeyedCounts` entry (16 bytes)
per (class, lower code, higher code) that occurred. Two codes of one attribute never co-occur,
so memory follows the data, not classes × codes². Missing values add nothing.
:meth:`view` gives the dense (classes, codes, codes) table, for small tables.

>>> t = PairCounts()
>>> t.grow(n_classes=2, n_codes=3)
>>> t.add(np.array([0, 1]), np.array([[0, 2], [1, -1]]), np.ones(2))
>>> t.view()[0].tolist()
[[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 1.0]]
>>> t.lookup(np.array([0, 2, 1]), np.array([2, 0, 1]))[:, :].tolist()
[[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
"""

from __future__ import annotations

import itertools

import numpy as np

from streambayes.stats.keyed import ENTRY_BYTES, KeyedCounts, pack, unpack

BITS = 20  # bits per code in a key: up to 2^20 codes, 2^23 classes
_CHUNK = 2**20  # keys built per step


def _combos(d: int, r: int) -> np.ndarray:
    """(combinations, r) positions ``i < j (< l)`` of ``d`` columns."""
    if r == 2:
        return np.stack(np.triu_indices(d, 1), axis=1)
    return np.array(list(itertools.combinations(range(d), r)), np.int64).reshape(-1, r)


def event_tuples(rows: np.ndarray, codes: np.ndarray, w: np.ndarray, r: int, chunk: int = _CHUNK):
    """Yield (classes, sorted codes (m, r), weights) of every ``r`` present codes of each event,
    in event order, in chunks of about ``chunk`` tuples."""
    n, d = codes.shape
    pos = _combos(d, r)
    if not len(pos) or not n:
        return
    step = max(1, chunk // len(pos))
    for lo in range(0, n, step):
        block = codes[lo:lo + step]
        cols = [block[:, pos[:, t]] for t in range(r)]  # each (events, combos)
        ok = cols[0] >= 0
        for col in cols[1:]:
            ok &= col >= 0
        cols = _ascending(cols)
        if ok.all():
            ev = np.repeat(np.arange(len(block)), len(pos))
            g = np.stack([col.ravel() for col in cols], axis=1)
        else:
            ev = np.nonzero(ok)[0]
            g = np.stack([col[ok] for col in cols], axis=1)
        yield rows[lo:lo + step][ev], g, w[lo:lo + step][ev]


def _ascending(cols: list[np.ndarray]) -> list[np.ndarray]:
    """The columns sorted element-wise (min … max)."""
    if len(cols) == 2:
        return [np.minimum(*cols), np.maximum(*cols)]
    if len(cols) == 3:
        a, b, c = cols
        low, high = np.minimum(np.minimum(a, b), c), np.maximum(np.maximum(a, b), c)
        return [low, a + b + c - low - high, high]
    return list(np.moveaxis(np.sort(np.stack(cols, axis=-1), axis=-1), -1, 0))


class PairCounts:
    """Dense single counts (classes, codes) and sparse pair counts (class, g < h)."""

    def __init__(self, max_bytes: int = 512 * 2**20) -> None:
        self.max_bytes = max_bytes
        self.n_classes = 0
        self.n_codes = 0
        self._single = np.zeros((0, 0))
        self.pairs = KeyedCounts()

    def singles(self) -> np.ndarray:
        """The live (classes, codes) single counts (a view: do not write)."""
        return self._single[: self.n_classes, : self.n_codes]

    def view(self) -> np.ndarray:
        """The dense (classes, codes, codes) counts (a new array: for small tables)."""
        k, g = self.n_classes, self.n_codes
        t = np.zeros((k, g, g))
        t[:, np.arange(g), np.arange(g)] = self.singles()
        c, lo, hi = unpack(self.pairs.keys, 3, BITS)
        t[c, lo, hi] = self.pairs.counts
        t[c, hi, lo] = self.pairs.counts
        return t

    def grow(self, n_classes: int, n_codes: int) -> None:
        k, g = self._single.shape
        if n_classes > k or n_codes > g:
            new_g = g if n_codes <= g else max(n_codes, 2 * g, 8)
            table = np.zeros((max(n_classes, k), new_g))
            table[:k, :g] = self._single
            self._single = table
        self.n_classes = max(self.n_classes, n_classes)
        self.n_codes = max(self.n_codes, n_codes)

    def add(self, rows: np.ndarray, codes: np.ndarray, weights: np.ndarray) -> None:
        """Add every pair of present codes of each event (``codes`` (n, d), -1 = missing)."""
        ev, col = np.nonzero(codes >= 0)
        np.add.at(self._single, (rows[ev], codes[ev, col]), weights[ev])
        g = self.n_codes
        size = self.n_classes * g * g
        m = codes.shape[1] * (codes.shape[1] - 1) // 2
        if size > max(2**16, 4 * m * len(rows)):
            for c, pair, w in event_tuples(rows, codes, weights, 2):
                self.pairs.add(pack([c, pair[:, 0], pair[:, 1]], BITS), w)
            return
        # small classes × codes²: one dense tally of the batch (missing pairs to a spare slot)
        i, j = np.triu_indices(codes.shape[1], 1)
        a, b = codes[:, i], codes[:, j]
        flat = (rows[:, None] * g + np.minimum(a, b)) * g + np.maximum(a, b)
        flat = np.where((a >= 0) & (b >= 0), flat, size).ravel()
        w = np.repeat(weights, len(i))
        seen = np.flatnonzero(np.bincount(flat, minlength=size + 1)[:size])
        sums = np.bincount(flat, w, minlength=size + 1)[seen]
        self.pairs.add_unique(pack([seen // (g * g), seen // g % g, seen % g], BITS), sums)

    def add_pairs(self, events: list[tuple[int, int, np.ndarray, float]]) -> None:
        """For each ``(c, code, others, weight)``: add ``(code, code)`` and ``(code, o)`` for each
        other code ``o`` of class ``c`` (repeats summed in order, as :meth:`add` does)."""
        cs, codes, others, weights = zip(*events, strict=True)
        c, code, w = np.array(cs, np.int64), np.array(codes, np.int64), np.array(weights, np.float64)
        np.add.at(self._single, (c, code), w)
        sizes = [len(o) for o in others]
        o = np.concatenate([np.asarray(x, np.int64) for x in others])
        code = np.repeat(code, sizes)
        self.pairs.add(pack([np.repeat(c, sizes), np.minimum(o, code), np.maximum(o, code)], BITS),
                       np.repeat(w, sizes))

    def merge(self, other: PairCounts, class_map: np.ndarray, code_map: np.ndarray,
              factor: float = 1.0) -> None:
        """Add ``other``'s counts; its class ``i`` is our ``class_map[i]`` and its code ``g``
        ours ``code_map[g]`` (-1: dropped; both maps one-to-one)."""
        self.grow(int(class_map.max(initial=-1)) + 1, int(code_map.max(initial=-1)) + 1)
        keep = np.flatnonzero(code_map >= 0)
        self._single[np.ix_(class_map, code_map[keep])] += other.singles()[:, keep] * factor
        c, lo, hi = unpack(other.pairs.keys, 3, BITS)
        a, b = code_map[lo], code_map[hi]
        ok = (a >= 0) & (b >= 0)
        keys = pack([class_map[c[ok]], np.minimum(a, b)[ok], np.maximum(a, b)[ok]], BITS)
        self.pairs.add(keys, other.pairs.counts[ok] * factor)

    def scale(self, factor: float) -> None:
        self._single *= factor
        self.pairs.scale(factor)

    # -- lookups (sparse prediction) -----------------------------------------------------------
    def lookup(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Counts of ``(c, a, b)`` for every class, shape (classes, *broadcast shape)."""
        a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        u, inv = np.unique((lo * max(self.n_codes, 1) + hi).ravel(), return_inverse=True)  # each pair once
        ul, uh = np.divmod(u, max(self.n_codes, 1))
        cs = np.arange(self.n_classes)[:, None]
        found = self.pairs.get(pack([np.broadcast_to(cs, (len(cs), len(u))), ul[None], uh[None]], BITS))
        out = found[:, inv.ravel()].reshape(len(cs), *a.shape)
        same = a == b
        if same.any():
            out[:, same] = self.singles()[:, a[same]]
        return out

    def known(self, attr_of: np.ndarray) -> KeyedCounts:
        """Sparse |D_c,g,j| (j another attribute than g's): keys (c, g, j), from the pairs."""
        c, lo, hi = unpack(self.pairs.keys, 3, BITS)
        keys = np.concatenate([pack([c, lo, attr_of[hi]], BITS), pack([c, hi, attr_of[lo]], BITS)])
        return KeyedCounts.from_items(keys, np.tile(self.pairs.counts, 2))

    # -- state ------------------------------------------------------------------------------------
    def to_arrays(self, order: np.ndarray) -> dict:
        """Singles and pairs with codes renumbered (new code ``i`` is old code ``order[i]``),
        pairs as (class, lower code, higher code) rows in key order."""
        inv = np.empty(len(order), np.int64)
        inv[order] = np.arange(len(order))
        c, lo, hi = unpack(self.pairs.keys, 3, BITS)
        a, b = inv[lo], inv[hi]
        keys = pack([c, np.minimum(a, b), np.maximum(a, b)], BITS)
        at = np.argsort(keys, kind="stable")
        rows = np.stack(unpack(keys[at], 3, BITS), axis=1) if len(keys) else np.zeros((0, 3), np.int64)
        return {"singles": self.singles()[:, order].copy(), "pair_codes": rows,
                "pair_counts": self.pairs.counts[at].copy()}

    @classmethod
    def from_arrays(cls, singles: np.ndarray, rows: np.ndarray, counts: np.ndarray,
                    max_bytes: int = 512 * 2**20) -> PairCounts:
        t = cls(max_bytes)
        t.grow(singles.shape[0], singles.shape[1])
        t._single[: singles.shape[0], : singles.shape[1]] = singles
        rows = np.asarray(rows, np.int64).reshape(-1, 3)
        t.pairs = KeyedCounts.from_items(pack([rows[:, 0], rows[:, 1], rows[:, 2]], BITS), counts)
        return t

    @classmethod
    def from_array(cls, table: np.ndarray, max_bytes: int = 512 * 2**20) -> PairCounts:
        """From a dense (classes, codes, codes) table (the snapshots before the sparse store)."""
        c, lo, hi = np.nonzero(np.triu(table, 1))
        singles = np.diagonal(table, axis1=1, axis2=2)
        return cls.from_arrays(singles, np.stack([c, lo, hi], axis=1), table[c, lo, hi], max_bytes)

    @staticmethod
    def entries_per_event(d: int) -> int:
        return d * (d - 1) // 2

    def memory_bytes(self) -> int:
        return self._single.nbytes + self.pairs.nbytes

    def bytes_after(self, n_classes: int, n_codes: int, new_entries: int) -> int:
        """Bytes once classes, codes and ``new_entries`` pairs are added (at most)."""
        k, g = max(n_classes, self._single.shape[0]), self._single.shape[1]
        g = g if n_codes <= g else max(n_codes, 2 * g, 8)  # as grow() would
        return k * g * 8 + (len(self.pairs) + new_entries) * ENTRY_BYTES
