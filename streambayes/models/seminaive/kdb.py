"""kDB, the k-dependence Bayesian classifier (Sahami 1996), with k = 1 … ``MAX_K``.

Attributes are taken in decreasing I(x_i; y); each gets as parents, besides the class, the (up
to) ``k`` attributes before it of largest I(x_i; x_j | y) (``structure.py``). k = 1 needs only
the pair table. k >= 2 estimates P̂(x_i | c, x_p1, …) from class × value^r counts for r = 3 …
k + 1 (``stats/triples.py``), counted like the pairs (``table.py``): the r-tuples of an event's
coded values when it is learned, and, when a numeric attribute's warm-up fixes its bins, the
tuples of each buffered event that contain the attribute's new code. So every tuple is counted
once, as soon as its values have codes, whatever the batch boundaries or merges. A missing
parent value is dropped from the condition: the estimate conditions on the known parents.

The counts are sparse (only the tuples that occur, 16 bytes each), so memory follows the data;
``max_bytes`` bounds what is stored: a mini-batch that could pass it (every tuple of the batch,
and of the warm-up events its new bins replay, counted as new) is refused before anything
changes (:class:`FeatureError`), as are codes or classes beyond the key layout. For prediction
the counts are derived into dense tables when those are small, else looked up for the codes a
batch holds.
"""

from __future__ import annotations

import numpy as np

from streambayes.errors import ModelError
from streambayes.models.seminaive.information import onehot
from streambayes.models.seminaive.ode import Derived
from streambayes.models.seminaive.structure import kdb_parents
from streambayes.models.seminaive.tan import DependenceTable
from streambayes.stats.triples import TripleCounts, TupleCounts, key_bits

MAX_K = 4


class KDBTable(DependenceTable):
    kind = "kdb"

    def __init__(self, alpha: float = 1.0, m: float | None = None, k: int = 1, refit_every: int = 1,
                 **table_args) -> None:
        if isinstance(k, bool) or int(k) != k or not 1 <= k <= MAX_K:
            raise ModelError(f"kDB supports k = 1 … {MAX_K}, got k={k!r}")
        super().__init__(alpha, m, refit_every, **table_args)
        self.k = int(k)
        self.tuples = {r: TripleCounts(self.max_bytes) if r == 3 else TupleCounts(self.max_bytes, r)
                       for r in range(3, self.k + 2)}
        if self.k >= 2:  # the key layout of the longest tuples (stats/triples.py)
            self.code_bits, self.class_bits = key_bits(self.k + 1)
        self._derived3: dict = {}

    def __getstate__(self) -> dict:  # the tuple counts' lookups are a cache (closures): never pickled
        return {**super().__getstate__(), "_derived3": {}}

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._derived3 = {}

    @property
    def per_event(self) -> bool:
        return self.k == 1  # the tuples of k >= 2 are counted in learn()

    @property
    def triples(self) -> TripleCounts | None:
        return self.tuples.get(3)

    def params(self) -> dict:
        return {**super().params(), "k": self.k}

    def choose_parents(self, mi: np.ndarray, cmi: np.ndarray, names: list) -> list[list[int]]:
        return kdb_parents(mi, cmi, self.k)

    # -- counting the tuples alongside the pairs ----------------------------------------------
    def grow_classes(self, k: int) -> None:
        super().grow_classes(k)
        for t in self.tuples.values():
            t.grow(k, self.attrs.n_codes)

    def bytes_needed(self, n_classes: int, n_codes: int, sizes: list[tuple[int, int]]) -> int:
        extra = sum(t.bytes_after(sum(n * t.entries_per_event(d) for n, d in sizes))
                    for t in self.tuples.values())
        return super().bytes_needed(n_classes, n_codes, sizes) + extra

    def add_events(self, rows: np.ndarray, codes: np.ndarray, w: np.ndarray) -> None:
        super().add_events(rows, codes, w)
        for t in self.tuples.values():
            t.grow(len(self.class_counts), self.attrs.n_codes)
            t.add(rows, codes, w)

    def add_replayed(self, events: list[tuple[int, int, np.ndarray, float]]) -> None:
        super().add_replayed(events)
        for t in self.tuples.values():
            t.grow(len(self.class_counts), self.attrs.n_codes)
            for c, code, others, w in events:
                t.add_with(c, code, others, w)

    def scale(self, factor: float) -> None:
        super().scale(factor)
        for t in self.tuples.values():
            t.scale(factor)

    def merge_counts(self, other: KDBTable, class_map: np.ndarray, code_map: np.ndarray,
                     factor: float) -> None:
        super().merge_counts(other, class_map, code_map, factor)
        for r, t in self.tuples.items():
            t.grow(len(self.class_counts), self.attrs.n_codes)
            t.merge(other.tuples[r], class_map, code_map, factor)

    # -- estimates ------------------------------------------------------------------------------
    def _conditional(self, est: Derived, g: np.ndarray, present: np.ndarray, i: int, ps: list[int],
                     scale: float) -> np.ndarray:
        """log P̂(x_i | c, the known parent values): (k, n); events grouped by which are known."""
        gi, n_i = g[:, i], est.n_values[i]
        out = est.smoothed(est.single[:, gi], est.class_attr[:, i][:, None], n_i)
        if not ps:
            return out
        pattern = present[:, ps].astype(np.int64) @ (1 << np.arange(len(ps)))
        for mask in np.unique(pattern[pattern > 0]).tolist():
            rows = np.flatnonzero(pattern == mask)
            given = [g[rows, p] for b, p in enumerate(ps) if mask >> b & 1]
            out[:, rows] = self._given(est, given, gi[rows], i, scale)
        return out

    def _given(self, est: Derived, given: list[np.ndarray], gi: np.ndarray, i: int,
               scale: float) -> np.ndarray:
        """log P̂(x_i = gi | c, the ``given`` parent codes): (k, n)."""
        if len(given) == 1:
            return est.smoothed(est.t[:, given[0], gi], est.known_with[:, given[0], i], est.n_values[i])
        count, known = self._tuple_counts(len(given) + 1)
        n = count([*given, gi]) * scale
        return est.smoothed(n, known(given, i) * scale, est.n_values[i])

    def _tuple_counts(self, r: int) -> tuple:
        """Functions giving the r-tuple counts and the events with r - 1 codes and an attribute
        known, for every class: from dense tables when small, else looked up."""
        cached = self._derived3.get(r)
        if cached is None or cached[0] != self.version:
            t = self.tuples[r]
            attr_of = np.array(self.attrs.attr_of, np.int64)
            if self.dense_fits(r):
                counts = t.view()
                sums = counts @ onehot(attr_of, len(self.attrs.names))
                funcs = (lambda cols: counts[(slice(None), *cols)],
                         lambda cols, j: sums[(slice(None), *cols, j)])
            else:
                sparse, k = t.known(attr_of), len(self.class_counts)

                def known(cols: list, j: int) -> np.ndarray:
                    g = np.stack(cols, axis=-1)
                    cs = np.broadcast_to(np.arange(k)[:, None], (k, len(g)))
                    keys = t.known_key(cs, np.broadcast_to(g, (k, *g.shape)), np.full((k, len(g)), j))
                    return sparse.get(keys)

                funcs = (lambda cols: t.lookup(*cols), known)
            cached = self._derived3[r] = (self.version, funcs)
        return cached[1]

    # -- state ------------------------------------------------------------------------------------
    def extra_state(self, attrs: list[int]) -> dict:
        state = super().extra_state(attrs)
        order = self.attrs.canonical_order()[1]
        for t in self.tuples.values():
            state.update(t.to_arrays(order))
        return state

    def load_extra(self, state: dict) -> None:
        super().load_extra(state)
        k, g = len(self.class_counts), self.attrs.n_codes
        for r, t in self.tuples.items():
            if r == 3 and "triples" in state:  # a snapshot of the dense table (before the sparse store)
                counts = np.array(state["triples"], np.float64).reshape(k, g, g, g)
                self.tuples[3] = TripleCounts.from_array(counts, self.max_bytes)
            else:
                codes, counts = t.state_keys
                t.load_arrays(k, g, state[codes], np.array(state[counts], np.float64))

    def memory_bytes(self) -> int:
        return super().memory_bytes() + sum(t.memory_bytes() for t in self.tuples.values())
