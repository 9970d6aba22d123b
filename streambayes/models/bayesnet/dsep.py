"""d-separation by the moral ancestral graph (Lauritzen et al. 1990; reference 002).

X and Y are d-separated by Z in a DAG iff they are disconnected in the moral graph of the
ancestral set of X ∪ Y ∪ Z once Z is removed:

1. take the ancestral set A of X ∪ Y ∪ Z (the variables and all their ancestors);
2. moralise the subgraph on A: link every child to its parents and the parents of a child to
   each other, and drop the directions;
3. remove Z; X ⟂ Y | Z iff no path joins X to Y.

>>> from streambayes.models.bayesnet.network import Network
>>> net = Network({v: ("0", "1") for v in "abc"}, {"c": ["a", "b"]})
>>> d_separated(net, ["a"], ["b"], []), d_separated(net, ["a"], ["b"], ["c"])
(True, False)
"""

from __future__ import annotations

from collections.abc import Iterable

from streambayes.errors import NetworkError
from streambayes.models.bayesnet.network import Network


def d_separated(net: Network, xs: Iterable[str], ys: Iterable[str], zs: Iterable[str] = ()) -> bool:
    """True iff every variable of xs is d-separated from every variable of ys given zs."""
    xs, ys, zs = _names(net, xs, "xs"), _names(net, ys, "ys"), _names(net, zs, "zs")
    if (xs | ys) & zs:
        raise NetworkError(f"xs and ys must not overlap zs: {sorted((xs | ys) & zs)}")
    if xs & ys:
        return False
    ancestral, stack = set(), list(xs | ys | zs)  # 1.
    while stack:
        v = stack.pop()
        if v not in ancestral:
            ancestral.add(v)
            stack.extend(net.parents[v])
    links: dict[str, set[str]] = {v: set() for v in ancestral}  # 2.
    for v in ancestral:
        family = net.parents[v]
        for i, p in enumerate(family):
            links[v].add(p)
            links[p].add(v)
            for q in family[i + 1:]:
                links[p].add(q)
                links[q].add(p)
    seen, stack = set(xs), list(xs)  # 3.
    while stack:
        for u in links[stack.pop()]:
            if u in ys:
                return False
            if u not in seen and u not in zs:
                seen.add(u)
                stack.append(u)
    return True


def _names(net: Network, names: Iterable[str], label: str) -> set[str]:
    names = {names} if isinstance(names, str) else set(names)
    unknown = sorted(v for v in names if v not in net.states)
    if unknown:
        raise NetworkError(f"{label}: unknown variable(s) {unknown}; the network has {net.variables}")
    return names
