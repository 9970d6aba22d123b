"""EM for Bayesian networks with hidden variables and missing values: stepwise (online) and batch.

A row of state codes has ``-1`` where a value is missing (a hidden variable is missing in every
row). EM (Dempster, Laird & Rubin 1977; reference 002: E-step = infer the expectation of the
unobserved variables under the current parameters, M-step = maximum likelihood given them) works
on the *expected family counts* Σ_rows w · P(v, parents(v) | row), computed by exact inference
(:meth:`VariableElimination.expected_counts`).

:class:`OnlineEM` is stepwise EM (Liang & Klein 2009, "Online EM for unsupervised models", NAACL;
Cappé & Moulines 2009, "On-line expectation–maximization algorithm for latent data models",
JRSS-B): per mini-batch k it keeps a running *average* of the sufficient statistics,

    s ← (1 − η_k) · s + η_k · ŝ_k,     η_k = (k + 2)^(−α),  α ∈ (0.5, 1],

and re-derives the CPTs from ``s`` after every mini-batch. A mini-batch is exactly ``batch_size``
rows of the stream, however the stream is cut into :meth:`OnlineEM.partial_fit` calls: rows that
do not yet fill one wait in the learner (``pending``, part of its state) and complete the next
call's first mini-batch, so the steps are the same for one call or many (exactly-once on a stream
whose poll batches differ after a restart). :meth:`OnlineEM.flush` makes a last, short step of the
waiting rows (the end of a finite pass). :func:`batch_em` is classic EM over a
window of rows, for comparison and to warm-start the online learner.

>>> from streambayes.models.bayesnet.bif import parse_bif
>>> from streambayes.models.bayesnet.sampling import forward_sample
>>> net = parse_bif('''variable z { type discrete [ 2 ] { a, b }; }
... variable x { type discrete [ 2 ] { yes, no }; }
... probability ( z ) { table 0.3, 0.7; }
... probability ( x | z ) { (a) 0.9, 0.1; (b) 0.2, 0.8; }''')
>>> codes = forward_sample(net, 2000, seed=0)
>>> codes[::3, 0] = -1                      # a third of z missing
>>> em = OnlineEM(net, alpha=0.7, batch_size=200, seed=0).partial_fit(codes)
>>> em.n_rows, em.n_steps
(2000.0, 10)
>>> em.partial_fit(codes[:150]).n_steps, len(em.pending_w)   # 150 rows wait for the next 50
(10, 150)
>>> bool(abs(em.cpts["x"][0, 0] - 0.9) < 0.05)
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np

from streambayes.errors import ModelError, NetworkError
from streambayes.models.bayesnet.counts import cpts_from_counts, dirichlet
from streambayes.models.bayesnet.inference import VariableElimination
from streambayes.models.bayesnet.network import Network
from streambayes.stats import event_weights

Engine = Callable[[Network], object]   # Network → object with expected_counts / log_likelihood_many


def initial_cpts(net: Network, init="random", seed=None) -> dict[str, np.ndarray]:
    """Starting CPTs: ``"random"`` (every column ~ Dirichlet(1), seeded — this breaks the symmetry
    between the states of a hidden variable, which uniform CPTs would never break), ``"file"``
    (the network's own CPTs), or a mapping / Network of given CPTs (checked by ``set_cpt``)."""
    shell = net.structure_copy()
    if isinstance(init, str) and init == "random":
        rng = np.random.default_rng(seed)
        for v in shell.variables:
            shape = shell.family_shape(v)
            cols = rng.dirichlet(np.ones(shape[0]), size=int(np.prod(shape[1:])))   # (q, r)
            shell.set_cpt(v, cols.T.reshape(shape))
        return shell.cpts
    given = net.cpts if isinstance(init, str) and init == "file" else \
        init.cpts if isinstance(init, Network) else init
    if not isinstance(given, Mapping):
        raise ModelError(f"init must be 'random', 'file', a Network or {{variable: cpt}}, got {init!r}")
    for v in shell.variables:
        if v not in given:
            raise NetworkError(f"init has no CPT for {v!r}")
        shell.set_cpt(v, given[v])
    return shell.cpts


def _network(net: Network, cpts: Mapping[str, np.ndarray]) -> Network:
    shell = net.structure_copy()
    shell.cpts = dict(cpts)          # already validated / normalised by construction
    return shell


def tables_state(prefix: str, tables: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Family-shaped tables as snapshot arrays ``{prefix}:{variable}``."""
    return {f"{prefix}:{v}": t.copy() for v, t in tables.items()}


def tables_from_state(net: Network, state: Mapping[str, np.ndarray], prefix: str,
                      owner: str) -> dict[str, np.ndarray]:
    """Inverse of :func:`tables_state`, checked against ``net``'s family shapes."""
    try:
        return {v: np.array(state[f"{prefix}:{v}"], np.float64).reshape(net.family_shape(v))
                for v in net.variables}
    except (KeyError, ValueError) as exc:
        raise ModelError(f"{owner} state does not fit the network: {exc}") from exc


def _weights(codes: np.ndarray, w) -> np.ndarray:
    return event_weights(None if w is None else np.asarray(w, np.float64).reshape(-1), len(codes))


class OnlineEM:
    """Stepwise EM on mini-batches of rows (codes, -1 = missing or hidden).

    ``prior``/``equivalent_sample_size``: the Dirichlet prior of the M-step (``"bdeu"``, ``"k2"``,
    ``"none"`` or pseudo-counts, see :func:`counts.dirichlet`); ``alpha``: step-size exponent in
    (0.5, 1] (1 = the running average of all batches, smaller forgets the early, poorly-estimated
    batches faster); ``batch_size``: rows per E-step; ``init``: see :func:`initial_cpts`;
    ``inference``: the exact-inference engine factory (default :class:`VariableElimination`).

    Rows that do not fill a mini-batch wait in ``pending_codes``/``pending_w`` (at most
    ``batch_size - 1`` rows, saved by :meth:`to_state`); the CPTs do not reflect them until their
    mini-batch is full (or :meth:`flush` is called).

    With ``prior="none"`` a state never seen so far gets probability 0, and a later row that needs
    it has probability 0 under the current CPTs: such rows cannot contribute an E-step, are skipped
    and counted in ``n_impossible`` (a positive prior such as BDeu avoids this; prefer it on streams).
    """

    def __init__(self, net: Network, prior="bdeu", equivalent_sample_size: float = 1.0, alpha: float = 0.7,
                 batch_size: int = 500, init="random", seed=None, inference: Engine | None = None) -> None:
        if not 0.5 < alpha <= 1.0:
            raise ModelError(f"alpha must be in (0.5, 1] for stepwise EM to converge, got {alpha}")
        if int(batch_size) < 1:
            raise ModelError(f"batch_size must be >= 1, got {batch_size}")
        self.net = net.structure_copy()
        self.prior, self.equivalent_sample_size = prior, equivalent_sample_size
        self.alpha, self.batch_size, self.init, self.seed = alpha, int(batch_size), init, seed
        self.inference = inference or VariableElimination
        self.pseudo = dirichlet(self.net, prior, equivalent_sample_size)
        self.cpts = initial_cpts(net, init, seed)
        self.stats = {v: np.zeros(self.net.family_shape(v)) for v in self.net.variables}
        self.n_rows = 0.0
        self.n_steps = 0
        self.n_impossible = 0      # rows skipped because they had probability 0 under the current CPTs
        self.pending_codes = np.zeros((0, len(self.net.variables)), np.int64)  # rows short of a mini-batch
        self.pending_w = np.zeros(0, np.float64)

    def partial_fit(self, codes: np.ndarray, w=None) -> OnlineEM:
        """One stepwise-EM update per full mini-batch of ``batch_size`` rows, in order; the rows
        waiting from earlier calls come first, the rows short of a mini-batch wait for the next."""
        codes = np.asarray(codes, np.int64).reshape(-1, self.pending_codes.shape[1])
        w = _weights(codes, w)
        if len(self.pending_w):
            codes = np.concatenate([self.pending_codes, codes])
            w = np.concatenate([self.pending_w, w])
        full = len(codes) - len(codes) % self.batch_size
        for start in range(0, full, self.batch_size):   # fresh contiguous copies: same bits per chunk
            self._step(codes[start:start + self.batch_size].copy(), w[start:start + self.batch_size].copy())
        self.pending_codes, self.pending_w = codes[full:].copy(), w[full:].copy()
        return self

    def flush(self) -> OnlineEM:
        """Make one (short) step of the waiting rows, if any: the end of a finite pass."""
        if len(self.pending_w):
            codes, w = self.pending_codes, self.pending_w
            self.pending_codes, self.pending_w = codes[:0].copy(), w[:0].copy()
            self._step(codes, w)
        return self

    def step_size(self, k: int) -> float:
        """η_k = (k + 2)^(−α) for k ≥ 1; the first update (k = 0) has nothing to interpolate with,
        so it takes η_0 = 1 (s starts as the first batch's statistics)."""
        return 1.0 if k == 0 else float((k + 2) ** -self.alpha)

    def _step(self, codes: np.ndarray, w: np.ndarray) -> None:
        total = float(w.sum())
        if not total > 0:
            return
        # 1. E-step: ŝ = expected family counts of the batch under the current CPTs, per unit weight
        engine = self.inference(_network(self.net, self.cpts))
        try:
            expected = engine.expected_counts(codes, w)
        except NetworkError:        # rows impossible under the current CPTs (zeros of prior "none")
            possible = np.isfinite(engine.log_likelihood_many(codes))
            self.n_impossible += int((~possible).sum())
            codes, w = codes[possible], w[possible]
            total = float(w.sum())
            if not total > 0:
                return
            expected = engine.expected_counts(codes, w)
        # 2. step size
        eta = self.step_size(self.n_steps)
        # 3. interpolate the averaged statistics
        for v, s in self.stats.items():
            s *= 1.0 - eta
            s += eta * (expected[v] / total)
        self.n_rows += total
        self.n_steps += 1
        # 4. M-step: posterior mean, statistics scaled to the rows seen (the prior weighs as in a batch fit)
        scaled = {v: s * self.n_rows for v, s in self.stats.items()}
        self.cpts = cpts_from_counts(self.net, scaled, self.pseudo)

    def network(self) -> Network:
        """A Network with the current CPTs (ready for inference)."""
        return _network(self.net, self.cpts)

    # -- state: arrays only --------------------------------------------------------------------
    def to_state(self) -> dict[str, np.ndarray]:
        state = tables_state("stats", self.stats) | tables_state("cpts", self.cpts)
        state["n_rows"] = np.array(self.n_rows)
        state["n_steps"] = np.array(self.n_steps, np.int64)
        state["n_impossible"] = np.array(self.n_impossible, np.int64)
        state["pending_codes"] = self.pending_codes.copy()
        state["pending_w"] = self.pending_w.copy()
        return state

    @classmethod
    def from_state(cls, net: Network, state: Mapping[str, np.ndarray], **params) -> OnlineEM:
        """Rebuild from :meth:`to_state`; ``params`` are the constructor's hyperparameters."""
        em = cls(net, **params)
        em.stats = tables_from_state(em.net, state, "stats", "OnlineEM")
        em.cpts = tables_from_state(em.net, state, "cpts", "OnlineEM")
        em.n_rows = float(state["n_rows"])
        em.n_steps = int(state["n_steps"])
        em.n_impossible = int(state.get("n_impossible", 0))
        if "pending_w" in state:   # states from before the carried mini-batch have none
            em.pending_codes, em.pending_w = _pending_from_state(em, state)
        return em


def _pending_from_state(em: OnlineEM, state: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The waiting rows of a state, checked: codes (k, V) in range (or -1), k weights, k < batch size."""
    codes, w = np.asarray(state["pending_codes"]), np.asarray(state["pending_w"])
    cards = np.array([em.net.card(v) for v in em.net.variables])
    if codes.dtype.kind not in "iu" or w.dtype.kind != "f" or codes.ndim != 2 or w.ndim != 1 \
            or codes.shape != (len(w), len(cards)) or len(w) >= em.batch_size:
        raise ModelError(f"OnlineEM state: pending rows of shape {codes.shape} and weights {w.shape} do not "
                         f"fit {len(cards)} variables and batch size {em.batch_size}")
    if len(w) and (((codes < -1) | (codes >= cards)).any() or not np.isfinite(w).all() or (w < 0).any()):
        raise ModelError("OnlineEM state: a pending row has a state code out of range or a bad weight")
    return codes.astype(np.int64), w.astype(np.float64)


class BatchEMResult(NamedTuple):
    cpts: dict[str, np.ndarray]
    log_likelihoods: list[float]     # Σ_rows w · log P(row) before each M-step
    n_iter: int
    converged: bool


def batch_em(net: Network, codes: np.ndarray, w=None, max_iter: int = 100, tol: float = 1e-6, init="random",
             prior="bdeu", equivalent_sample_size: float = 1.0, seed=None,
             inference: Engine | None = None) -> BatchEMResult:
    """Classic EM over a window of rows (Dempster, Laird & Rubin 1977), repeated until convergence.

    Per iteration:
    1. E-step: expected family counts of all rows under the current CPTs, and the data
       log-likelihood Σ w · log P(row) of those CPTs;
    2. convergence: stop when the log-likelihood rose by less than ``tol`` · |log-likelihood|
       (EM never decreases it, up to the prior's pull);
    3. M-step: CPTs = normalise(expected counts + pseudo-counts).
    """
    codes = np.asarray(codes, np.int64)
    w = _weights(codes, w)
    engine_of = inference or VariableElimination
    shell = net.structure_copy()
    pseudo = dirichlet(shell, prior, equivalent_sample_size)
    cpts = initial_cpts(net, init, seed)
    history: list[float] = []
    for it in range(1, max_iter + 1):
        engine = engine_of(_network(shell, cpts))
        expected = engine.expected_counts(codes, w)                        # 1.
        history.append(float(w @ engine.log_likelihood_many(codes)))
        if len(history) > 1 and history[-1] - history[-2] < tol * abs(history[-1]):   # 2.
            return BatchEMResult(cpts, history, it - 1, True)
        cpts = cpts_from_counts(shell, expected, pseudo)                    # 3.
    return BatchEMResult(cpts, history, max_iter, False)
