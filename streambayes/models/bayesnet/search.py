"""Structure learning of a Bayesian network from complete data codes.

- :func:`hill_climb`: greedy search over DAGs (add / remove / reverse one edge, keeping the graph
  acyclic), taking at each step the move of largest score gain, with an optional tabu list of
  recently undone moves; scores are decomposable (``scores.py``: BIC, AIC = the MDL form of
  reference 002, K2, BDeu), so a move re-scores only the one or two families it changes.
- :func:`k2`: Cooper & Herskovits (1992): along a node order, each node greedily takes the
  predecessor that most increases its family score, until none does or ``max_parents`` is reached.
- :func:`chow_liu`: maximum spanning tree on mutual information (Chow & Liu 1968), or TAN with a
  class variable as an extra parent of every node (Friedman, Geiger & Goldszmidt 1997), reusing
  the semi-naive learners' ``information`` and ``tan_parents``.

Hill climbing breaks ties by move kind (add, remove, reverse), then by the variable names in
sorted order, so equal data give the same structure in any column order; K2 follows its given
order. Results are ``{variable: tuple(parents)}``.
To re-learn on a window or snapshot while the stream is counted, build the new structure with
:func:`restructure` (CPTs of unchanged families are kept) and restart counting under it for the
families :func:`changed_families` lists.

>>> rng = np.random.default_rng(0)
>>> a = rng.integers(0, 2, 2000); b = (a ^ (rng.random(2000) < 0.1)).astype(int)
>>> st = {"a": ("0", "1"), "b": ("0", "1"), "c": ("0", "1")}
>>> codes = np.column_stack([a, b, rng.integers(0, 2, 2000)])
>>> hill_climb(codes, st)
{'a': (), 'b': ('a',), 'c': ()}
>>> structural_hamming_distance(chow_liu(codes, st), {"b": ("a",)})
1
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from streambayes.errors import NetworkError
from streambayes.models.bayesnet.network import Network
from streambayes.models.bayesnet.scores import FamilyScorer, check_codes, states_of
from streambayes.models.seminaive.structure import information, tan_parents

_KINDS = {"+": 0, "-": 1, "~": 2}
_DECIMALS = 9  # gains are compared rounded, so sums in another order stay ties


def _start_sets(scorer: FamilyScorer, start: Mapping[str, Iterable[str]] | None) -> list[set[int]]:
    """Parent sets by column from ``start`` (validated as a DAG over the known variables)."""
    start = dict(start or {})
    for v in start:
        scorer.column(v)
    Network(scorer.states, start)  # unknown parents and cycles raise NetworkError by name
    return [{scorer.index[p] for p in start.get(v, ())} for v in scorer.variables]


def _reachable(parents: list[set[int]]) -> np.ndarray:
    """reach[a, b]: a directed path a → … → b exists (a node reaches itself)."""
    d = len(parents)
    children: list[list[int]] = [[] for _ in range(d)]
    for v, ps in enumerate(parents):
        for p in ps:
            children[p].append(v)
    reach = np.zeros((d, d), bool)
    for a in range(d):
        stack = [a]
        while stack:
            x = stack.pop()
            if not reach[a, x]:
                reach[a, x] = True
                stack.extend(children[x])
    return reach


def _other_path(parents: list[set[int]], u: int, v: int) -> bool:
    """Is there a path u → … → v besides the edge u → v (reversing it would close a cycle)?"""
    stack, seen = [v], {v}
    while stack:  # walk up from v through parents, skipping the direct edge
        x = stack.pop()
        for p in parents[x]:
            if (x, p) == (v, u) or p in seen:
                continue
            if p == u:
                return True
            seen.add(p)
            stack.append(p)
    return False


def _moves(scorer: FamilyScorer, parents: list[set[int]], max_parents: int, tabu: deque):
    """Every legal (gain, kind, u, v) move: add / remove / reverse the edge u → v."""
    local = scorer.local_index
    reach = _reachable(parents)
    d = len(parents)
    for v in range(d):
        here = local(v, frozenset(parents[v]))
        for u in range(d):
            if u == v:
                continue
            if u in parents[v]:
                without = local(v, frozenset(parents[v] - {u})) - here
                if ("-", u, v) not in tabu:
                    yield without, "-", u, v
                if (len(parents[u]) < max_parents and ("~", u, v) not in tabu
                        and not _other_path(parents, u, v)):
                    gain = local(u, frozenset(parents[u] | {v})) - local(u, frozenset(parents[u]))
                    yield without + gain, "~", u, v
            elif len(parents[v]) < max_parents and not reach[v, u] and ("+", u, v) not in tabu:
                yield local(v, frozenset(parents[v] | {u})) - here, "+", u, v


def hill_climb(codes, states, score: str = "bic", equivalent_sample_size: float = 1.0,
               max_parents: int = 3, start: Mapping[str, Iterable[str]] | None = None,
               max_iter: int = 1000, tabu_length: int = 0, epsilon: float = 1e-9,
               scorer: FamilyScorer | None = None, restarts: int = 0, perturb: int = 5,
               seed: int = 0, chow_liu_start: bool = True) -> dict[str, tuple[str, ...]]:
    """Greedy hill climbing over DAGs from ``start``; without one, from no edges and (with
    ``chow_liu_start``) also from the Chow–Liu tree rooted at the first name, keeping the better.

    1. Enumerate every legal move: add u → v (no path v → u, at most ``max_parents`` parents: the
       maximum in-degree), remove an edge, or reverse one (no other path u → v), skipping the
       ``tabu_length`` most recent moves' inverses.
    2. Take the move of largest score gain. Ties (gains equal to 9 decimals, as score-equivalent
       moves are) go to the move kind (add, remove, reverse), then to the variable NAMES in sorted
       order, never to column positions: the same data in any column order give the same DAG.
    3. Stop when no gain exceeds ``epsilon`` or after ``max_iter`` moves.
    4. Climb from each start (step 0); keep the DAG of the highest total score.
    5. Random restarts (``restarts`` > 0): from the best DAG so far, apply ``perturb`` random legal
       moves (drawn with ``seed`` from the moves listed by name, so also independent of column
       order) and climb again; keep the DAG of highest total score.
    """
    scorer = scorer or FamilyScorer(codes, states, score, equivalent_sample_size)
    order = sorted(range(len(scorer.variables)), key=lambda c: scorer.variables[c])
    rank = {c: r for r, c in enumerate(order)}  # ties by name, whatever the column order
    starts = [_start_sets(scorer, start)]
    if start is None and chow_liu_start and len(scorer.variables) > 1:
        tree = chow_liu(scorer.columns.T, scorer.states, root=scorer.variables[order[0]])
        starts.append(_start_sets(scorer, {v: ps[:max_parents] for v, ps in tree.items()}))
    best, best_score = None, -np.inf
    for parents in starts:  # from each start; the highest score wins (the first on a tie)
        parents = _climb(scorer, parents, max_parents, max_iter, tabu_length, epsilon, rank)
        total = _total(scorer, parents)
        if total > best_score + epsilon:
            best, best_score = parents, total
    rng = np.random.default_rng(seed)
    for _ in range(max(restarts, 0)):
        parents = [set(ps) for ps in best]
        for _ in range(perturb):
            moves = sorted(((kind, rank[u], rank[v], u, v) for _, kind, u, v in
                            _moves(scorer, parents, max_parents, ())))
            if not moves:
                break
            kind, _, _, u, v = moves[int(rng.integers(len(moves)))]
            _apply(parents, kind, u, v)
        parents = _climb(scorer, parents, max_parents, max_iter, tabu_length, epsilon, rank)
        total = _total(scorer, parents)
        if total > best_score + epsilon:
            best, best_score = parents, total
    return _named(scorer.variables, best)


def _climb(scorer: FamilyScorer, parents: list[set[int]], max_parents: int, max_iter: int,
           tabu_length: int, epsilon: float, rank: Mapping[int, int]) -> list[set[int]]:
    """Steps 1-3 of :func:`hill_climb` from ``parents`` (changed in place and returned)."""
    tabu: deque = deque(maxlen=max(tabu_length, 0))
    undo = {"+": "-", "-": "+"}
    for _ in range(max_iter):
        best = None
        for gain, kind, u, v in _moves(scorer, parents, max_parents, tabu if tabu_length else ()):
            key = (round(gain, _DECIMALS), -_KINDS[kind], -rank[u], -rank[v])
            if best is None or key > best[0]:
                best = (key, gain, kind, u, v)
        if best is None or best[1] <= epsilon:
            break
        _, _, kind, u, v = best
        _apply(parents, kind, u, v)
        if tabu_length:
            tabu.append((undo[kind], u, v) if kind in undo else ("~", v, u))
    return parents


def _apply(parents: list[set[int]], kind: str, u: int, v: int) -> None:
    if kind in "-~":
        parents[v].discard(u)
    if kind == "+":
        parents[v].add(u)
    if kind == "~":
        parents[u].add(v)


def _total(scorer: FamilyScorer, parents: list[set[int]]) -> float:
    return sum(scorer.local_index(v, frozenset(ps)) for v, ps in enumerate(parents))


def k2(codes, states, order: Sequence[str], max_parents: int = 3, score: str = "k2",
       equivalent_sample_size: float = 1.0, scorer: FamilyScorer | None = None) -> dict[str, tuple[str, ...]]:
    """K2 (Cooper & Herskovits 1992): for each node along ``order`` (every variable once), add the
    predecessor that most increases the family score, while one does and fewer than
    ``max_parents`` parents are chosen."""
    scorer = scorer or FamilyScorer(codes, states, score, equivalent_sample_size)
    columns = [scorer.column(v) for v in order]
    if sorted(columns) != list(range(len(scorer.variables))):
        missing = [v for v in scorer.variables if scorer.index[v] not in columns]
        raise NetworkError(f"the order must list every variable once; missing {missing}, got {list(order)}")
    parents: list[set[int]] = [set() for _ in scorer.variables]
    for m, v in enumerate(columns):
        current = scorer.local_index(v, frozenset())
        while len(parents[v]) < max_parents:
            gains = [(round(scorer.local_index(v, frozenset(parents[v] | {z})) - current, _DECIMALS), -i, z)
                     for i, z in enumerate(columns[:m]) if z not in parents[v]]
            if not gains or max(gains)[0] <= 0:
                break
            _, _, z = max(gains)
            parents[v].add(z)
            current = scorer.local_index(v, frozenset(parents[v]))
    return _named(scorer.variables, parents, order=columns)


def pair_counts(codes, states, class_variable: str | None = None,
                chunk: int = 65536) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The (classes, G, G) co-occurrence counts of the non-class variables' global codes (one
    class if ``class_variable`` is None), the attribute of each global code, and the attributes."""
    states = states_of(states)
    columns = check_codes(codes, states)
    if class_variable is not None and class_variable not in states:
        raise NetworkError(f"unknown class variable {class_variable!r}; the variables are {list(states)}")
    attrs = [v for v in states if v != class_variable]
    cols = [list(states).index(v) for v in attrs]
    cards = np.array([len(states[v]) for v in attrs])
    offsets = np.concatenate([[0], np.cumsum(cards)[:-1]])
    attr_of = np.repeat(np.arange(len(attrs)), cards)
    y = columns[list(states).index(class_variable)] if class_variable else np.zeros(columns.shape[1], int)
    n_classes = len(states[class_variable]) if class_variable else 1
    table = np.zeros((n_classes, len(attr_of), len(attr_of)))
    for lo in range(0, columns.shape[1], chunk):
        glob = columns[cols, lo:lo + chunk].T + offsets
        for c in range(n_classes):
            rows = glob[y[lo:lo + chunk] == c]
            onehot = np.zeros((len(rows), len(attr_of)))
            onehot[np.arange(len(rows))[:, None], rows] = 1.0
            table[c] += onehot.T @ onehot
    return table, attr_of, attrs


def chow_liu(codes, states, class_variable: str | None = None,
             root: str | None = None) -> dict[str, tuple[str, ...]]:
    """Chow–Liu tree (maximum spanning tree on I(x_i; x_j), directed away from ``root`` or the
    first variable), or TAN when ``class_variable`` is given (weights I(x_i; x_j | class), the
    class a parent of every other variable, listed first). Pairs of zero information are not
    linked, so the result can be a forest."""
    states = states_of(states)
    table, attr_of, attrs = pair_counts(codes, states, class_variable)
    if root is not None and root not in attrs:
        raise NetworkError(f"unknown root {root!r}; the attributes are {attrs}")
    mi, cmi = information(table, attr_of, len(attrs))
    tree = tan_parents(mi if class_variable else np.zeros(len(attrs)), cmi,
                       attrs.index(root) if root is not None else None)
    out = {v: () for v in states}
    for a, ps in zip(attrs, tree, strict=True):
        out[a] = ((class_variable,) if class_variable else ()) + tuple(attrs[p] for p in ps)
    return out


def _named(variables: list[str], parents: list[set[int]], order: Sequence[int] | None = None):
    """``{variable: parents}`` with each parent tuple in ``order`` (default: column order)."""
    rank = {c: i for i, c in enumerate(order)} if order is not None else {c: c for c in range(len(variables))}
    return {v: tuple(variables[p] for p in sorted(parents[i], key=rank.__getitem__))
            for i, v in enumerate(variables)}


def _edges(parents: Mapping[str, Iterable[str]]) -> set[tuple[str, str]]:
    return {(p, c) for c, ps in parents.items() for p in ps}


def structural_hamming_distance(parents_a: Mapping[str, Iterable[str]],
                                parents_b: Mapping[str, Iterable[str]], directed: bool = False) -> int:
    """Number of node pairs linked differently: on the skeletons (an edge in one graph only), or,
    with ``directed``, also counting an edge present in both but reversed (Tsamardinos et al. 2006
    count missing, extra and reversed edges once each)."""
    a, b = _edges(parents_a), _edges(parents_b)
    if not directed:
        return len({frozenset(e) for e in a} ^ {frozenset(e) for e in b})
    pairs = {tuple(sorted(e)) for e in a | b}
    return sum(((x, y) in a, (y, x) in a) != ((x, y) in b, (y, x) in b) for x, y in pairs)


def changed_families(old: Mapping[str, Iterable[str]], new: Mapping[str, Iterable[str]]) -> list[str]:
    """Variables whose parent set differs (their counts restart under the new structure)."""
    names = list(old) + [v for v in new if v not in old]
    return [v for v in names if set(old.get(v, ())) != set(new.get(v, ()))]


def restructure(net: Network, parents: Mapping[str, Iterable[str]]) -> Network:
    """A new Network over ``net``'s variables and states with the learned ``parents``: families
    whose parent set is unchanged keep their parent order and CPT; the others have no CPT yet
    (the caller re-counts them). Unknown variables and cycles raise NetworkError."""
    for v in parents:
        if v not in net.states:
            raise NetworkError(f"unknown variable {v!r}; the network has {net.variables}")
    same = {v for v in net.states if set(parents.get(v, ())) == set(net.parents[v])}
    new = {v: net.parents[v] if v in same else tuple(parents.get(v, ())) for v in net.states}
    out = Network(net.states, new, None, net.name)
    for v in same & set(net.cpts):
        out.cpts[v] = net.cpts[v]
    return out
