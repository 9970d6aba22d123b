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

    def bytes_needed(self, n_classes: int, n_codes: int) -> int:
        extra = n_classes * n_codes**3 * 8 if self.triples is not None else 0
        return super().bytes_needed(n_classes, n_codes) + extra

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
            keep = np.flatnonzero(code_map >= 0)
            theirs = other.triples.view()
            counts = theirs[np.ix_(np.arange(theirs.shape[0]), keep, keep, keep)]
            self.triples.grow(len(self.class_counts), self.attrs.n_codes)
            self.triples.merge(counts, class_map, code_map[keep], factor)

    # -- estimates ------------------------------------------------------------------------------
    def triple_term(self, est: Derived, g: np.ndarray, i: int, p1: int, p2: int, scale: float) -> np.ndarray:
        """log P̂(x_i | c, x_p1, x_p2): (k, n)."""
        counts, known = self._triple_counts()
        n = counts[:, g[:, p1], g[:, p2], g[:, i]] * scale
        total = known[:, g[:, p1], g[:, p2], i] * scale
        return est.smoothed(n, total, est.n_values[i])

    def _triple_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """The triple counts and |D_c,x1,x2,j| (events of class c with x1, x2 and j known)."""
        if self._derived3 is None or self._derived3[0] != self.version:
            counts = self.triples.view()
            h = onehot(np.array(self.attrs.attr_of, np.int64), len(self.attrs.names))
            self._derived3 = (self.version, counts, counts @ h)
        return self._derived3[1], self._derived3[2]

    # -- state ------------------------------------------------------------------------------------
    def extra_state(self, attrs: list[int]) -> dict:
        state = super().extra_state(attrs)
        if self.triples is not None:
            state["triples"] = self.triples.permuted(self.attrs.canonical_order()[1])
        return state

    def load_extra(self, state: dict) -> None:
        super().load_extra(state)
        if self.triples is not None:
            k, g = len(self.class_counts), self.attrs.n_codes
            counts = np.array(state["triples"], np.float64).reshape(k, g, g, g)
            self.triples = TripleCounts.from_array(counts, self.max_bytes)

    def memory_bytes(self) -> int:
        extra = 0 if self.triples is None else self.triples.memory_bytes()
        return super().memory_bytes() + extra
