"""Likelihood components over named fields: categorical counts and Gaussian densities."""

from __future__ import annotations

import numpy as np

from streambayes.features import Batch
from streambayes.stats import GaussianSummaries, ValueIndex, lidstone_log, m_estimate_log


class Categorical:
    """``P(x_i = v | c) = (n_civ + α) / (n_ci + α·V_i)`` per field (or an m-estimate).

    ``V_i`` is the number of values of field ``i`` seen so far; a value never seen in
    training carries no evidence and is skipped, as is a missing one. With
    ``numeric_as_categories`` numbers are category codes too (scikit-learn's CategoricalNB).
    """

    kind = "categorical"

    def __init__(self, alpha: float = 1.0, numeric_as_categories: bool = True,
                 m: float | None = None) -> None:
        self.alpha, self.numeric_as_categories, self.m = alpha, numeric_as_categories, m
        self.fields = ValueIndex()
        self.values: list[ValueIndex] = []
        self.tables: list[np.ndarray] = []  # (classes, values) per field
        self.n_classes = 0

    def params(self) -> dict:
        return {"alpha": self.alpha, "numeric_as_categories": self.numeric_as_categories,
                "m": self.m}

    def _columns(self, batch: Batch):
        yield from ((f, col, col != None) for f, col in batch.categorical.items())  # noqa: E711
        if self.numeric_as_categories:
            yield from ((f, col, ~np.isnan(col)) for f, col in batch.numeric.items())

    def _field(self, name) -> int:
        i = self.fields.add(name)
        if i == len(self.tables):
            self.values.append(ValueIndex())
            self.tables.append(np.zeros((self.n_classes, 0)))
        return i

    def check(self, batch: Batch, n_classes: int | None = None) -> None:
        """Every value is a category: nothing to refuse."""

    def grow_classes(self, k: int) -> None:
        self.tables = [np.pad(t, ((0, k - t.shape[0]), (0, 0))) for t in self.tables]
        self.n_classes = k

    def learn(self, batch: Batch, rows: np.ndarray, w: np.ndarray, raw: np.ndarray | None = None) -> None:
        for name, col, present in self._columns(batch):
            i = self._field(name)
            at = np.flatnonzero(present)
            codes = self.values[i].codes(col[at].tolist())
            table = self.tables[i]
            if len(self.values[i]) > table.shape[1]:
                table = self.tables[i] = np.pad(table, ((0, 0), (0, len(self.values[i]) - table.shape[1])))
            np.add.at(table, (rows[at], codes), w[at])

    def _log_probs(self, i: int, codes: np.ndarray, scale: float) -> np.ndarray:
        table = self.tables[i] * scale
        counts, totals = table[:, codes], table.sum(axis=1, keepdims=True)
        n_values = table.shape[1]
        if self.m is not None:
            return m_estimate_log(counts, totals, self.m, 1.0 / n_values)
        return lidstone_log(counts, totals, n_values, self.alpha)

    def _known(self, batch: Batch, scale: float):
        """(field, rows, log-probs (classes, rows)) for each known field of the batch."""
        for name, col, present in self._columns(batch):
            i = self.fields.get(name)
            if i < 0:
                continue
            at = np.flatnonzero(present)
            codes = self.values[i].lookup(col[at].tolist())
            at, codes = at[codes >= 0], codes[codes >= 0]
            if len(at):
                yield name, col, at, self._log_probs(i, codes, scale)

    def log_likelihood(self, batch: Batch, scale: float) -> np.ndarray:
        out = np.zeros((batch.n, self.n_classes))
        for _, _, at, logp in self._known(batch, scale):
            out[at] += logp.T
        return out

    def contributions(self, batch: Batch, scale: float) -> list[tuple[str, np.ndarray]]:
        known = self._known(batch, scale)
        return [(f"{name}={col[at[0]]}", logp[:, 0]) for name, col, at, logp in known]

    def scale(self, factor: float) -> None:
        for t in self.tables:
            t *= factor

    def merge(self, other: Categorical, class_map: np.ndarray, factor: float) -> None:
        for j, name in enumerate(other.fields.values):
            i = self._field(name)
            value_map = self.values[i].absorb(other.values[j])
            table = self.tables[i]
            if len(self.values[i]) > table.shape[1]:
                table = self.tables[i] = np.pad(table, ((0, 0), (0, len(self.values[i]) - table.shape[1])))
            np.add.at(table, np.ix_(class_map, value_map), other.tables[j] * factor)

    def to_state(self) -> dict:
        return {"params": self.params(), "n_classes": self.n_classes,
                "fields": self.fields.to_state(), "values": [v.to_state() for v in self.values],
                "tables": [t.copy() for t in self.tables]}

    @classmethod
    def from_state(cls, state: dict) -> Categorical:
        c = cls(**state["params"])
        c.n_classes = int(state["n_classes"])
        c.fields = ValueIndex.from_state(state["fields"])
        c.values = [ValueIndex.from_state(v) for v in state["values"]]
        c.tables = [np.array(t, np.float64).reshape(c.n_classes, -1) for t in state["tables"]]
        return c

    def memory_bytes(self) -> int:
        return sum(t.nbytes for t in self.tables)


class Gaussian:
    """``p(x_i | c) = N(x_i; μ_ci, σ²_ci)`` per numeric field (Welford / Chan summaries).

    ``variance="mle"`` divides by the weight, ``"sample"`` by weight − 1 (the loan example).
    ``var_smoothing`` adds that fraction of the largest overall field variance to every
    variance (scikit-learn's GaussianNB). A class with no usable variance for a field
    falls back to the field's overall mean and variance; a field with no variance at all
    carries no evidence.
    """

    kind = "gaussian"

    def __init__(self, variance: str = "mle", var_smoothing: float = 1e-9) -> None:
        if variance not in ("mle", "sample"):
            raise ValueError(f"variance must be 'mle' or 'sample', got {variance!r}")
        self.variance, self.var_smoothing = variance, var_smoothing
        self.fields = ValueIndex()
        self.stats = GaussianSummaries(0, 0)
        self.overall = GaussianSummaries(1, 0)

    def params(self) -> dict:
        return {"variance": self.variance, "var_smoothing": self.var_smoothing}

    def check(self, batch: Batch, n_classes: int | None = None) -> None:
        """The featurizer already refused non-finite numbers."""

    def grow_classes(self, k: int) -> None:
        self.stats.grow(k, len(self.fields))

    def _matrix(self, batch: Batch, add: bool) -> tuple[np.ndarray, np.ndarray]:
        """Values (n, fields) with NaN where missing; and which batch columns were known."""
        cols = [(self.fields.add(f) if add else self.fields.get(f), c) for f, c in batch.numeric.items()]
        cols = [(i, c) for i, c in cols if i >= 0]
        m = np.full((batch.n, len(self.fields)), np.nan)
        for i, c in cols:
            m[:, i] = c
        return m, np.array([i for i, _ in cols], np.int64)

    def learn(self, batch: Batch, rows: np.ndarray, w: np.ndarray, raw: np.ndarray | None = None) -> None:
        if not batch.numeric:
            return
        values, _ = self._matrix(batch, add=True)
        self.stats.grow(self.stats.shape[0], len(self.fields))
        self.overall.grow(1, len(self.fields))
        self.stats.update(rows, values, w)
        self.overall.update(np.zeros(batch.n, np.int64), values, w)

    def _params(self, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ddof = 1 if self.variance == "sample" else 0
        mle_overall = self.overall.variance(0)[0]
        eps = self.var_smoothing * (mle_overall.max() if mle_overall.size else 0.0)
        var = self.stats.variance(ddof, scale) + eps
        all_var = self.overall.variance(ddof, scale)[0] + eps
        fallback = var <= 0
        mean = np.where(fallback, self.overall.mean[0], self.stats.mean)
        var = np.where(fallback, all_var, var)
        return mean, var, var > 0

    def _log_density(self, batch: Batch, scale: float):
        values, known = self._matrix(batch, add=False)
        mean, var, usable = self._params(scale)
        x = values[:, known][:, None, :]  # (n, 1, f)
        mu, v, ok = mean[:, known], var[:, known], usable[:, known]
        with np.errstate(divide="ignore", invalid="ignore"):
            logpdf = -0.5 * (np.log(2 * np.pi * v) + (x - mu) ** 2 / v)
        logpdf = np.where(np.isnan(x) | ~ok, 0.0, logpdf)
        return known, logpdf  # (n, classes, f)

    def log_likelihood(self, batch: Batch, scale: float) -> np.ndarray:
        if not batch.numeric or not len(self.fields):
            return np.zeros((batch.n, self.stats.shape[0]))
        return self._log_density(batch, scale)[1].sum(axis=2)

    def contributions(self, batch: Batch, scale: float) -> list[tuple[str, np.ndarray]]:
        if not batch.numeric or not len(self.fields):
            return []
        known, logpdf = self._log_density(batch, scale)
        values, _ = self._matrix(batch, add=False)  # a missing value (NaN) is no clue
        return [(str(self.fields.values[i]), logpdf[0, :, j]) for j, i in enumerate(known)
                if not np.isnan(values[0, i])]

    def scale(self, factor: float) -> None:
        self.stats.scale(factor)
        self.overall.scale(factor)

    def merge(self, other: Gaussian, class_map: np.ndarray, factor: float) -> None:
        field_map = self.fields.absorb(other.fields)
        self.stats.grow(self.stats.shape[0], len(self.fields))
        self.overall.grow(1, len(self.fields))
        theirs, overall = (GaussianSummaries.from_state(s.to_state()) for s in (other.stats, other.overall))
        theirs.scale(factor)
        overall.scale(factor)
        self.stats.merge(theirs, class_map, field_map)
        self.overall.merge(overall, np.zeros(1, np.int64), field_map)

    def to_state(self) -> dict:
        return {"params": self.params(), "fields": self.fields.to_state(),
                "stats": self.stats.to_state(), "overall": self.overall.to_state()}

    @classmethod
    def from_state(cls, state: dict) -> Gaussian:
        g = cls(**state["params"])
        g.fields = ValueIndex.from_state(state["fields"])
        g.stats = GaussianSummaries.from_state(state["stats"])
        g.overall = GaussianSummaries.from_state(state["overall"])
        return g

    def memory_bytes(self) -> int:
        return sum(a.nbytes for a in (*self.stats.to_state().values(), *self.overall.to_state().values()))
