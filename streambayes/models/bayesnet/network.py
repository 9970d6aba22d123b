"""A discrete Bayesian network: variables with named states, a DAG of parents, and CPTs.

A CPT is an array of shape ``(|child|, |parent_1|, …, |parent_k|)``: ``cpt[s, p1, …, pk]`` is
P(child = s | parents = p1 … pk), so every column sums to 1 over axis 0. Rows of data are dicts
variable → state name (``None`` or an absent key = missing); :meth:`Network.encode` turns them
into state codes (``-1`` = missing), refusing unknown variables and states by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from streambayes.errors import NetworkError


class Network:
    """Structure (states, parents) and, optionally, CPTs; validated as a DAG on construction."""

    def __init__(self, states: Mapping[str, Sequence[str]], parents: Mapping[str, Sequence[str]],
                 cpts: Mapping[str, np.ndarray] | None = None, name: str = "network") -> None:
        self.name = name
        self.states = {v: tuple(s) for v, s in states.items()}
        self.parents = {v: tuple(parents.get(v, ())) for v in self.states}
        self._check_structure()
        self.order = self._topological_order()
        self.index = {v: i for i, v in enumerate(self.states)}
        self.state_index = {v: {s: i for i, s in enumerate(st)} for v, st in self.states.items()}
        self.cpts = {}
        for v, table in (cpts or {}).items():
            self.set_cpt(v, table)

    @property
    def variables(self) -> list[str]:
        return list(self.states)

    def card(self, v: str) -> int:
        return len(self.states[v])

    def family_shape(self, v: str) -> tuple[int, ...]:
        return (self.card(v), *(self.card(p) for p in self.parents[v]))

    def children(self, v: str) -> list[str]:
        return [c for c in self.states if v in self.parents[c]]

    def edges(self) -> list[tuple[str, str]]:
        return [(p, c) for c in self.states for p in self.parents[c]]

    def n_parameters(self) -> int:
        """Free parameters: Σ (|child| − 1) · Π |parents|."""
        return sum((self.card(v) - 1) * int(np.prod(self.family_shape(v)[1:])) for v in self.states)

    def set_cpt(self, v: str, table) -> None:
        table = np.asarray(table, np.float64)
        if table.shape != self.family_shape(v):
            table = table.reshape(self.family_shape(v)) if table.size == np.prod(self.family_shape(v)) \
                else _raise(f"CPT of {v!r} has shape {table.shape}, expected {self.family_shape(v)}")
        sums = table.sum(axis=0)
        if np.any(table < 0) or not np.allclose(sums, 1.0, atol=1e-6):
            raise NetworkError(f"CPT of {v!r}: entries must be >= 0 and each column sum to 1")
        self.cpts[v] = table

    def _check_structure(self) -> None:
        for v, ps in self.parents.items():
            if len(self.states[v]) < 1 or len(set(self.states[v])) != len(self.states[v]):
                raise NetworkError(f"variable {v!r} needs distinct states, got {self.states[v]}")
            for p in ps:
                if p not in self.states:
                    raise NetworkError(f"variable {v!r} has unknown parent {p!r}")
            if len(set(ps)) != len(ps) or v in ps:
                raise NetworkError(f"variable {v!r} has repeated parents or itself as a parent")

    def _topological_order(self) -> list[str]:
        """Kahn's algorithm; a cycle is reported with the variables on it."""
        indegree = {v: len(ps) for v, ps in self.parents.items()}
        ready = [v for v in self.states if indegree[v] == 0]
        order = []
        while ready:
            v = ready.pop(0)
            order.append(v)
            for c in self.children(v):
                indegree[c] -= 1
                if indegree[c] == 0:
                    ready.append(c)
        if len(order) != len(self.states):
            stuck = sorted(v for v in self.states if v not in order)
            raise NetworkError(f"the graph has a cycle through {stuck}")
        return order

    # -- data ---------------------------------------------------------------------------------
    def encode(self, rows: Sequence[Mapping]) -> np.ndarray:
        """State codes (n, variables), -1 where a value is missing (None or absent)."""
        codes = np.full((len(rows), len(self.states)), -1, np.int64)
        for r, row in enumerate(rows):
            for v, s in row.items():
                if s is None:
                    continue
                i = self.index.get(v)
                if i is None:
                    raise NetworkError(f"unknown variable {v!r}; the network has {self.variables}")
                code = self.state_index[v].get(s)
                if code is None:
                    raise NetworkError(f"state {s!r} is not in the domain of {v!r}: {list(self.states[v])}")
                codes[r, i] = code
        return codes

    def decode(self, codes: np.ndarray) -> list[dict]:
        names = [self.states[v] for v in self.states]
        return [{v: names[i][c] for i, (v, c) in enumerate(zip(self.states, row, strict=True)) if c >= 0}
                for row in np.asarray(codes).tolist()]

    # -- JSON form ------------------------------------------------------------------------------
    def to_json(self) -> dict:
        out = {"name": self.name, "variables": [{"name": v, "states": list(self.states[v]),
                                                  "parents": list(self.parents[v])} for v in self.states]}
        if self.cpts:
            out["cpts"] = {v: t.tolist() for v, t in self.cpts.items()}
        return out

    @classmethod
    def from_json(cls, data: Mapping) -> Network:
        states = {e["name"]: e["states"] for e in data["variables"]}
        parents = {e["name"]: e.get("parents", []) for e in data["variables"]}
        return cls(states, parents, data.get("cpts"), data.get("name", "network"))

    def structure_copy(self) -> Network:
        return Network(self.states, self.parents, None, self.name)

    def __repr__(self) -> str:
        return f"Network({self.name!r}, {len(self.states)} variables, {len(self.edges())} edges)"


def _raise(message: str):
    raise NetworkError(message)
