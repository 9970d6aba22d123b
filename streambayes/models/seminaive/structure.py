"""Structures of TAN and kDB, derived from the class × value × value counts alone.

1. Mutual information with the class, I(x_i; y), and conditional mutual information
   I(x_i; x_j | y), maximum-likelihood estimates from the counts (``information.py``;
   Friedman, Geiger & Goldszmidt 1997), each over the events where the attributes involved
   are known.
2. TAN: a maximum weighted spanning tree over the attributes with weights I(x_i; x_j | y)
   (Kruskal), directed away from a root; kDB (Sahami 1996): attributes in decreasing
   I(x_i; y), each taking as parents the (up to) k earlier ones of largest I(x_i; x_j | y).

Attributes are numbered in name order, and every tie goes to the lower number, so equal
counts give the same structure whatever the learning order. The information values are
rounded to 1e-10 nats before they are compared: values that are equal in exact arithmetic
but summed in another order (after a merge, or under decay) stay ties. A pair whose
conditional mutual information is 0 (for instance two attributes never seen together) is not
linked, so the TAN tree can be a forest (each of its trees has its own root).

>>> mi, cmi = np.array([0.1, 0.3, 0.2]), np.array([[0, .5, .1], [.5, 0, .4], [.1, .4, 0]])
>>> tan_parents(mi, cmi)
[[1], [], [1]]
>>> kdb_parents(mi, cmi, k=2)
[[1, 2], [], [1]]
"""

from __future__ import annotations

import numpy as np

from streambayes.models.seminaive.information import class_mutual_information, conditional_mutual_information

_DECIMALS = 10


def information(t: np.ndarray, attr_of: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """``I(x_i; y)`` (d,) and ``I(x_i; x_j | y)`` (d, d) from the (classes, codes, codes) counts
    ``t`` of codes belonging to attributes ``attr_of`` (0 … d-1), rounded for comparisons."""
    return rounded(class_mutual_information(t, attr_of, d), conditional_mutual_information(t, attr_of, d))


def rounded(mi: np.ndarray, cmi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The information values rounded for comparisons (ties stay ties)."""
    return np.round(mi, _DECIMALS) + 0.0, np.round(cmi, _DECIMALS) + 0.0


def spanning_tree(cmi: np.ndarray) -> list[tuple[int, int]]:
    """Undirected edges (i < j) of a maximum weighted spanning forest over the positive weights
    (Kruskal; ties to the lexicographically smaller (i, j))."""
    d = len(cmi)
    candidates = sorted((-cmi[i, j], i, j) for i in range(d) for j in range(i + 1, d) if cmi[i, j] > 0)
    leader = list(range(d))

    def find(a: int) -> int:
        while leader[a] != a:
            leader[a] = leader[leader[a]]
            a = leader[a]
        return a

    edges = []
    for _, i, j in candidates:
        a, b = find(i), find(j)
        if a != b:
            leader[max(a, b)] = min(a, b)
            edges.append((i, j))
    return edges


def tan_parents(mi: np.ndarray, cmi: np.ndarray, root: int | None = None) -> list[list[int]]:
    """Each attribute's parent in the spanning forest (``[]`` for a root), edges directed away
    from ``root`` (its tree) and from the attribute of largest ``mi`` (every other tree)."""
    d = len(mi)
    neighbours: list[list[int]] = [[] for _ in range(d)]
    for i, j in spanning_tree(cmi):
        neighbours[i].append(j)
        neighbours[j].append(i)
    parents: list[list[int]] = [[] for _ in range(d)]
    by_mi = sorted(range(d), key=lambda a: (-mi[a], a))
    seen: set[int] = set()
    for start in ([root] if root is not None else []) + by_mi:
        if start in seen:
            continue
        seen.add(start)
        queue = [start]
        while queue:  # breadth first, neighbours in index order
            a = queue.pop(0)
            for b in sorted(neighbours[a]):
                if b not in seen:
                    seen.add(b)
                    parents[b] = [a]
                    queue.append(b)
    return parents


def kdb_parents(mi: np.ndarray, cmi: np.ndarray, k: int) -> list[list[int]]:
    """kDB: in decreasing ``mi``, each attribute's (up to) ``k`` earlier attributes of largest
    positive ``cmi``, the strongest first."""
    order = sorted(range(len(mi)), key=lambda a: (-mi[a], a))
    parents: list[list[int]] = [[] for _ in range(len(mi))]
    for m, a in enumerate(order):
        earlier = sorted((b for b in order[:m] if cmi[a, b] > 0), key=lambda b: (-cmi[a, b], b))
        parents[a] = earlier[:k]
    return parents
