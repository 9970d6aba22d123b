"""SPODE: one super-parent for every attribute, given or chosen online.

With ``parent=None`` the super-parent is chosen from the stream, by ``select``:

- ``"cmi"`` (default): the attribute with the largest ``Σ_j I(x_i; x_j | y)`` — the SPODE whose
  maximum-likelihood fit to the counts is best. A pure function of the counts, so it follows the
  stream, and merged shards choose as the sequential learner would.
- ``"prequential"``: before each event is counted, every candidate SPODE predicts it and its log
  loss is added to a running tally (prequential model selection, Dawid 1984); the lowest tally
  wins (ties: by name). A mini-batch is then learned event by event. The tallies depend on the
  order of the stream: merged shards add theirs, which is not what one learner would have seen.
"""

from __future__ import annotations

import numpy as np

from streambayes.errors import ModelError
from streambayes.features import Batch
from streambayes.models.seminaive.information import conditional_mutual_information, sparse_information
from streambayes.models.seminaive.ode import ODETable

_LOSS_CAP = -np.log(1e-15)


class SPODETable(ODETable):
    kind = "spode"

    def __init__(self, alpha: float = 1.0, m: float | None = None, parent=None, select: str = "cmi",
                 **table_args) -> None:
        if select not in ("cmi", "prequential"):
            raise ModelError(f"select must be 'cmi' or 'prequential', got {select!r}")
        super().__init__(alpha, m, **table_args)
        self.parent, self.select = parent, select
        self.tallies: dict = {}  # attribute name → prequential log loss as super-parent
        self._chosen: tuple | None = None  # (version, super-parent) of the "cmi" choice

    def params(self) -> dict:
        return {**super().params(), "parent": self.parent, "select": self.select}

    def super_parent(self) -> object:
        """The super-parent's name (None before anything can be chosen)."""
        if self.parent is not None:
            return self.parent
        if self.select == "prequential":
            return min(self.tallies, key=lambda n: (self.tallies[n], str(n))) if self.tallies else None
        if self._chosen is None or self._chosen[0] != self.version:  # derived once per change
            names = self.attrs.names.values
            best = None
            if names and self.attrs.n_codes:
                attr_of = np.array(self.attrs.attr_of, np.int64)
                est = self._derived[1] if self._derived and self._derived[0][0] == self.version else None
                dense = est.t if est is not None and est.dense else None  # kept current per event
                cmi = (conditional_mutual_information(self.pairs.view() if dense is None else dense, attr_of,
                                                      len(names))
                       if self.dense_fits(2) else sparse_information(self.pairs, attr_of, len(names))[1])
                score = np.round(cmi.sum(axis=1), 10)  # equal up to summation order: a tie, to the name
                best = min(names, key=lambda n: (-score[self.attrs.names.get(n)], str(n)))
            self._chosen = (self.version, best)
        return self._chosen[1]

    def _scores(self, codes: np.ndarray, scale: float, parent: int) -> np.ndarray:
        est = self.derived(scale)
        nb = est.naive_bayes(codes)  # (k, n)
        if parent < 0 or parent >= codes.shape[1]:
            return nb
        terms, present = est.parent_terms(codes)
        return np.where(present[None, :, parent], terms[:, :, parent], nb)

    @property
    def per_event(self) -> bool:
        return self.parent is not None or self.select != "prequential"

    def codes_log_likelihood(self, codes: np.ndarray, scale: float) -> np.ndarray:
        name = self.super_parent()
        parent = self.attrs.names.get(name) if name is not None else -1
        return self._scores(codes, scale, parent).T

    def learn(self, batch: Batch, rows: np.ndarray, w: np.ndarray, raw: np.ndarray | None = None) -> None:
        raw = w if raw is None else raw
        if self.parent is not None or self.select != "prequential" or batch.n == 1:
            return super().learn(batch, rows, w, raw)
        self.check(batch)
        for i in range(batch.n):  # prequential: each event is scored by the counts before it
            super().learn(batch.slice(i, i + 1), rows[i:i + 1], w[i:i + 1], raw[i:i + 1])

    def before_learning(self, codes: np.ndarray, rows: np.ndarray, w: np.ndarray) -> None:
        if self.parent is not None or self.select != "prequential" or not self.class_counts.any():
            return
        est = self.derived(1.0)
        nb = est.naive_bayes(codes)
        terms, present = est.parent_terms(codes)
        events = np.arange(codes.shape[0])
        # the classes this event could have been told apart from: those counted so far, and its own
        known = (self.class_counts > 0)[:, None] | (np.arange(len(self.class_counts))[:, None] == rows)
        for a, name in enumerate(self.attrs.names.values):
            s = np.where(present[None, :, a], terms[:, :, a], nb) if a < codes.shape[1] else nb
            s = np.where(known, s, -np.inf)
            top = s.max(axis=0)
            with np.errstate(invalid="ignore"):
                log_norm = top + np.log(np.exp(s - top).sum(axis=0))
                loss = np.minimum(log_norm - s[rows, events], _LOSS_CAP)
            loss = np.where(np.isfinite(loss), loss, _LOSS_CAP)
            self.tallies[name] = self.tallies.get(name, 0.0) + float(np.dot(w, loss))

    def scale(self, factor: float) -> None:
        super().scale(factor)
        self.tallies = {k: v * factor for k, v in self.tallies.items()}

    def merge_extra(self, other: SPODETable, class_map: np.ndarray, factor: float) -> None:
        for name, tally in other.tallies.items():
            self.tallies[name] = self.tallies.get(name, 0.0) + tally * factor

    def extra_state(self, attrs: list[int]) -> dict:
        return {"tallies": [[name, self.tallies[name]] for name in sorted(self.tallies, key=str)]}

    def load_extra(self, state: dict) -> None:
        self.tallies = {name: float(t) for name, t in state["tallies"]}
