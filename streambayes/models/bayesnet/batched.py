"""Many posterior queries at once: one compiled contraction per query variable.

Evidence enters as indicator vectors λ_v (one per variable and query: all ones when ``v`` is
unobserved, one-hot on its state when observed), so P(q, e) = Σ Π_v P(v | pa(v)) λ_v(v) has the
same structure for every evidence set. For each query variable the elimination order (min-fill
on the moral graph, Kjærulff 1990) and the einsum steps are built once and cached; a batch of
queries about that variable is then one vectorised contraction with a leading batch axis. One
min-fill order of the whole network serves every query variable (skipping it).
Unlike per-shape variable elimination nothing is pruned, so no plan is ever rebuilt; a CPT
whose columns sum to 1 only to the file's rounding (≈1e-7 in some bnlearn files) then enters
through its column sums, where pruning would drop it: answers agree to that rounding.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence

import numpy as np

from streambayes.errors import NetworkError
from streambayes.models.bayesnet.network import Network

_LETTERS = string.ascii_letters


class BatchedQueries:
    """``posteriors(target, evidence_rows)`` for a fixed network (its CPTs at construction)."""

    def __init__(self, net: Network) -> None:
        if len(net.states) > len(_LETTERS) - 1:
            raise NetworkError(f"batched queries support up to {len(_LETTERS) - 1} variables")
        self.net = net
        self.letter = {v: _LETTERS[i + 1] for i, v in enumerate(net.states)}  # "a" is the batch axis
        self.cpts = [net.cpts[v] for v in net.states]
        self.plans: dict[str, list] = {}
        self.order = _min_fill(net, keep=None)  # one order for every target (the target is skipped)

    def posteriors(self, target: str, evidence: Sequence[Mapping[str, str]]) -> np.ndarray:
        """P(target | e_i) for each evidence dict: (n, |target|); impossible evidence raises."""
        net = self.net
        if target not in net.states:
            raise NetworkError(f"unknown variable {target!r}")
        n = len(evidence)
        lam = {v: np.ones((n, net.card(v))) for v in net.states}
        for i, ev in enumerate(evidence):
            for v, s in ev.items():
                if v == target:
                    raise NetworkError(f"{v!r} is both queried and given as evidence")
                code = net.state_index.get(v, {}).get(s) if v in net.states else None
                if code is None:
                    raise NetworkError(f"unknown evidence {v!r}={s!r}")
                lam[v][i] = 0.0
                lam[v][i, code] = 1.0
        joint = self._contract(target, [lam[v] for v in net.states])
        z = joint.sum(axis=1, keepdims=True)
        if np.any(z <= 0):
            bad = int(np.flatnonzero(z[:, 0] <= 0)[0])
            raise NetworkError(f"evidence of query {bad} has probability zero: {dict(evidence[bad])}")
        return joint / z

    def _contract(self, target: str, lams: list[np.ndarray]) -> np.ndarray:
        plan = self.plans.get(target)
        if plan is None:
            plan = self.plans[target] = self._plan(target)
        slots: list = [*self.cpts, *lams]
        for inputs, subscripts in plan:
            slots.append(np.einsum(subscripts, *(slots[i] for i in inputs)))
        return slots[-1]

    def _plan(self, target: str) -> list:
        """Einsum steps: eliminating X contracts every factor that mentions X."""
        net = self.net
        # scope = (variables in axis order, has the batch axis)
        scopes = {i: ((v, *net.parents[v]), False) for i, v in enumerate(net.states)}
        scopes |= {len(net.states) + i: ((v,), True) for i, v in enumerate(net.states)}
        next_id, steps = 2 * len(net.states), []
        for x in (v for v in self.order if v != target):
            used = [i for i, (vs, _) in scopes.items() if x in vs]
            out_vars = tuple(sorted(set().union(*(scopes[i][0] for i in used)) - {x}))
            batched = any(scopes[i][1] for i in used)
            steps.append((used, self._subscripts(used, scopes, out_vars, batched)))
            for i in used:
                del scopes[i]
            scopes[next_id] = (out_vars, batched)
            next_id += 1
        rest = list(scopes)
        steps.append((rest, self._subscripts(rest, scopes, (target,), True)))
        return steps

    def _subscripts(self, used, scopes, out_vars: tuple, batched: bool) -> str:
        def term(vs, b):
            return ("a" if b else "") + "".join(self.letter[v] for v in vs)
        inputs = ",".join(term(*scopes[i]) for i in used)
        return f"{inputs}->{term(out_vars, batched)}"


def _min_fill(net: Network, keep: str | None) -> list[str]:
    """Elimination order of every variable (but ``keep``): fewest fill-in edges first (ties:
    smallest clique weight, then network order) on the moral graph."""
    adj = {v: set(net.parents[v]) | set(net.children(v)) for v in net.states}
    for v in net.states:  # marry parents
        for p in net.parents[v]:
            adj[p] |= set(net.parents[v]) - {p}
    order, left = [], [v for v in net.states if v != keep]
    while left:
        def cost(v):
            nb = list(adj[v])
            fill = sum(1 for i, a in enumerate(nb) for b in nb[i + 1:] if b not in adj[a])
            weight = np.prod([net.card(u) for u in nb]) * net.card(v)
            return fill, weight, net.index[v]
        x = min(left, key=cost)
        nb = adj.pop(x)
        for a in nb:
            adj[a] |= nb - {a}
            adj[a].discard(x)
        left.remove(x)
        order.append(x)
    return order
