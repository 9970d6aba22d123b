"""Bayesian network classifiers whose structure is derived from the counts: TAN, and the
common machinery kDB shares (``kdb.py``).

Each attribute ``x_i`` has the class and up to two attributes ``pa(i)`` as parents, and

    P(c | x) ∝ P̂(c) Π_i P̂(x_i | c, x_pa(i))

over the coded values of the event (a missing ``x_i`` is skipped; a missing parent value is
dropped from the condition, down to P̂(x_i | c)). The estimates are those of ``ode.py``:
Lidstone ``(n + α) / (N + α·N_i)`` (α = 1 is the seed's Laplace correction) or the m-estimate,
where ``N`` counts the events of class ``c`` with the parent values in which ``x_i``'s attribute
is known as well.

The structure (``structure.py``) is a pure function of the counts. With ``refit_every = 1`` it
is derived at prediction time from the current counts (cached until they change), so it always
follows the stream and merge == sequential holds exactly. With ``refit_every = N > 1`` it is
re-derived when at least N events were learned since the last derivation (and after a merge):
the structure is then that of the counts at the last refit (naive Bayes before the first),
kept in the state. The refit happens at the end of the mini-batch that reached N, so with
N > 1 the structure (not the counts) depends on the batch boundaries, and merged shards refit
from their summed counts: learn_many == learn_one and merge == sequential hold for the counts
only. No count is ever dropped when the structure changes.
"""

from __future__ import annotations

import numpy as np

from streambayes.errors import ModelError
from streambayes.features import Batch
from streambayes.models.seminaive.information import sparse_information
from streambayes.models.seminaive.ode import Derived, ODETable
from streambayes.models.seminaive.structure import information, rounded, tan_parents
from streambayes.stats.bayes_score import bayes_gain, bayes_gain_dense

EDGE_WEIGHTS = ("cmi", "bayes")


class DependenceTable(ODETable):
    """Pair table + a derived structure; ``choose_parents`` is the subclass's algorithm."""

    def __init__(self, alpha: float = 1.0, m: float | None = None, refit_every: int = 1,
                 edge_weight: str = "cmi", **table_args) -> None:
        super().__init__(alpha, m, **table_args)
        if int(refit_every) != refit_every or refit_every < 1:
            raise ModelError(f"refit_every must be an integer >= 1, got {refit_every!r}")
        if edge_weight not in EDGE_WEIGHTS:
            raise ModelError(f"edge_weight must be one of {EDGE_WEIGHTS}, got {edge_weight!r}")
        self.edge_weight = edge_weight
        self.refit_every = int(refit_every)
        self.since_refit = 0  # events learned since the last refit (refit_every > 1)
        self.fitted: list | None = None  # the structure at the last refit (refit_every > 1)
        self._live: tuple | None = None  # ((version, scale), structure) when refit_every = 1
        self._scale = 1.0  # stored → true counts at the last prediction (decay)

    def params(self) -> dict:
        return {**super().params(), "refit_every": self.refit_every, "edge_weight": self.edge_weight}

    # -- structure --------------------------------------------------------------------------
    def choose_parents(self, mi: np.ndarray, cmi: np.ndarray, names: list) -> list[list[int]]:
        raise NotImplementedError

    def fit(self, scale: float = 1.0) -> list:
        """``[[attribute, [parents]], …]`` in name order, from the current counts (``scale``:
        stored → true counts under decay; the Bayesian edge weights depend on it)."""
        attrs, order = self.attrs.canonical_order()
        if not attrs:
            return []
        rank = np.empty(len(attrs), np.int64)
        rank[attrs] = np.arange(len(attrs))
        attr_of = rank[np.array(self.attrs.attr_of, np.int64)[order]]
        est = self._derived[1] if self._derived and self._derived[0] == (self.version, scale) else None
        dense = est.t if est is not None and est.dense else (  # true counts; the same as the pairs'
            self.pairs.view() * scale if self.dense_fits(2) else None)
        if dense is not None:
            dense = dense[:, order][:, :, order]
            mi, cmi = information(dense, attr_of, len(attrs))
        else:  # the same estimates from the sparse counts, then in name order
            mi, cmi = sparse_information(self.pairs, np.array(self.attrs.attr_of, np.int64), len(attrs))
            mi, cmi = rounded(mi[attrs], cmi[np.ix_(attrs, attrs)])
        if self.edge_weight == "bayes":  # the Bayesian score's gain, made symmetric by the larger way
            alpha, n_values = self.alpha if self.m is None else 0.5, self.attrs.n_values()
            if dense is not None:
                gain = bayes_gain_dense(dense, attr_of, len(attrs), n_values[attrs], alpha)
            else:
                gain = bayes_gain(self.pairs, np.array(self.attrs.attr_of, np.int64), len(self.attrs.names),
                                  n_values, alpha, scale)[np.ix_(attrs, attrs)]
            cmi = rounded(mi, np.maximum(gain, gain.T))[1]
        names = [self.attrs.names.values[a] for a in attrs]
        parents = self.choose_parents(mi, cmi, names)
        return [[names[i], [names[p] for p in ps]] for i, ps in enumerate(parents)]

    def structure(self, scale: float | None = None) -> list:
        """The structure in use: current (``refit_every = 1``) or that of the last refit.
        ``scale`` defaults to that of the last prediction (1 before any)."""
        if self.refit_every > 1:
            return self.fitted or []
        key = (self.version, self._scale if scale is None else scale)
        if self._live is None or self._live[0] != key:
            self._live = (key, self.fit(key[1]))
        return self._live[1]

    def _parents(self, scale: float | None = None) -> dict[int, list[int]]:
        index = self.attrs.names
        return {index.get(child): [index.get(p) for p in ps] for child, ps in self.structure(scale)}

    def _refit(self) -> None:  # under decay: the scale of the last prediction
        self.fitted, self.since_refit = self.fit(self._scale), 0

    def learn(self, batch: Batch, rows: np.ndarray, w: np.ndarray, raw: np.ndarray | None = None) -> None:
        super().learn(batch, rows, w, raw)
        if self.refit_every > 1:
            self.since_refit += batch.n
            if self.since_refit >= self.refit_every:
                self._refit()

    # -- estimates ----------------------------------------------------------------------------
    def terms(self, codes: np.ndarray, scale: float,
              parents: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        """log P̂(c) (k,) and log P̂(x_i | c, x_pa(i)) (k, n, d), 0 where ``x_i`` is missing;
        ``parents`` ({attribute: [parents]}) instead of the structure in use."""
        est = self.derived(scale)
        k = len(est.class_total)
        prior = est.smoothed(est.class_total, est.class_total.sum(), float(k))
        present = codes >= 0
        g = np.where(present, codes, 0)
        out = np.zeros((k, *codes.shape))
        self._scale = scale
        parents = self._parents(scale) if parents is None else parents
        for i in np.flatnonzero(present.any(axis=0)):
            term = self._conditional(est, g, present, int(i), parents.get(int(i), []), scale)
            out[:, :, i] = np.where(present[:, i], term, 0.0)
        return prior, out

    def _conditional(self, est: Derived, g: np.ndarray, present: np.ndarray, i: int, ps: list[int],
                     scale: float) -> np.ndarray:
        """log P̂(x_i | c, known parent values): (k, n)."""
        gi, n_i = g[:, i], est.n_values[i]
        out = est.smoothed(est.single[:, gi], est.class_attr[:, i][:, None], n_i)
        for p in ps[::-1]:  # the strongest parent last: it wins when only one is known
            pair = est.smoothed(est.t[:, g[:, p], gi], est.known_with[:, g[:, p], i], n_i)
            out = np.where(present[:, p], pair, out)
        if len(ps) == 2:
            both = present[:, ps[0]] & present[:, ps[1]]
            if both.any():
                out = np.where(both, self.triple_term(est, g, i, ps[0], ps[1], scale), out)
        return out

    def triple_term(self, est: Derived, g: np.ndarray, i: int, p1: int, p2: int, scale: float) -> np.ndarray:
        raise NotImplementedError  # only kDB with k = 2 has two parents

    def after_event(self, c: int, codes: list, w: float) -> None:
        super().after_event(c, codes, w)
        if self.refit_every > 1:  # as learn() of a one-event batch
            self.since_refit += 1
            if self.since_refit >= self.refit_every:
                self._refit()

    def event_log_likelihood(self, codes: list) -> np.ndarray | None:
        """The jll (classes,) of one event (codes by attribute, -1 missing), scale 1, from the dense
        estimates, for structures of at most one parent per attribute: the per-event path of
        :meth:`codes_log_likelihood`. None where that path is needed."""
        est = self.derived(1.0)
        if not est.dense or est.m is not None or not est.alpha > 0 or getattr(self, "root", "") == "average":
            return None
        parents, al = self._parents(1.0), est.alpha
        if any(len(ps) > 1 for ps in parents.values()):
            return None
        k = len(est.class_total)
        out = np.log(est.class_total + al) - np.log(est.class_total.sum() + al * k)
        alone, child, parent = [], [], []
        for i, g in enumerate(codes):
            if g >= 0:
                p = parents.get(i, [-1])[0] if parents.get(i) else -1
                (child if p >= 0 and codes[p] >= 0 else alone).append(i)
                if p >= 0 and codes[p] >= 0:
                    parent.append(p)
        c = np.array(codes, np.int64)
        if alone:
            a = np.array(alone, np.int64)
            out = out + (np.log(est.single[:, c[a]] + al)
                         - np.log(est.class_attr[:, a] + al * est.n_values[a])).sum(axis=1)
        if child:
            i, p = np.array(child, np.int64), np.array(parent, np.int64)
            out = out + (np.log(est.t[:, c[p], c[i]] + al)
                         - np.log(est.known_with[:, c[p], i] + al * est.n_values[i])).sum(axis=1)
        return out

    def codes_log_likelihood(self, codes: np.ndarray, scale: float) -> np.ndarray:
        prior, terms = self.terms(codes, scale)
        return (prior[:, None] + terms.sum(axis=2)).T

    def contributions(self, batch: Batch, scale: float) -> list[tuple[str, np.ndarray]]:
        """``prior`` and one term per known value, ``x_i=v | parent=u``: they sum to the jll."""
        codes = self.attrs.encode(batch, learn=False)
        prior, terms = self.terms(codes, scale)
        parents, row = self._parents(), codes[0]
        out = [("prior", prior)]
        for i in np.flatnonzero(row >= 0):
            given = [self.describe(p, row[p]) for p in parents.get(int(i), []) if row[p] >= 0]
            label = self.describe(int(i), row[i]) + (" | " + ", ".join(given) if given else "")
            out.append((label, terms[:, 0, i]))
        return out

    def describe(self, a: int, code: int) -> str:
        """``name=value`` of a coded value; a numeric bin as its interval."""
        attrs = self.attrs
        name, local = attrs.names.values[a], attrs.gcodes[a].index(int(code))
        value = attrs.values[a].values[local]
        if isinstance(value, str):
            return f"{name}={value}"
        edges = attrs.edges[a]  # a bin number: show its interval
        lower = f"{edges[value - 1]:g}<" if value > 0 else ""
        upper = f"≤{edges[value]:g}" if value < len(edges) else ""
        return f"{lower}{name}{upper}"

    # -- merge and state ------------------------------------------------------------------------
    def merge_extra(self, other: DependenceTable, class_map: np.ndarray, factor: float) -> None:
        if self.refit_every > 1:
            self._refit()

    def extra_state(self, attrs: list[int]) -> dict:
        fitted = None if self.fitted is None else [[c, list(ps)] for c, ps in self.fitted]
        return {"since_refit": self.since_refit, "structure": fitted}

    def load_extra(self, state: dict) -> None:
        self.since_refit = int(state["since_refit"])
        fitted = state["structure"]
        self.fitted = None if fitted is None else [[c, list(ps)] for c, ps in fitted]


class TANTable(DependenceTable):
    """Tree augmented naive Bayes (Friedman, Geiger & Goldszmidt 1997); ``root`` is ``"mi"`` (the
    attribute of largest I(x_i; y)) or an attribute's name (``"mi"`` until it has been seen), or
    ``"average"``: averaged TAN (Jiang et al. 2012), the mean of the posteriors of the same tree
    rooted at each attribute in turn (the directions decide which estimates are used)."""

    kind = "tan"

    def __init__(self, alpha: float = 1.0, m: float | None = None, root="mi", refit_every: int = 1,
                 **table_args) -> None:
        super().__init__(alpha, m, refit_every, **table_args)
        self.root = root

    def params(self) -> dict:
        return {**super().params(), "root": self.root}

    def choose_parents(self, mi: np.ndarray, cmi: np.ndarray, names: list) -> list[list[int]]:
        root = names.index(self.root) if self.root not in ("mi", "average") and self.root in names else None
        return tan_parents(mi, cmi, root)

    def codes_log_likelihood(self, codes: np.ndarray, scale: float) -> np.ndarray:
        if self.root != "average" or codes.shape[1] == 0:
            return super().codes_log_likelihood(codes, scale)
        rootings = rerooted(self._parents(scale), codes.shape[1])
        jll = np.stack([prior[:, None] + terms.sum(axis=2)
                        for prior, terms in (self.terms(codes, scale, ps) for ps in rootings)])
        top = jll.max(axis=0)
        return (top + np.log(np.exp(jll - top).mean(axis=0))).T

    def tree(self, scale: float | None = None) -> list[tuple]:
        """Directed edges (parent, child) of the structure in use, in child name order."""
        return [(ps[0], child) for child, ps in self.structure(scale) if ps]


def rerooted(parents: dict, d: int) -> list[dict]:
    """The forest ``parents`` ({attribute: [parent]}) rooted at each attribute ``0 … d-1`` in
    turn: the edges on the path from the attribute up to its tree's root are reversed."""
    out = []
    for r in range(d):
        ps = {a: list(p) for a, p in parents.items()}
        child, up = r, parents.get(r, [])
        ps[r] = []
        while up:
            parent = up[0]
            up = parents.get(parent, [])
            ps[parent] = [child]
            child = parent
        out.append(ps)
    return out
