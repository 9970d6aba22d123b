"""One-dependence estimators over the pair table: AODE and SPODE (log space throughout).

For an event with coded values ``x_1 … x_d`` (missing ones skipped), parent ``i`` gives

    log P̂(c, x_i) + Σ_{j ≠ i} log P̂(x_j | c, x_i)

with P̂(c, x_i) = (|D_c,xi| + α) / (|D_i| + α·N·N_i) and P̂(x_j | c, x_i) = (|D_c,xi,xj| + α) /
(|D_c,xi,j| + α·N_j) — α = 1 is the seed's estimate (Webb, Boughton & Wang 2005; reference 002) —
or the m-estimate (n + m·p) / (N + m) with uniform p. ``|D_i|`` counts the events where
attribute ``i`` is known and ``|D_c,xi,j|`` those where ``j`` is known as well (equal to ``|D|``
and ``|D_c,xi|`` on complete data). ``j = i`` is left out of the product: P(x_i | c, x_i) = 1.
AODE averages the parents with ``|D_xi| ≥ m'``; with none it is naive Bayes with the same
smoothing. A numeric attribute whose bins are still warming up has no code yet: it is left out,
as a missing value is, until its edges are fixed (then its warm-up events are counted).
"""

from __future__ import annotations

import numpy as np

from streambayes.features import Batch
from streambayes.models.seminaive import compiled
from streambayes.models.seminaive.information import onehot as attribute_onehot
from streambayes.models.seminaive.table import AttributeTable
from streambayes.stats.keyed import KeyedCounts, pack
from streambayes.stats.pairs import BITS as PAIR_BITS
from streambayes.stats.pairs import PairCounts

TINY = 1e-250  # the smallest likelihood the per-event products give (else: the log path)


class Derived:
    """Smoothed log-estimates derived from the counts, for the codes present in a batch."""

    def __init__(self, table: AttributeTable, scale: float, alpha: float, m: float | None) -> None:
        attr_of = np.array(table.attrs.attr_of, np.int64)
        d = len(table.attrs.names)
        onehot = attribute_onehot(attr_of, d)
        self.attr_of = attr_of
        self.single = np.ascontiguousarray(table.pairs.singles() * scale)  # |D_c,x|, (k, G)
        if table.dense_fits(2):  # small: dense (k, G, G) and (k, G, d) arrays
            self.t = np.ascontiguousarray(table.pairs.view() * scale)  # add_event: flat views
            self.known_with = np.ascontiguousarray(self.t @ onehot)  # |D_c,x,j|: class c, x and j known
        else:  # large: the same numbers, looked up for the codes a batch asks for
            self.t = PairView(table.pairs, scale)
            self.known_with = KnownView(table.pairs.known(attr_of), self.single, attr_of, d, scale)
        self.class_attr = self.single @ onehot  # events of class c with attribute j known, (k, d)
        self.attr_total = self.class_attr.sum(axis=0)  # |D_i|, (d,)
        self.value_total = self.single.sum(axis=0)  # |D_x|, (G,)
        self.class_total = table.class_counts * scale
        self.dense = isinstance(self.t, np.ndarray)
        self.n_values = np.maximum(table.attrs.n_values(), 1).astype(np.float64)
        self.alpha, self.m = alpha, m
        k, a = self.single.shape[0], 0.0 if alpha is None else alpha  # (None: the m-estimate)
        self.alpha_values = a * self.n_values  # the smoothing's denominators, per attribute
        self.alpha_joint = a * k * self.n_values
        if self.single.shape[1] == 0:  # attributes but no coded value yet (numeric bins warming up):
            k = self.single.shape[0]  # one zero-count column: every code (all -1, missing) indexes it
            self.t, self.single = np.zeros((k, 1, 1)), np.zeros((k, 1))
            self.known_with, self.value_total = np.zeros((k, 1, d)), np.zeros(1)
        # codes below this index every estimate (the compiled kernels check no bounds)
        self.codes_bound = min(self.t.shape[1], len(attr_of)) if self.dense else 0

    def smoothed(self, counts: np.ndarray, totals, n_values) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.m is not None:
                return np.log(counts + self.m / n_values) - np.log(totals + self.m)
            return np.log(counts + self.alpha) - np.log(totals + self.alpha * n_values)

    def parent_terms(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-parent log P̂(c, x_i) Π_j P̂(x_j | c, x_i): (k, n, d), and which parents exist."""
        k = self.single.shape[0]
        present = codes >= 0
        g = np.where(present, codes, 0)
        joint = self.smoothed(self.single[:, g], self.attr_total, k * self.n_values)  # (k, n, d)
        pair = self.t[:, g[:, :, None], g[:, None, :]]  # (k, n, parent, child)
        known = self.known_with[:, g, :]  # (k, n, parent, child attribute)
        child = self.smoothed(pair, known, self.n_values)
        d = codes.shape[1]
        use = present[:, None, :] & ~np.eye(d, dtype=bool)[None]  # (n, parent, child)
        terms = joint + np.where(use[None], child, 0.0).sum(axis=3)
        return terms, present

    def add_event(self, c: int, codes: list, w: float) -> None:
        """The dense estimates after one more event (scale 1) of class ``c``, in place: compiled
        (:mod:`.compiled`), else class ``c``'s rows as flat views, indexed by flat positions (a
        multi-axis fancy index costs several µs a call)."""
        kernels = compiled.kernels()
        if kernels is not None and c < self.t.shape[0] and max(codes, default=-1) < self.codes_bound:
            args = (self.t, self.known_with, self.single, self.class_attr, self.attr_total,  # in bounds
                    self.value_total, self.class_total, c, np.array(codes, np.int64), self.attr_of, w)
            if compiled.call(kernels[1], *args) is not None:
                return
        g = np.array([v for v in codes if v >= 0], np.int64)
        a = self.attr_of.take(g)
        k, n_codes, d = self.known_with.shape
        pairs = self.t.reshape(k, -1)[c]  # views (the dense arrays are C-contiguous)
        pairs[(g * n_codes)[:, None] + g] += w
        known = self.known_with.reshape(k, -1)[c]
        known[(g * d)[:, None] + a] += w
        self.single[c][g] += w
        self.class_attr[c][a] += w
        self.attr_total[a] += w
        self.value_total[g] += w
        self.class_total[c] += w

    def naive_bayes(self, codes: np.ndarray) -> np.ndarray:
        """log P̂(c) + Σ_j log P̂(x_j | c) with the same smoothing: (k, n)."""
        k = self.single.shape[0]
        present = codes >= 0
        g = np.where(present, codes, 0)
        prior = self.smoothed(self.class_total, self.class_total.sum(), float(k))
        like = self.smoothed(self.single[:, g], self.class_attr[:, None, :], self.n_values)  # (k, n, d)
        return prior[:, None] + np.where(present[None], like, 0.0).sum(axis=2)


class PairView:
    """``view[:, a, b]``: the pair counts of codes ``a``, ``b`` (broadcast) for every class."""

    def __init__(self, pairs: PairCounts, scale: float) -> None:
        self.pairs, self.scale = pairs, scale

    def __getitem__(self, key: tuple) -> np.ndarray:
        _, a, b = key
        return self.pairs.lookup(a, b) * self.scale


class KnownView:
    """``view[:, g, j]``: events of each class with code ``g`` and attribute ``j`` known (``j``
    may be ``:``, every attribute), from the sparse sums ``known`` of the pair counts."""

    def __init__(self, known: KeyedCounts, single: np.ndarray, attr_of: np.ndarray, n_attrs: int,
                 scale: float) -> None:
        self.known, self.single, self.attr_of, self.scale = known, single, attr_of, scale
        self.n_attrs = n_attrs

    def __getitem__(self, key: tuple) -> np.ndarray:
        *_, g, j = key
        if isinstance(j, slice):
            j = np.arange(self.n_attrs)
            g = np.asarray(g)[..., None]
        g, j = np.broadcast_arrays(np.asarray(g, np.int64), np.asarray(j, np.int64))
        k = self.single.shape[0]
        u, inv = np.unique((g * self.n_attrs + j).ravel(), return_inverse=True)  # each (g, j) once
        ug, uj = np.divmod(u, self.n_attrs)
        cs = np.broadcast_to(np.arange(k)[:, None], (k, len(u)))
        found = self.known.get(pack([cs, ug[None], uj[None]], PAIR_BITS))
        out = found[:, inv.ravel()].reshape(k, *g.shape) * self.scale
        same = self.attr_of[g] == j  # the attribute of g itself: the single count
        if same.any():
            out[:, same] = self.single[:, g[same]]
        return out


class ODETable(AttributeTable):
    """Pair table + derived-estimate cache; ``log_likelihood`` is the subclass's estimator."""

    def __init__(self, alpha: float = 1.0, m: float | None = None, **table_args) -> None:
        super().__init__(alpha, **table_args)
        self.m = m
        self._derived: tuple | None = None

    def params(self) -> dict:
        return {**super().params(), "m": self.m}

    def __getstate__(self) -> dict:  # the derived estimates are a cache: never pickled
        return {**super().__getstate__(), "_derived": None}

    def __setstate__(self, state: dict) -> None:  # (older pickles hold an older Derived)
        super().__setstate__(state)
        self._derived = None

    def derived(self, scale: float) -> Derived:
        key = (self.version, scale)
        if self._derived is None or self._derived[0] != key:
            self._derived = (key, Derived(self, scale, self.alpha, self.m))
        return self._derived[1]

    def after_event(self, c: int, codes: list, w: float) -> None:
        """Dense estimates of scale 1 follow the event in place (no rebuild at the next one)."""
        if self._derived is not None and self._derived[0][1] == 1.0 and self._derived[1].dense \
                and self._derived[0][0] == self.version - 1:
            self._derived[1].add_event(c, codes, w)
            self._derived = ((self.version, 1.0), self._derived[1])

    def log_likelihood(self, batch: Batch, scale: float) -> np.ndarray:
        return self.codes_log_likelihood(self.attrs.encode(batch, learn=False), scale)

    def codes_log_likelihood(self, codes: np.ndarray, scale: float) -> np.ndarray:
        raise NotImplementedError

    def contributions(self, batch: Batch, scale: float) -> list[tuple[str, np.ndarray]]:
        return [("(one-dependence estimate)", self.log_likelihood(batch, scale)[0])]


class AODETable(ODETable):
    """Averaged one-dependence estimators over the parents seen at least ``min_count`` times."""

    kind = "aode"

    def __init__(self, alpha: float = 1.0, m: float | None = None, min_count: float = 1.0,
                 **table_args) -> None:
        super().__init__(alpha, m, **table_args)
        self.min_count = min_count

    def params(self) -> dict:
        return {**super().params(), "min_count": self.min_count}

    def codes_log_likelihood(self, codes: np.ndarray, scale: float) -> np.ndarray:
        est = self.derived(scale)
        if codes.shape[1] == 0 or len(codes) == 0:
            return est.naive_bayes(codes).T
        # the terms are (classes, rows, d, d): score the rows in chunks that fit in a quarter of
        # max_bytes (a batch of events with many attributes must not allocate batch × d² at once)
        k, d = max(len(self.class_counts), 1), codes.shape[1]
        step = max(1, self.max_bytes // (4 * 8 * k * d * d))
        return np.concatenate([self._chunk(codes[i:i + step], est) for i in range(0, len(codes), step)])

    def event_likelihood(self, codes: list) -> list[float] | None:
        """The joint likelihood of each class for one event (codes by attribute, -1 missing), scale
        1, from the dense estimates: the per-event path of :meth:`codes_log_likelihood`, as products
        of the same ratios rather than sums of their logs (``exp`` of its jll up to rounding).

        Parent ``i``'s term P̂(c, x_i) Π_{j≠i} P̂(x_j | c, x_i) is Π_j R_ij · D_ii / (|D_i| + α·N·N_i)
        with R_ij = (|D_c,xi,xj| + α) / (|D_c,xi,j| + α·N_j) and D_ii = |D_c,xi| + α·N_i its own
        denominator: R_ii's numerator is the joint's, so the product over every j needs no mask.
        Small arrays: ``take`` and Python's ``min`` (numpy's fancy indexing and reductions cost
        several µs a call). None where that path is needed: sparse estimates, alpha 0, the
        m-estimate, no eligible parent, or a class whose likelihood is below :data:`TINY` (the
        logs keep its precision)."""
        est = self.derived(1.0)
        if not est.dense or est.m is not None or not est.alpha > 0:
            return None
        kernels = compiled.kernels()
        if kernels is not None and max(codes, default=-1) < est.codes_bound:  # (never out of bounds)
            out = np.empty(est.t.shape[0])
            ok = compiled.call(kernels[0], est.t, est.known_with, est.attr_total, est.value_total,
                               est.alpha, est.alpha_values, est.alpha_joint, np.array(codes, np.int64),
                               est.attr_of, float(self.min_count), out)
            if ok is not None:
                likelihood = out.tolist()
                return likelihood if ok and min(likelihood) > TINY else None
        g = np.array([v for v in codes if v >= 0], np.int64)
        if not len(g):
            return None
        eligible = est.value_total.take(g) >= self.min_count
        some = eligible.tolist()
        if not all(some):
            if not any(some):
                return None
        else:
            eligible = None
        a = est.attr_of.take(g)
        ratio = est.t.take(g, axis=1).take(g, axis=2)  # (classes, parent, child)
        ratio += est.alpha
        below = est.known_with.take(g, axis=1).take(a, axis=2)
        below += est.alpha_values.take(a)
        ratio /= below
        terms = ratio.prod(axis=2)
        terms *= np.diagonal(below, axis1=1, axis2=2)
        terms /= est.attr_total.take(a) + est.alpha_joint.take(a)
        likelihood = (terms if eligible is None else terms[:, eligible]).sum(axis=1).tolist()
        return likelihood if min(likelihood) > TINY else None

    def _chunk(self, codes: np.ndarray, est: Derived) -> np.ndarray:
        terms, present = est.parent_terms(codes)
        g = np.where(present, codes, 0)
        parents = present & (est.value_total[g] >= self.min_count)  # (n, d)
        with np.errstate(divide="ignore", invalid="ignore"):
            masked = np.where(parents[None], terms, -np.inf)
            top = masked.max(axis=2, keepdims=True)
            top = np.where(np.isfinite(top), top, 0.0)
            jll = (top[..., 0] + np.log(np.exp(masked - top).sum(axis=2)))  # (k, n)
        fallback = ~parents.any(axis=1)
        if fallback.any():
            jll[:, fallback] = est.naive_bayes(codes[fallback])
        return jll.T
