"""One-off exact queries P(Q | e) whose evidence set changes every call (Koller & Friedman 2009, 9.7).

Nothing here is specific to one (query, evidence variables) shape, so a new shape costs no plan:

1. everything per network is prepared once: CPT arrays, parent/child bitmasks, ancestor bitmasks,
   and ONE global elimination order (min-fill on the whole moral graph), restricted per query;
2. barren nodes are pruned: only Q ∪ E and their ancestors A are kept (bitmask unions);
3. nodes d-separated from Q given E are pruned: the moral graph of A minus E is walked from Q and
   only the CPTs whose unobserved variables touch Q's connected part are kept (Lauritzen et al. 1990);
4. a kept variable whose ancestors hold no query or evidence variable and reach the rest only
   through it stands, with its ancestors, as its prior marginal P(v) (computed once);
5. each kept CPT is indexed by the evidence codes (a view), and bucket elimination runs in the
   global order, one ``np.einsum`` per eliminated variable.

A dropped CPT that is zero for every value of its unobserved variables (a deterministic CPT ruling
the evidence out) still raises; an impossibility spread over several CPTs of a part cut off from Q
is not looked for (the posterior of Q does not depend on that part): ``log_likelihood_many`` gives
P(e) exactly. Products that get tiny (below ``TINY``) are recomputed by the scaled, batched engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from streambayes.errors import NetworkError
from streambayes.models.bayesnet.network import Network

TINY = 1e-250  # a total below this is recomputed with per-step scaling


class OneOffQueries:
    """Pruned bucket elimination for single queries; build once per set of CPTs.

    Variables are numbered in the global elimination order, so a factor's bucket is the lowest bit
    of its hidden mask. Every factor gets an integer key (a CPT with its evidence codes, or a bucket's
    input keys), and bucket results are cached by key: sub-products that no evidence reaches (the
    prior marginals of the upper network, mostly) are computed once across queries. At ``max_cached``
    entries the cache is emptied and refilled.
    """

    def __init__(self, net: Network, cpts: Mapping[str, np.ndarray], max_cached: int = 100_000) -> None:
        order = _global_order(net)
        self.names = order
        self.states = net.states  # for naming the evidence in an error
        index = {v: i for i, v in enumerate(order)}
        self.index = index
        fams = [tuple(index[u] for u in (v, *net.parents[v])) for v in order]
        self.cpts = [np.asarray(cpts[v], np.float64) for v in order]
        self.family = fams
        self.fmask = [_mask(f) for f in fams]
        self.pmask = [_mask(f[1:]) for f in fams]
        children: list[list[int]] = [[] for _ in order]
        for i, fam in enumerate(fams):
            for p in fam[1:]:
                children[p].append(i)
        self.children = [[(1 << c, self.pmask[c]) for c in ch] for ch in children]
        self.anc = [0] * len(order)
        for v in net.order:  # parents first
            i = index[v]
            self.anc[i] = (1 << i) | _or(self.anc[p] for p in fams[i][1:])
        cmask = [0] * len(order)
        for i, fam in enumerate(fams):
            for p in fam[1:]:
                cmask[p] |= 1 << i
        self.reverse_topo = [index[v] for v in reversed(net.order)]
        self.strict = [self.anc[i] & ~(1 << i) for i in range(len(order))]
        self.outside = [_or(cmask[u] for u in _bits(self.strict[i])) & ~self.anc[i]
                        for i in range(len(order))]  # children of i's ancestors beside them
        self._marginals: dict[int, np.ndarray] = {}
        self.max_cached = max_cached
        self._plain = [(i, t, f, m, True)
                       for i, (t, f, m) in enumerate(zip(self.cpts, fams, self.fmask, strict=True))]
        self._cache: dict[tuple, tuple] = {}  # name -> (key, table, scope, scope mask, any nonzero)

    def query(self, variables: Sequence[str], evidence: Mapping[str, int],
              absorb: bool = True) -> np.ndarray | None:
        """The normalised joint of ``variables`` given evidence codes; None if the total is tiny.

        Raises NetworkError when the evidence has probability zero as far as this query sees it.
        """
        q = [self.index[v] for v in variables]
        ev = {self.index[v]: c for v, c in evidence.items()}
        qmask, emask = _mask(q), _mask(ev)
        keep = 0
        for i in (*q, *ev):
            keep |= self.anc[i]
        part = self._component(qmask, emask, keep)
        if absorb and len(self._cache) > self.max_cached:  # (never inside a query: keys stay unique)
            self._cache.clear()
        absorbed, marginal = self._absorbed(keep, qmask | emask) if absorb else (0, 0)
        buckets: dict[int, list] = {}
        final = []
        for i in _bits(keep & ~absorbed):
            fmask = self.fmask[i]
            if 1 << i & marginal:
                factor = self._marginal_leaf(i, ev)
            else:
                factor = self._leaf(i, ev) if fmask & emask else self._plain[i]
            if not factor[3] & part:
                if not factor[4]:
                    states = getattr(self, "states", None)  # (older pickles: codes)
                    named = {v: states[v][c] for v, c in evidence.items()} if states else dict(evidence)
                    raise NetworkError(f"evidence {named} has probability zero")
                continue
            hidden = factor[3] & ~qmask
            if hidden:
                buckets.setdefault(hidden & -hidden, []).append(factor)
            else:
                final.append(factor)
        while buckets:
            x = min(buckets)
            factor = self._eliminate(x.bit_length() - 1, buckets.pop(x))
            hidden = factor[3] & ~qmask
            if hidden:
                buckets.setdefault(hidden & -hidden, []).append(factor)
            else:
                final.append(factor)
        if len(final) == 1 and final[0][2] == tuple(q):
            table = final[0][1]
        else:
            table = _einsum(final, tuple(q))
        total = table.sum()
        if not total > (TINY if absorb else 0.0):  # (a prior marginal is never tiny in total)
            return None
        return table / total

    def _absorbed(self, keep: int, seen: int) -> tuple[int, int]:
        """(ancestors summed out in advance, the variables whose prior marginal stands for them):
        a kept variable v whose ancestors hold no query or evidence variable and have no kept
        child but v and each other contributes only P(v) (precomputed once)."""
        absorbed = marginal = 0
        for v in self.reverse_topo:  # children first: the largest such ancestor sets win
            bit = 1 << v
            if not bit & keep or bit & absorbed:
                continue
            up = self.strict[v]
            if up and not up & seen and not self.outside[v] & keep:
                absorbed |= up
                marginal |= bit
        return absorbed, marginal

    def _marginal_leaf(self, i: int, ev: Mapping[int, int]) -> tuple:
        """P(i) (no evidence), indexed by i's evidence code if it has one, as a factor."""
        name = (-1 - len(self.cpts) - i, ev.get(i, -1))
        found = self._cache.get(name)
        if found is None:
            prior = self._marginals.get(i)
            if prior is None:
                prior = self.query([self.names[i]], {}, absorb=False)
                if prior is None:
                    raise NetworkError(f"the CPTs give {self.names[i]!r} no probability at all")
                self._marginals[i] = prior
            table = prior[ev[i]] if i in ev else prior
            scope = () if i in ev else (i,)
            found = (len(self._cache) + len(self.cpts), table, scope, _mask(scope), bool(np.any(table)))
            self._cache[name] = found
        return found

    def _leaf(self, i: int, ev: Mapping[int, int]) -> tuple:
        """The CPT of i indexed by the evidence codes, as a factor (cached by name)."""
        fam = self.family[i]
        name = (-1 - i, *[ev.get(u, -1) for u in fam])  # buckets: (x >= 0, keys)
        found = self._cache.get(name)
        if found is None:
            table = self.cpts[i][tuple(ev.get(u, slice(None)) for u in fam)]
            scope = tuple(u for u in fam if u not in ev)
            found = (len(self._cache) + len(self.cpts), table, scope, _mask(scope), bool(table.any()))
            self._cache[name] = found
        return found

    def _eliminate(self, x: int, factors: list) -> tuple:
        """Multiply the factors of x's bucket and sum x out (cached by the inputs' keys)."""
        name = (x, *sorted(f[0] for f in factors))
        found = self._cache.get(name)
        if found is None:
            scope = tuple(dict.fromkeys(u for f in factors for u in f[2] if u != x))
            found = (len(self._cache) + len(self.cpts), _einsum(factors, scope), scope, _mask(scope), True)
            self._cache[name] = found
        return found

    def _component(self, qmask: int, emask: int, keep: int) -> int:
        """The variables joined to the query in the moral graph of ``keep`` once E is removed."""
        seen, stack = qmask, _bits(qmask)
        while stack:
            u = stack.pop()
            nb = self.pmask[u]
            for bit, parents in self.children[u]:
                if bit & keep:
                    nb |= bit | parents
            nb &= ~emask & ~seen
            if nb:
                seen |= nb
                stack.extend(_bits(nb))
        return seen


def _einsum(factors: list, out: tuple[int, ...]) -> np.ndarray:
    letters: dict[int, int] = {}
    args: list = []
    for _, table, scope, _, _ in factors:
        args += [table, [letters.setdefault(u, len(letters)) for u in scope]]
    if not args:
        return np.ones(())
    args.append([letters.setdefault(u, len(letters)) for u in out])
    return np.einsum(*args)


def _global_order(net: Network) -> list[str]:
    """One min-fill elimination order of the whole moral graph."""
    from streambayes.models.bayesnet.inference import _min_fill

    return _min_fill([(v, *net.parents[v]) for v in net.states], set(), net)


def _mask(items) -> int:
    return _or(1 << i for i in items)


def _or(masks) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out
