"""Family counts of a Bayesian network and the Dirichlet priors that turn them into CPTs.

"Count, then derive" (STYLE habit 2): :class:`FamilyCounts` only adds weighted counts
``N[v][s, p1, …, pk]`` (rows where the child and all its parents are observed); CPTs are derived
by :func:`cpts_from_counts` as the posterior mean under a Dirichlet prior,

    P(v = s | pa = j) = (N_vsj + α_vsj) / Σ_s' (N_vs'j + α_vs'j)

(Heckerman, Geiger & Chickering 1995, "Learning Bayesian networks: the combination of knowledge
and statistical data", Machine Learning 20 — BDeu: α_vsj = ess / (q_v · r_v); Cooper & Herskovits
1992 — K2: α_vsj = 1). A column with zero total (no data, no prior) becomes uniform.

>>> from streambayes.models.bayesnet.network import Network
>>> net = Network({"a": ["x", "y"], "b": ["u", "v"]}, {"b": ["a"]})
>>> fc = FamilyCounts(net)
>>> fc.add(np.array([[0, 1], [0, 1], [1, -1]]))
>>> fc.counts["b"].tolist(), fc.counts["a"].tolist()
([[0.0, 0.0], [2.0, 0.0]], [2.0, 1.0])
>>> cpts = cpts_from_counts(net, fc.counts, dirichlet(net, "bdeu", 4.0))
>>> cpts["b"].tolist()  # column a=x: (0+1, 2+1)/4; column a=y: no data, prior only
[[0.25, 0.5], [0.75, 0.5]]
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from streambayes.errors import NetworkError
from streambayes.models.bayesnet.network import Network

PRIORS = ("bdeu", "k2", "none")


class FamilyCounts:
    """Weighted counts of every family ``(v, parents(v))`` over the rows where all are observed."""

    def __init__(self, net: Network) -> None:
        self.net = net
        self.counts = {v: np.zeros(net.family_shape(v)) for v in net.states}
        self._families = {v: ([net.index[v]] + [net.index[p] for p in net.parents[v]], net.family_shape(v))
                          for v in net.states}

    def add(self, codes: np.ndarray, w: np.ndarray | None = None) -> None:
        """Add rows of state codes (n, V), ``-1`` = missing, with optional weights (n,).

        Vectorised per family: keep the rows where the family is fully observed, flatten the
        family's codes to one index (``np.ravel_multi_index``) and ``np.bincount`` the weights.
        """
        codes = np.asarray(codes, np.int64)
        if codes.ndim != 2 or codes.shape[1] != len(self.net.states):
            raise NetworkError(f"expected codes of shape (n, {len(self.net.states)}), got {codes.shape}")
        if w is not None:
            w = np.asarray(w, np.float64)
        complete = bool((codes >= 0).all())
        for v, (cols, shape) in self._families.items():
            fam = codes[:, cols]
            if complete:
                keep, weights = fam, w
            else:
                mask = (fam >= 0).all(axis=1)
                keep, weights = fam[mask], None if w is None else w[mask]
            if not len(keep):
                continue
            flat = np.ravel_multi_index(keep.T, shape)
            size = int(np.prod(shape))
            self.counts[v] += np.bincount(flat, weights, minlength=size).reshape(shape)

    def scale(self, factor: float) -> None:
        """Multiply every count by ``factor`` (exponential forgetting)."""
        for v in self.counts:
            self.counts[v] *= factor

    def merge(self, other: FamilyCounts) -> None:
        """Add the counts of ``other`` (same structure, a disjoint stream)."""
        if other.net.states != self.net.states or other.net.parents != self.net.parents:
            raise NetworkError("cannot merge family counts of different network structures")
        for v in self.counts:
            self.counts[v] += other.counts[v]

    def total(self) -> float:
        return float(sum(a.sum() for a in self.counts.values()))

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.counts.values())

    def to_state(self) -> dict:
        return {v: a.copy() for v, a in self.counts.items()}

    @classmethod
    def from_state(cls, net: Network, state: Mapping) -> FamilyCounts:
        fc = cls(net)
        for v in fc.counts:
            arr = np.array(state[v], np.float64)
            if arr.shape != fc.counts[v].shape:
                raise NetworkError(f"counts of {v!r} have shape {arr.shape}, expected {fc.counts[v].shape}")
            fc.counts[v] = arr
        return fc


def dirichlet(net: Network, prior: str | Mapping = "bdeu", equivalent_sample_size: float = 1.0) -> dict:
    """Pseudo-counts ``α_v`` (family-shaped) of a Dirichlet prior.

    ``"bdeu"``: ess / (q_v · r_v) per cell (q_v parent configurations, r_v states); ``"k2"``: 1;
    ``"none"``: 0 (maximum likelihood); ``"file"``: ess · the network's own CPTs (each parent
    configuration of the given CPT counts as ``ess`` observations); a mapping ``{v: array}``:
    the given pseudo-counts.
    """
    if isinstance(prior, Mapping):
        out = {v: np.broadcast_to(np.asarray(prior[v], np.float64), net.family_shape(v)).copy()
               for v in net.states}
        if any((a < 0).any() for a in out.values()):
            raise NetworkError("pseudo-counts must be >= 0")
        return out
    if equivalent_sample_size < 0:
        raise NetworkError(f"equivalent_sample_size must be >= 0, got {equivalent_sample_size}")
    if prior == "file":
        missing = [v for v in net.states if v not in net.cpts]
        if missing:
            raise NetworkError(f"prior 'file' needs the CPTs of {missing}")
        return {v: equivalent_sample_size * net.cpts[v] for v in net.states}
    if prior not in PRIORS:
        raise NetworkError(f"unknown prior {prior!r}; choose from {', '.join(PRIORS)}, 'file' "
                           "or pseudo-counts")
    out = {}
    for v in net.states:
        shape = net.family_shape(v)
        cell = {"bdeu": equivalent_sample_size / float(np.prod(shape)), "k2": 1.0, "none": 0.0}[prior]
        out[v] = np.full(shape, cell)
    return out


def cpts_from_counts(net: Network, counts: Mapping, pseudo: Mapping | None = None) -> dict:
    """CPTs ``(N + α) / Σ_axis0 (N + α)``; a column with zero total becomes uniform."""
    out = {}
    for v in net.states:
        table = counts[v] if pseudo is None else counts[v] + pseudo[v]
        total = table.sum(axis=0, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            cpt = table / total
        out[v] = np.where(total > 0, cpt, 1.0 / table.shape[0])
    return out
