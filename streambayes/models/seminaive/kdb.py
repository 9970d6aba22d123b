"""kDB, the k-dependence Bayesian classifier (Sahami 1996), with k = 1 or 2.

Attributes are taken in decreasing I(x_i; y); each gets as parents, besides the class, the (up
to) ``k`` attributes before it of largest I(x_i; x_j | y) (``structure.py``). k = 1 needs only
the pair table. k = 2 estimates P̂(x_i | c, x_p1, x_p2) from a class × value × value × value
table, counted like the pairs (``table.py``): the triples of an event's coded values when it is
learned, and, when a numeric attribute's warm-up fixes its bins, the triples of each buffered
event that contain the attribute's new code. So every triple is counted once, as soon as its
three values have codes, whatever the batch boundaries or merges. The table is dense (classes ×
values³ floats) and refuses to grow past ``max_bytes``: a mini-batch whose new values could
make it do so is refused before anything changes (:class:`ModelError`; the bound counts the
bins of its numeric attributes still in warm-up); a merge or a new class that would raises it too.
"""

from __future__ import annotations

import numpy as np

from streambayes.errors import ModelError
from streambayes.models.seminaive.information import onehot
from streambayes.models.seminaive.ode import Derived
from streambayes.models.seminaive.structure import kdb_parents
from streambayes.models.seminaive.tan import DependenceTable
from streambayes.stats.keyed import KeyedCounts, pack
from streambayes.stats.triples import BITS as TRIPLE_BITS
from streambayes.stats.triples import TripleCounts


class KDBTable(DependenceTable):
    kind = "kdb"

    def __init__(self, alpha: float = 1.0, m: float | None = None, k: int = 1, refit_every: int = 1,
                 **table_args) -> None:
        if k not in (1, 2):
            raise ModelError(f"kDB supports k = 1 or 2, got k={k!r}")
        super().__init__(alpha, m, refit_every, **table_args)
        self.k = k
        self.triples = TripleCounts(self.max_bytes) if k == 2 else None
        if k == 2:  # the key layout of the triple counts (stats/triples.py)
            self.code_bits, self.class_bits = TRIPLE_BITS, 63 - 3 * TRIPLE_BITS
        self._derived3: tuple | None = None

    def params(self) -> dict:
        return {**super().params(), "k": self.k}

    def choose_parents(self, mi: np.ndarray, cmi: np.ndarray, names: list) -> list[list[int]]:
        return kdb_parents(mi, cmi, self.k)

    # -- counting the triples alongside the pairs ---------------------------------------------
    def grow_classes(self, k: int) -> None:
        super().grow_classes(k)
        if self.triples is not None:
            self.triples.grow(k, self.attrs.n_codes)

    def bytes_needed(self, n_classes: int, n_codes: int, sizes: list[tuple[int, int]]) -> int:
        extra = 0
        if self.triples is not None:
            extra = self.triples.bytes_after(sum(n * self.triples.entries_per_event(d) for n, d in sizes))
        return super().bytes_needed(n_classes, n_codes, sizes) + extra

    def add_events(self, rows: np.ndarray, codes: np.ndarray, w: np.ndarray) -> None:
        super().add_events(rows, codes, w)
        if self.triples is not None:
            self.triples.grow(len(self.class_counts), self.attrs.n_codes)
            self.triples.add(rows, codes, w)

    def add_replayed(self, c: int, code: int, others: np.ndarray, w: float) -> None:
        super().add_replayed(c, code, others, w)
        if self.triples is not None:
            self.triples.grow(len(self.class_counts), self.attrs.n_codes)
            self.triples.add_with(c, code, others, w)

    def scale(self, factor: float) -> None:
        super().scale(factor)
        if self.triples is not None:
            self.triples.scale(factor)

    def merge_counts(self, other: KDBTable, class_map: np.ndarray, code_map: np.ndarray,
                     factor: float) -> None:
        super().merge_counts(other, class_map, code_map, factor)
        if self.triples is not None:
            self.triples.grow(len(self.class_counts), self.attrs.n_codes)
            self.triples.merge(other.triples, class_map, code_map, factor)

    # -- estimates ------------------------------------------------------------------------------
    def triple_term(self, est: Derived, g: np.ndarray, i: int, p1: int, p2: int, scale: float) -> np.ndarray:
        """log P̂(x_i | c, x_p1, x_p2): (k, n)."""
        counts, known = self._triple_counts()
        n = counts[:, g[:, p1], g[:, p2], g[:, i]] * scale
        total = known[:, g[:, p1], g[:, p2], i] * scale
        return est.smoothed(n, total, est.n_values[i])

    def _triple_counts(self) -> tuple:
        """The triple counts and |D_c,x1,x2,j| (events of class c with x1, x2 and j known):
        dense arrays when small, else views that look the batch's codes up."""
        if self._derived3 is None or self._derived3[0] != self.version:
            attr_of = np.array(self.attrs.attr_of, np.int64)
            if self.dense_fits(3):
                counts = self.triples.view()
                self._derived3 = (self.version, counts, counts @ onehot(attr_of, len(self.attrs.names)))
            else:
                self._derived3 = (self.version, TripleView(self.triples),
                                  TripleKnownView(self.triples.known(attr_of), len(self.class_counts)))
        return self._derived3[1], self._derived3[2]

    # -- state ------------------------------------------------------------------------------------
    def extra_state(self, attrs: list[int]) -> dict:
        state = super().extra_state(attrs)
        if self.triples is not None:
            state.update(self.triples.to_arrays(self.attrs.canonical_order()[1]))
        return state

    def load_extra(self, state: dict) -> None:
        super().load_extra(state)
        if self.triples is not None:
            k, g = len(self.class_counts), self.attrs.n_codes
            if "triples" in state:  # a snapshot of the dense table (before the sparse store)
                counts = np.array(state["triples"], np.float64).reshape(k, g, g, g)
                self.triples = TripleCounts.from_array(counts, self.max_bytes)
            else:
                self.triples = TripleCounts.from_arrays(k, g, state["triple_codes"],
                                                        np.array(state["triple_counts"], np.float64),
                                                        self.max_bytes)

    def memory_bytes(self) -> int:
        extra = 0 if self.triples is None else self.triples.memory_bytes()
        return super().memory_bytes() + extra


class TripleView:
    """``view[:, a, b, c]``: the counts of three different codes for every class."""

    def __init__(self, triples: TripleCounts) -> None:
        self.triples = triples

    def __getitem__(self, key: tuple) -> np.ndarray:
        _, a, b, c = key
        return self.triples.lookup(a, b, c)


class TripleKnownView:
    """``view[:, g, h, j]``: events of each class with codes ``g``, ``h`` and attribute ``j``
    (another one than theirs) known."""

    def __init__(self, known: KeyedCounts, n_classes: int) -> None:
        self.known, self.n_classes = known, n_classes

    def __getitem__(self, key: tuple) -> np.ndarray:
        _, g, h, j = key
        g, h, j = np.broadcast_arrays(*(np.asarray(x, np.int64) for x in (g, h, j)))
        k = self.n_classes
        cs = np.broadcast_to(np.arange(k).reshape((-1,) + (1,) * g.ndim), (k, *g.shape))
        return self.known.get(pack([cs, np.minimum(g, h), np.maximum(g, h), j], TRIPLE_BITS))
