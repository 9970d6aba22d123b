"""Exact inference by variable elimination (Zhang & Poole 1994; Koller & Friedman 2009, ch. 9).

A factor is ``(scope, array)``; evidence is applied by *indexing* the CPT axes of the observed
variables with the evidence codes of a whole batch of rows at once, so a factor that touches
evidence carries a leading batch axis (``...`` in the einsum subscripts) and every later product
and sum is vectorised over the rows. Per (query variables, evidence variables) *shape* a plan is
built once and cached:

1. prune barren nodes: keep only the query and evidence variables and their ancestors;
2. order the eliminated variables by min-fill on the interaction graph (ties: smaller clique
   weight, then network order);
3. eliminating X = one einsum over the factors that contain X, summing X out; steps whose inputs
   do not depend on the evidence are computed once, when the plan is built.

In these batched paths, parts of the factor graph cut off from the query by the evidence are still
eliminated: they do not change the posterior, but one of them may carry probability zero, which
must raise. Single queries (``query``) prune them instead (see ``oneoff``).

Scaling: products are computed in probability space (float64) and every evidence-dependent
intermediate factor is divided by its per-row maximum, the logarithms of the divisors being
summed, so long products cannot underflow and ``log P(evidence)`` stays exact.

The engine reads ``net.cpts`` once, at construction: build a new one after changing CPTs.

>>> from streambayes.models.bayesnet.bif import parse_bif
>>> net = parse_bif('''variable rain { type discrete [ 2 ] { yes, no }; }
... variable wet { type discrete [ 2 ] { yes, no }; }
... probability ( rain ) { table 0.2, 0.8; }
... probability ( wet | rain ) { (yes) 0.9, 0.1; (no) 0.1, 0.9; }''')
>>> VariableElimination(net).query(["rain"], {"wet": "yes"}).round(4).tolist()
[0.6923, 0.3077]
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence

import numpy as np

from streambayes.errors import NetworkError
from streambayes.models.bayesnet.network import Network
from streambayes.models.bayesnet.oneoff import OneOffQueries

_LETTERS = string.ascii_letters
JOINT_LIMIT = 4096  # largest joint of the unobserved variables enumerated directly (expected counts)


class _Plan:
    """The cached elimination for one (query, evidence variables) shape."""

    def __init__(self, factors, steps, final, order) -> None:
        self.factors = factors  # [(slot, transposed cpt, evidence positions)] evidence-dependent leaves
        self.steps = steps      # [(input slots, einsum subscripts, output slot)]
        self.final = final      # (input slots, subscripts, batched): the product over the query axes
        self.order = order      # the elimination order (variable names)
        self.consts: dict[int, np.ndarray] = {}


class VariableElimination:
    """Exact queries, batched posteriors, log-likelihoods and EM expected counts on a Network."""

    def __init__(self, net: Network) -> None:
        missing = [v for v in net.states if v not in net.cpts]
        if missing:
            raise NetworkError(f"variable elimination needs every CPT; missing {missing}")
        self.net = net
        self.cpts = {v: np.asarray(net.cpts[v], np.float64) for v in net.states}
        with np.errstate(divide="ignore"):
            self.log_cpts = {v: np.log(t).ravel() for v, t in self.cpts.items()}
        self.families = {v: (v, *net.parents[v]) for v in net.states}
        self.strides = {v: [int(np.prod(t.shape[a + 1:])) for a in range(t.ndim)]
                        for v, t in self.cpts.items()}
        self.ancestors = {v: self._ancestors(v) for v in net.states}
        self._plans: dict[tuple, _Plan] = {}
        self._patterns: dict[bytes, tuple] = {}
        self.plans_built = 0  # how many elimination orders were computed (cache misses)
        self._oneoff: OneOffQueries | None = None  # single queries: pruned, one global order

    def _ancestors(self, v: str) -> set[str]:
        seen, stack = set(), list(self.net.parents[v])
        while stack:
            u = stack.pop()
            if u not in seen:
                seen.add(u)
                stack.extend(self.net.parents[u])
        return seen

    # -- public queries -------------------------------------------------------------------------
    def query(self, variables: Sequence[str], evidence: Mapping[str, str] | None = None) -> np.ndarray:
        """P(variables | evidence), the joint in the given variable order, normalised.

        Single queries go through ``OneOffQueries`` (barren and d-separated parts pruned, one
        global elimination order, no per-shape plan); batches of rows use the cached plans.
        """
        variables, evidence = list(variables), dict(evidence or {})
        self._check_names(variables, evidence)
        return self.query_codes(variables, {v: self.net.state_index[v][s] for v, s in evidence.items()})

    def query_codes(self, variables: list[str], evidence: Mapping[str, int]) -> np.ndarray:
        """:meth:`query` with the evidence as state codes, its names checked by the caller
        (``BayesNet.query`` has them as codes already: no round trip through the state names)."""
        if self._oneoff is None:
            self._oneoff = OneOffQueries(self.net, self.cpts)
        found = self._oneoff.query(variables, evidence)
        if found is not None:
            return found
        ev_vars = tuple(sorted(evidence, key=self.net.index.get))  # tiny products: the scaled engine
        codes = np.array([[evidence[v] for v in ev_vars]], np.int64)
        table, _ = self._run(self._plan(tuple(variables), ev_vars), codes)
        total = table.sum()
        if not total > 0:
            named = {v: self.net.states[v][c] for v, c in evidence.items()}
            raise NetworkError(f"evidence {named} has probability zero")
        return table[0] / total

    def posterior_many(self, variable: str, codes: np.ndarray) -> np.ndarray:
        """P(variable | each row's observed values), shape (n, |variable|); codes -1 = unobserved.

        The variable's own column is ignored. Rows with the same set of observed variables share
        one vectorised elimination. A row of probability zero raises NetworkError naming it.
        """
        self._check_names([variable], {})
        codes = self._codes(codes)
        mask = codes >= 0
        mask[:, self.net.index[variable]] = False
        out = np.empty((len(codes), self.net.card(variable)))
        for observed, rows in _groups(mask):
            ev_vars = tuple(v for v, o in zip(self.net.states, observed, strict=True) if o)
            ev_codes = codes[np.ix_(rows, [self.net.index[v] for v in ev_vars])]
            table, _ = self._run(self._plan((variable,), ev_vars), ev_codes)
            total = table.sum(axis=1)
            bad = np.flatnonzero(~(total > 0))
            if bad.size:
                raise NetworkError(f"row {int(rows[bad[0]])}: the evidence has probability zero")
            out[rows] = table / total[:, None]
        return out

    def log_likelihood_many(self, codes: np.ndarray) -> np.ndarray:
        """log P(observed values) of each row, marginalising the unobserved ones (shape (n,)).

        ``-inf`` marks a row that is impossible under the network; a row with nothing observed
        scores 0. Small unobserved joints are enumerated, larger ones go through elimination.
        """
        codes = self._codes(codes)
        out = self._observed_family_logp(codes)
        for observed, rows in _groups(codes >= 0):
            pattern = self._pattern(observed)
            if pattern is not None:
                logp = self._joint_log(pattern, codes[rows])
                peak = logp.max(axis=1)
                with np.errstate(invalid="ignore", divide="ignore"):
                    out[rows] += np.where(np.isfinite(peak), peak + np.log(
                        np.exp(logp - peak[:, None]).sum(axis=1)), -np.inf)
                continue
            out[rows] = 0.0  # elimination gives the whole log P(e); drop the observed-family part
            ev_vars = tuple(v for v, o in zip(self.net.states, observed, strict=True) if o)
            table, scale = self._run(self._plan((), ev_vars), codes[np.ix_(rows, np.flatnonzero(observed))])
            with np.errstate(divide="ignore"):
                out[rows] = np.log(table.reshape(len(rows))) + scale
        return out

    def expected_counts(self, codes: np.ndarray, w: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Σ_rows w · P(v, parents(v) | row's observed values), family-shaped: the EM E-step.

        1. families observed in full in a row add w to their observed cell (one bincount each);
        2. rows are grouped by their set of unobserved variables U; when the joint of U is small
           (≤ JOINT_LIMIT configurations) P(U | row) is enumerated from the families touching U,
           and each touched family adds w · P(U | row) at the cells of the configurations;
        3. otherwise each touched family's unobserved members are queried by batched elimination.
        A row of probability zero raises NetworkError naming it.
        """
        codes = self._codes(codes)
        w = np.ones(len(codes)) if w is None else np.asarray(w, np.float64)
        counts = {}
        full = codes >= 0
        for v, fam in self.families.items():  # step 1
            size = int(np.prod(self.cpts[v].shape))
            rows = np.flatnonzero(full[:, [self.net.index[u] for u in fam]].all(axis=1))
            flat = self._flat_index(v, codes[rows], {})
            counts[v] = np.bincount(flat, w[rows], size).astype(np.float64)
        for observed, rows in _groups(full):
            if observed.all():
                continue
            pattern = self._pattern(observed)
            if pattern is None:  # step 3
                self._counts_by_elimination(observed, codes, rows, w, counts)
                continue
            flats: dict[str, np.ndarray] = {}  # step 2
            logp = self._joint_log(pattern, codes[rows], flats)
            q = np.exp(logp - logp.max(axis=1, keepdims=True))
            total = q.sum(axis=1, keepdims=True)
            bad = np.flatnonzero(~(total[:, 0] > 0))
            if bad.size:
                raise NetworkError(f"row {int(rows[bad[0]])}: the evidence has probability zero")
            q = (q * (w[rows, None] / total)).ravel()
            for v, flat in flats.items():
                counts[v] += np.bincount(np.broadcast_to(flat, logp.shape).ravel(), q, counts[v].size)
        return {v: c.reshape(self.cpts[v].shape) for v, c in counts.items()}

    # -- expected counts and likelihood helpers ---------------------------------------------------
    def _flat_index(self, v: str, rows: np.ndarray, cols: Mapping[str, np.ndarray]) -> np.ndarray:
        """Flat CPT index of family v: observed members from rows[..., column], others from cols."""
        flat = 0
        for stride, u in zip(self.strides[v], self.families[v], strict=True):
            flat = flat + stride * (cols[u] if u in cols else rows[..., self.net.index[u]])
        return np.asarray(flat, np.int64)

    def _pattern(self, observed: np.ndarray):
        """(unobserved names, their configurations (K, |U|), touched families) or None if K is big."""
        key = observed.tobytes()
        if key not in self._patterns:
            unobserved = [v for v, o in zip(self.net.states, observed, strict=True) if not o]
            cards = [self.net.card(v) for v in unobserved]
            if int(np.prod(cards, dtype=np.float64)) > JOINT_LIMIT:
                self._patterns[key] = None
            else:
                configs = _configs(cards)
                touched = [v for v, fam in self.families.items() if set(fam) & set(unobserved)]
                self._patterns[key] = (unobserved, configs, touched)
        return self._patterns[key]

    def _joint_log(self, pattern, rows: np.ndarray, flats: dict | None = None) -> np.ndarray:
        """log P(U = each configuration, observed values of the touched families), shape (n, K).

        The flat CPT indices of the touched families are left in ``flats`` when it is given.
        """
        unobserved, configs, touched = pattern
        cols = {u: configs[None, :, k] for k, u in enumerate(unobserved)}
        logp = np.zeros((len(rows), len(configs)))
        for v in touched:
            flat = self._flat_index(v, rows[:, None, :], cols)
            logp += self.log_cpts[v][flat]
            if flats is not None:
                flats[v] = flat
        return logp

    def _observed_family_logp(self, codes: np.ndarray) -> np.ndarray:
        """Σ log P(x_v | x_parents) over the families observed in full in each row."""
        out = np.zeros(len(codes))
        for v, fam in self.families.items():
            rows = np.flatnonzero((codes[:, [self.net.index[u] for u in fam]] >= 0).all(axis=1))
            out[rows] += self.log_cpts[v][self._flat_index(v, codes[rows], {})]
        return out

    def _counts_by_elimination(self, observed, codes, rows, w, counts) -> None:
        ev_vars = tuple(v for v, o in zip(self.net.states, observed, strict=True) if o)
        ev_codes = codes[np.ix_(rows, np.flatnonzero(observed))]
        for v, fam in self.families.items():
            hidden = tuple(u for u in fam if not observed[self.net.index[u]])
            if not hidden:
                continue
            table, _ = self._run(self._plan(hidden, ev_vars), ev_codes)
            table = table.reshape(len(rows), -1)
            total = table.sum(axis=1, keepdims=True)
            bad = np.flatnonzero(~(total[:, 0] > 0))
            if bad.size:
                raise NetworkError(f"row {int(rows[bad[0]])}: the evidence has probability zero")
            q = table * (w[rows, None] / total)
            configs = _configs([self.net.card(u) for u in hidden])
            cols = {u: configs[None, :, k] for k, u in enumerate(hidden)}
            flat = self._flat_index(v, codes[rows][:, None, :], cols)
            counts[v] += np.bincount(np.broadcast_to(flat, q.shape).ravel(), q.ravel(), counts[v].size)

    # -- elimination ------------------------------------------------------------------------------
    def _plan(self, query: tuple[str, ...], ev_vars: tuple[str, ...]) -> _Plan:
        key = (query, ev_vars)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._build_plan(query, ev_vars)
            self.plans_built += 1
        return plan

    def _build_plan(self, query: tuple[str, ...], ev_vars: tuple[str, ...]) -> _Plan:
        evset = set(ev_vars)
        keep = set(query) | evset
        for v in list(keep):
            keep |= self.ancestors[v]
        scopes = []  # (variable, free scope)
        for v in self.net.order:  # 1. barren nodes pruned
            if v in keep:
                scopes.append((v, tuple(u for u in self.families[v] if u not in evset)))
        order = _min_fill([s for _, s in scopes], set(query), self.net)  # 2.
        plan = _Plan([], [], None, order)
        slots = []  # (slot id, scope, depends on evidence)
        for i, (v, free) in enumerate(scopes):
            fam = self.families[v]
            ev_axes = [a for a, u in enumerate(fam) if u in evset]
            if ev_axes:
                perm = ev_axes + [a for a, u in enumerate(fam) if u not in evset]
                positions = [ev_vars.index(fam[a]) for a in ev_axes]
                plan.factors.append((i, np.transpose(self.cpts[v], perm), positions))
            else:
                plan.consts[i] = self.cpts[v]
            slots.append((i, free, bool(ev_axes)))
        next_id = len(slots)
        for x in order:  # 3. eliminate x: one einsum over the factors that contain it
            inputs = [s for s in slots if x in s[1]]
            slots = [s for s in slots if x not in s[1]]
            scope = tuple(dict.fromkeys(u for s in inputs for u in s[1] if u != x))
            subs = _subscripts([s[1] for s in inputs], scope)
            ids = [s[0] for s in inputs]
            if any(s[2] for s in inputs):
                plan.steps.append((ids, subs, next_id))
            else:
                plan.consts[next_id] = np.einsum(subs, *[plan.consts[i] for i in ids])
            slots.append((next_id, scope, any(s[2] for s in inputs)))
            next_id += 1
        plan.final = ([s[0] for s in slots], _subscripts([s[1] for s in slots], query),
                      any(s[2] for s in slots))
        return plan

    def _run(self, plan: _Plan, ev_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The unnormalised query table (n, *query cards) and the log of the scale divided out."""
        n = len(ev_codes)
        values = dict(plan.consts)
        for slot, table, positions in plan.factors:
            values[slot] = table[tuple(ev_codes[:, p] for p in positions)]
        log_scale = np.zeros(n)
        for ids, subs, out in plan.steps:  # every step here depends on the evidence: axis 0 = rows
            result = np.einsum(subs, *[values.pop(i) for i in ids])
            if result.size:
                peak = result.reshape(n, -1).max(axis=1)
                peak = np.where(peak > 0, peak, 1.0)
                result = result / peak.reshape((n,) + (1,) * (result.ndim - 1))
                with np.errstate(divide="ignore"):
                    log_scale += np.log(peak)
            values[out] = result
        ids, subs, batched = plan.final
        table = np.einsum(subs, *[values[i] for i in ids]) if ids else np.ones(())
        if not batched:
            table = np.broadcast_to(table, (n, *table.shape))
        return table, log_scale

    # -- validation -----------------------------------------------------------------------------
    def _check_names(self, variables: Sequence[str], evidence: Mapping[str, str]) -> None:
        for v in [*variables, *evidence]:
            if v not in self.net.states:
                raise NetworkError(f"unknown variable {v!r}; the network has {self.net.variables}")
        for v, s in evidence.items():
            if s not in self.net.state_index[v]:
                raise NetworkError(f"state {s!r} is not in the domain of {v!r}: {list(self.net.states[v])}")
        both = sorted(set(variables) & set(evidence))
        if both or len(set(variables)) != len(variables):
            raise NetworkError(f"query variables must be distinct and not in the evidence: "
                               f"{both or list(variables)}")

    def _codes(self, codes) -> np.ndarray:
        codes = np.asarray(codes, np.int64)
        if codes.ndim != 2 or codes.shape[1] != len(self.net.states):
            raise NetworkError(f"codes must have shape (n, {len(self.net.states)}), got {codes.shape}")
        cards = np.array([self.net.card(v) for v in self.net.states])
        bad = np.argwhere(codes >= cards)
        if bad.size:
            r, c = bad[0]
            raise NetworkError(f"row {r}: code {codes[r, c]} out of range for {self.net.variables[c]!r}")
        return codes


# -- graph helpers --------------------------------------------------------------------------------
def _groups(mask: np.ndarray):
    """(observed pattern, row indices) for each distinct row of a boolean mask."""
    if len(mask) == 0:
        return []
    patterns, inverse = np.unique(mask, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(patterns) + 1))
    return [(patterns[k], order[bounds[k]:bounds[k + 1]]) for k in range(len(patterns))]


def _configs(cards: list[int]) -> np.ndarray:
    """Every joint configuration of variables with these cardinalities, shape (Π cards, len)."""
    return np.indices(cards).reshape(len(cards), -1).T if cards else np.zeros((1, 0), np.int64)


def _min_fill(scopes: list[tuple[str, ...]], query: set[str], net: Network) -> list[str]:
    """Min-fill elimination order of the non-query variables (ties: clique weight, network order).

    Adjacency is kept as bitmasks; after eliminating x only the costs of x's neighbours and of
    their neighbours can change, so only those are recomputed.
    """
    names = sorted({u for s in scopes for u in s}, key=net.index.get)
    local = {u: i for i, u in enumerate(names)}
    adj = [0] * len(names)
    for scope in scopes:
        mask = sum(1 << local[u] for u in scope)
        for u in scope:
            adj[local[u]] |= mask & ~(1 << local[u])
    cards = [net.card(u) for u in names]

    def cost(i: int) -> tuple[int, float, int]:
        nb, fill, weight, rest = adj[i], 0, cards[i], adj[i]
        while rest:
            a = (rest & -rest).bit_length() - 1
            rest &= rest - 1
            fill += (nb & ~adj[a] & ~(1 << a)).bit_count()
            weight *= cards[a]
        return fill, weight, i

    costs = {i: cost(i) for i, u in enumerate(names) if u not in query}
    order = []
    while costs:
        x = min(costs, key=costs.__getitem__)
        del costs[x]
        order.append(names[x])
        nb, affected, rest = adj[x], 0, adj[x]
        while rest:
            a = (rest & -rest).bit_length() - 1
            rest &= rest - 1
            adj[a] = (adj[a] | nb) & ~(1 << a) & ~(1 << x)
            affected |= adj[a] | (1 << a)
        adj[x] = 0
        while affected:
            a = (affected & -affected).bit_length() - 1
            affected &= affected - 1
            if a in costs:
                costs[a] = cost(a)
    return order


def _subscripts(scopes: list[tuple[str, ...]], out: tuple[str, ...]) -> str:
    """einsum subscripts with a leading ``...`` (the batch of rows) on every operand."""
    letters: dict[str, str] = {}
    for u in [*(u for s in scopes for u in s), *out]:
        letters.setdefault(u, _LETTERS[len(letters)])
    ins = ",".join("..." + "".join(letters[u] for u in s) for s in scopes)
    return f"{ins}->...{''.join(letters[u] for u in out)}"
