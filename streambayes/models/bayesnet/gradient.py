"""Gradient ascent on CPT entries, for networks with hidden variables (Russell, Binder, Koller &
Kanazawa 1995, "Local learning in probabilistic networks with hidden variables", IJCAI; reference 000,
Mitchell §6.11.5).

With w_ijk = P(Y_i = y_ij | U_i = u_ik) the CPT entries, the gradient of the log-likelihood is

    ∂ ln P(D) / ∂ w_ijk = Σ_{d ∈ D} P(y_ij, u_ik | d) / w_ijk,

whose numerator is exactly the EM expected family count (:meth:`VariableElimination.expected_counts`).
One step of :class:`GradientLearner` on a mini-batch:

1. E-step: E_ijk = Σ_d w_d P(y_ij, u_ik | d); gradient g_ijk = E_ijk / w_ijk, divided by the
   batch weight (so ``learning_rate`` does not depend on the batch size);
2. direction (``update``):
   ``"project"`` (default) — g projected onto the constraint surface Σ_j w_ijk = 1 (the column
   mean of g subtracted), as Russell et al. do; Σ g·δ = η(Σ g² − (Σ g)²/r) ≥ 0, an ascent direction.
   ``"natural"`` — the same in the Fisher metric of the simplex: δ_ijk = η (E_ijk − w_ijk Σ_j' E_ij'k)
   (per unit batch weight), i.e. a step of length η·P(u_ik) towards the EM update; well conditioned
   when some w are tiny, where g = E/w explodes.
   ``"renormalise"`` — reference 000 literally: add η·g, then renormalise. That is *not* always an
   ascent direction (w = (0.9, 0.1), E = (2.7, 0.1): renormalising moves w_1 down although the
   optimum is 0.96); kept for comparison.
3. w ← w + δ, with δ scaled down per column so that no entry moves by more than ``max_step``
   (a trust region: g ∝ 1/w is huge near the boundary, and an uncapped step oscillates);
4. clip every entry to at least ``floor`` (> 0: the gradient divides by w, and an entry at 0 could
   never come back) and renormalise each column, which keeps w in the simplex.

>>> from streambayes.models.bayesnet.bif import parse_bif
>>> from streambayes.models.bayesnet.sampling import forward_sample
>>> net = parse_bif('''variable z { type discrete [ 2 ] { a, b }; }
... variable x { type discrete [ 2 ] { yes, no }; }
... probability ( z ) { table 0.3, 0.7; }
... probability ( x | z ) { (a) 0.9, 0.1; (b) 0.2, 0.8; }''')
>>> codes = forward_sample(net, 4000, seed=0)
>>> g = GradientLearner(net, learning_rate=0.05, batch_size=100, init="random", seed=1).partial_fit(codes)
>>> bool(abs(g.cpts["z"][0] - 0.3) < 0.05)
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np

from streambayes.errors import ModelError
from streambayes.models.bayesnet.em import (
    Engine,
    _network,
    _weights,
    initial_cpts,
    tables_from_state,
    tables_state,
)
from streambayes.models.bayesnet.inference import VariableElimination
from streambayes.models.bayesnet.network import Network


class GradientLearner:
    """Online gradient ascent on the CPT entries of a network (rows of codes, -1 = missing/hidden)."""

    def __init__(self, net: Network, learning_rate: float = 0.01, batch_size: int = 100, floor: float = 1e-6,
                 max_step: float = 0.1, update: Literal["project", "natural", "renormalise"] = "project",
                 init="random", seed=None, inference: Engine | None = None) -> None:
        if not learning_rate > 0 or not 0 < floor < 1 or int(batch_size) < 1 or not 0 < max_step <= 1:
            raise ModelError("GradientLearner needs learning_rate > 0, 0 < floor < 1, 0 < max_step <= 1 "
                             "and batch_size >= 1")
        if update not in ("project", "natural", "renormalise"):
            raise ModelError(f"update must be 'project', 'natural' or 'renormalise', got {update!r}")
        self.net = net.structure_copy()
        self.learning_rate, self.batch_size, self.max_step = learning_rate, int(batch_size), max_step
        self.floor, self.update = floor, update
        self.init, self.seed = init, seed
        self.inference = inference or VariableElimination
        self.cpts = initial_cpts(net, init, seed)
        self.n_rows = 0.0
        self.n_steps = 0

    def partial_fit(self, codes: np.ndarray, w=None) -> GradientLearner:
        """One gradient step per mini-batch of ``batch_size`` rows."""
        codes = np.asarray(codes, np.int64)
        w = _weights(codes, w)
        for start in range(0, len(codes), self.batch_size):
            self.step(codes[start:start + self.batch_size], w[start:start + self.batch_size])
        return self

    def gradient(self, codes: np.ndarray, w=None) -> dict[str, np.ndarray]:
        """∂ ln P(rows) / ∂ w_ijk = Σ_d w_d P(y_ij, u_ik | d) / w_ijk (unprojected, not averaged)."""
        codes = np.asarray(codes, np.int64)
        expected = self.inference(self.network()).expected_counts(codes, _weights(codes, w))
        return {v: expected[v] / self.cpts[v] for v in self.cpts}

    def step(self, codes: np.ndarray, w=None) -> None:
        """One ascent step on a batch (steps 1–4 of the module docstring)."""
        w = _weights(np.asarray(codes), w)
        total = float(w.sum())
        if not total > 0:
            return
        grad = self.gradient(codes, w)                                         # 1.
        new = {}
        for v, g in grad.items():
            w_v = self.cpts[v]
            delta = self.learning_rate * self._direction(g / total, w_v)         # 2.
            if self.update != "renormalise":                                    # 3. trust region
                biggest = np.abs(delta).max(axis=0, keepdims=True)
                delta *= np.minimum(1.0, self.max_step / np.maximum(biggest, 1e-300))
            table = np.maximum(w_v + delta, self.floor)                         # 4.
            new[v] = table / table.sum(axis=0, keepdims=True)
        self.cpts = new
        self.n_rows += total
        self.n_steps += 1

    def _direction(self, g: np.ndarray, w: np.ndarray) -> np.ndarray:
        if self.update == "project":
            return g - g.mean(axis=0, keepdims=True)
        if self.update == "natural":
            expected = g * w                                                    # E / batch weight
            return expected - w * expected.sum(axis=0, keepdims=True)
        return g

    def network(self) -> Network:
        """A Network with the current CPTs (ready for inference)."""
        return _network(self.net, self.cpts)

    def to_state(self) -> dict[str, np.ndarray]:
        state = tables_state("cpts", self.cpts)
        state["n_rows"] = np.array(self.n_rows)
        state["n_steps"] = np.array(self.n_steps, np.int64)
        return state

    @classmethod
    def from_state(cls, net: Network, state: Mapping[str, np.ndarray], **params) -> GradientLearner:
        """Rebuild from :meth:`to_state`; ``params`` are the constructor's hyperparameters."""
        learner = cls(net, **params)
        learner.cpts = tables_from_state(learner.net, state, "cpts", "GradientLearner")
        learner.n_rows = float(state["n_rows"])
        learner.n_steps = int(state["n_steps"])
        return learner
