"""Likelihood components over named fields: categorical counts and Gaussian densities."""

from __future__ import annotations

import numpy as np

from streambayes.errors import LimitError
from streambayes.features import Batch
from streambayes.stats import GaussianSummaries, ValueIndex


class Categorical:
    """``P(x_i = v | c) = (n_civ + α) / (n_ci + α·V_i)`` per field (or an m-estimate).

    ``V_i`` is the number of values of field ``i`` seen so far; a value never seen in
    training carries no evidence and is skipped, as is a missing one. With
    ``numeric_as_categories`` numbers are category codes too (scikit-learn's CategoricalNB).

    Memory follows the data: every (field, value) pair seen is one column of a single
    (classes, pairs) count table that grows by doubling, so a stream of many fields with
    few values each costs no per-field array. A field takes at most ``max_values`` values:
    a batch that would add one more is refused (:class:`LimitError`) before anything changes.
    """

    kind = "categorical"

    def __init__(self, alpha: float = 1.0, numeric_as_categories: bool = True,
                 m: float | None = None, max_values: int = 100_000) -> None:
        self.alpha, self.numeric_as_categories, self.m = alpha, numeric_as_categories, m
        self.max_values = max_values
        self.fields = ValueIndex()
        self._column: dict[tuple[int, object], int] = {}  # (field code, value) → column
        self._columns_of: list[list[int]] = []  # field code → its columns, values in first-seen order
        self._value_of: list = []  # column → value
        self._counts = np.zeros((0, 0))  # (capacity ≥ pairs, classes): a pair's counts contiguous
        self._totals: dict[int, np.ndarray] = {}  # field → Σ counts over its values (derived cache)
        self.n_classes = 0

    def params(self) -> dict:
        return {"alpha": self.alpha, "numeric_as_categories": self.numeric_as_categories,
                "m": self.m, "max_values": self.max_values}

    def _raw_columns(self, batch: Batch):
        yield from ((f, col, False) for f, col in batch.categorical.items())
        if self.numeric_as_categories:
            yield from ((f, col, True) for f, col in batch.numeric.items())

    def _field(self, name) -> int:
        i = self.fields.add(name)
        if i == len(self._columns_of):
            self._columns_of.append([])
        return i

    def _pairs(self, batch: Batch, add: bool) -> tuple[list[int], list[int], list[int], list]:
        """(row, field, column, value) of every present value of the batch, field by field, rows
        in order. Unseen fields and values are added (``add``) or skipped. One pass in plain
        Python over the batch's own cells: no per-field array, nothing sized by the model."""
        rows: list[int] = []
        fields: list[int] = []
        cols: list[int] = []
        values: list = []
        column, value_of = self._column, self._value_of
        for name, col, numeric in self._raw_columns(batch):
            i = self._field(name) if add else self.fields.get(name)
            if i < 0:
                continue
            for r, v in enumerate(col.tolist()):
                if v is None or (numeric and v != v):  # missing (None, NaN)
                    continue
                c = column.get((i, v))
                if c is None:
                    if not add:
                        continue
                    c = column[(i, v)] = len(value_of)
                    value_of.append(v)
                    self._columns_of[i].append(c)
                rows.append(r)
                fields.append(i)
                cols.append(c)
                values.append(v)
        return rows, fields, cols, values

    def _codes(self, i: int, values: list) -> np.ndarray:
        """Columns of field ``i``'s ``values``, adding the unseen ones (merge, restore)."""
        out = np.empty(len(values), np.int64)
        for j, v in enumerate(values):
            c = self._column.get((i, v))
            if c is None:
                c = self._column[(i, v)] = len(self._value_of)
                self._value_of.append(v)
                self._columns_of[i].append(c)
            out[j] = c
        return out

    def _reserve(self) -> None:
        """Room for every column (capacity doubles: amortised O(1) per new pair)."""
        need, have = len(self._value_of), self._counts.shape[0]
        if need > have or self._counts.shape[1] != self.n_classes:
            cap = max(need, 2 * have if need > have else have, 8)
            grown = np.zeros((cap, self.n_classes))
            grown[:have, : self._counts.shape[1]] = self._counts
            self._counts = grown

    def check(self, batch: Batch, n_classes: int | None = None) -> None:
        """Refuse a batch that would give a field more than ``max_values`` values."""
        for name, col, numeric in self._raw_columns(batch):
            i = self.fields.get(name)
            have, new = (len(self._columns_of[i]) if i >= 0 else 0), set()
            for v in col.tolist():
                if v is None or (numeric and v != v) or v in new or (i >= 0 and (i, v) in self._column):
                    continue
                if have + len(new) >= self.max_values:
                    raise LimitError("max_values", self.max_values, v,
                                     f"field {name!r}: value {v!r} would exceed max_values="
                                     f"{self.max_values:,} (the field has {have:,} values and "
                                     f"the batch brings {len(new):,} new before it)")
                new.add(v)

    def check_merge(self, other: Categorical) -> None:
        """Refuse (LimitError) a merge that would give a field more than ``max_values`` values."""
        for j, name in enumerate(other.fields.values):
            i = self.fields.get(name)
            values = [other._value_of[c] for c in other._columns_of[j]]
            have = len(self._columns_of[i]) if i >= 0 else 0
            new = [v for v in values if i < 0 or (i, v) not in self._column]
            if have + len(new) > self.max_values:
                raise LimitError("max_values", self.max_values, new[0],
                                 f"field {name!r} would have {have + len(new):,} values, over "
                                 f"max_values={self.max_values:,}")

    def grow_classes(self, k: int) -> None:
        self.n_classes = k
        self._reserve()
        self._totals.clear()

    def learn(self, batch: Batch, rows: np.ndarray, w: np.ndarray, raw: np.ndarray | None = None) -> None:
        at, fields, cols, _ = self._pairs(batch, add=True)
        self._reserve()
        if cols:
            at_rows = np.array(at, np.int64)
            np.add.at(self._counts, (np.array(cols, np.int64), rows[at_rows]), w[at_rows])
        for i in set(fields):
            self._totals.pop(i, None)

    def _table(self, i: int) -> np.ndarray:
        """Field ``i``'s (classes, values) counts (a copy)."""
        return np.ascontiguousarray(self._counts[self._columns_of[i]].T)

    def _field_totals(self, i: int) -> np.ndarray:
        """Σ counts over field ``i``'s values, per class (cached until the field learns)."""
        totals = self._totals.get(i)
        if totals is None:
            totals = self._totals[i] = self._counts[self._columns_of[i]].sum(axis=0)
        return totals

    def _known(self, batch: Batch, scale: float) -> tuple[list[int], list[int], list, np.ndarray]:
        """(rows, fields, values, log-probs (pairs, classes)) of the batch's known values."""
        rows, fields, cols, values = self._pairs(batch, add=False)
        if not cols:
            return rows, fields, values, np.zeros((0, self.n_classes))
        uniq, inv = np.unique(np.array(fields, np.int64), return_inverse=True)
        totals = np.stack([self._field_totals(i) for i in uniq.tolist()]) * scale  # (fields, classes)
        n_values = np.array([len(self._columns_of[i]) for i in uniq.tolist()], np.float64)[:, None]
        counts = self._counts[cols] * scale
        with np.errstate(divide="ignore", invalid="ignore"):  # each field's terms once, then per pair
            if self.m is not None:
                logp = np.log(counts + self.m * (1.0 / n_values)[inv]) - np.log(totals + self.m)[inv]
            else:
                logp = np.log(counts + self.alpha) - np.log(totals + self.alpha * n_values)[inv]
        return rows, fields, values, logp

    def log_likelihood(self, batch: Batch, scale: float) -> np.ndarray:
        out = np.zeros((batch.n, self.n_classes))
        rows, fields, _, logp = self._known(batch, scale)
        if rows:  # one add per column of the batch (its rows are distinct), in field order
            at, f = np.array(rows, np.int64), np.array(fields, np.int64)
            cuts = np.flatnonzero((f[1:] != f[:-1]) | (at[1:] <= at[:-1])) + 1
            for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(at)], strict=True):
                out[at[a:b]] += logp[a:b]
        return out

    def contributions(self, batch: Batch, scale: float) -> list[tuple[str, np.ndarray]]:
        rows, fields, values, logp = self._known(batch, scale)
        names = self.fields.values
        return [(f"{names[i]}={v}", logp[p]) for p, (r, i, v) in enumerate(zip(rows, fields, values,
                                                                                 strict=True)) if r == 0]

    def scale(self, factor: float) -> None:
        self._counts *= factor
        self._totals.clear()

    def merge(self, other: Categorical, class_map: np.ndarray, factor: float) -> None:
        for j, name in enumerate(other.fields.values):
            i = self._field(name)
            theirs = other._columns_of[j]
            codes = self._codes(i, [other._value_of[c] for c in theirs])
            self._reserve()
            np.add.at(self._counts, np.ix_(codes, class_map), other._counts[theirs] * factor)
        self._totals.clear()

    def to_state(self) -> dict:
        return {"params": self.params(), "n_classes": self.n_classes,
                "fields": self.fields.to_state(),
                "values": [[self._value_of[c] for c in cols] for cols in self._columns_of],
                "tables": [self._table(i) for i in range(len(self._columns_of))]}

    @classmethod
    def from_state(cls, state: dict) -> Categorical:
        c = cls(**state["params"])
        c.n_classes = int(state["n_classes"])
        for name, values, table in zip(state["fields"], state["values"], state["tables"], strict=True):
            i = c._field(name)
            codes = c._codes(i, list(values))
            c._reserve()
            c._counts[codes] = np.array(table, np.float64).reshape(c.n_classes, len(values)).T
        c._reserve()
        return c

    def memory_bytes(self) -> int:
        return self._counts.nbytes


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
        self._eps: float | None = None  # derived: var_smoothing · largest overall variance

    def params(self) -> dict:
        return {"variance": self.variance, "var_smoothing": self.var_smoothing}

    def check(self, batch: Batch, n_classes: int | None = None) -> None:
        """The featurizer already refused non-finite numbers."""

    def grow_classes(self, k: int) -> None:
        self.stats.grow(k, len(self.fields))

    def _columns(self, batch: Batch, add: bool) -> tuple[np.ndarray, np.ndarray]:
        """The batch's known numeric columns: values (n, k) with NaN where missing, and their
        field codes (k,). Only the batch's own fields: the cost follows the batch, not the model."""
        cols = [(self.fields.add(f) if add else self.fields.get(f), c) for f, c in batch.numeric.items()]
        cols = [(i, c) for i, c in cols if i >= 0]
        values = np.empty((batch.n, len(cols)))
        for j, (_, c) in enumerate(cols):
            values[:, j] = c
        return values, np.array([i for i, _ in cols], np.int64)

    def _reserve(self, n_rows: int) -> None:
        """Room for every field (capacity doubles, so a stream of new fields copies O(fields))."""
        n, cap = len(self.fields), self.stats.shape[1]
        cap = n if n <= cap else max(n, 2 * cap, 8)
        self.stats.grow(n_rows, cap)
        self.overall.grow(1, cap)

    def learn(self, batch: Batch, rows: np.ndarray, w: np.ndarray, raw: np.ndarray | None = None) -> None:
        if not batch.numeric:
            return
        values, known = self._columns(batch, add=True)
        self._reserve(self.stats.shape[0])
        self.stats.update(rows, values, w, known)
        self.overall.update(np.zeros(batch.n, np.int64), values, w, known)
        self._eps = None

    def _smoothing(self) -> float:
        """``var_smoothing`` times the largest overall field variance (cached until learning)."""
        if self._eps is None:
            mle_overall = self.overall.variance(0)[0]
            self._eps = self.var_smoothing * (mle_overall.max() if mle_overall.size else 0.0)
        return self._eps

    def _params(self, scale: float, known: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ddof = 1 if self.variance == "sample" else 0
        eps = self._smoothing()
        stats, overall = self.stats.columns(known), self.overall.columns(known)
        var = stats.variance(ddof, scale) + eps
        all_var = overall.variance(ddof, scale)[0] + eps
        fallback = var <= 0
        mean = np.where(fallback, overall.mean[0], stats.mean)
        var = np.where(fallback, all_var, var)
        return mean, var, var > 0

    def _log_density(self, batch: Batch, scale: float):
        values, known = self._columns(batch, add=False)
        mu, v, ok = self._params(scale, known)
        x = values[:, None, :]  # (n, 1, f)
        with np.errstate(divide="ignore", invalid="ignore"):
            logpdf = -0.5 * (np.log(2 * np.pi * v) + (x - mu) ** 2 / v)
        logpdf = np.where(np.isnan(x) | ~ok, 0.0, logpdf)
        return values, known, logpdf  # (n, classes, f)

    def log_likelihood(self, batch: Batch, scale: float) -> np.ndarray:
        if not batch.numeric or not len(self.fields):
            return np.zeros((batch.n, self.stats.shape[0]))
        return self._log_density(batch, scale)[2].sum(axis=2)

    def contributions(self, batch: Batch, scale: float) -> list[tuple[str, np.ndarray]]:
        if not batch.numeric or not len(self.fields):
            return []
        values, known, logpdf = self._log_density(batch, scale)  # a missing value (NaN) is no clue
        return [(str(self.fields.values[i]), logpdf[0, :, j]) for j, i in enumerate(known)
                if not np.isnan(values[0, j])]

    def scale(self, factor: float) -> None:
        self.stats.scale(factor)
        self.overall.scale(factor)
        self._eps = None

    def merge(self, other: Gaussian, class_map: np.ndarray, factor: float) -> None:
        field_map = self.fields.absorb(other.fields)
        self._reserve(self.stats.shape[0])
        n = len(other.fields)
        theirs, overall = (s.columns(np.arange(n)) for s in (other.stats, other.overall))
        theirs.scale(factor)
        overall.scale(factor)
        self.stats.merge(theirs, class_map, field_map)
        self.overall.merge(overall, np.zeros(1, np.int64), field_map)
        self._eps = None

    def to_state(self) -> dict:
        return {"params": self.params(), "fields": self.fields.to_state(),
                "stats": self._trimmed(self.stats), "overall": self._trimmed(self.overall)}

    def _trimmed(self, summaries: GaussianSummaries) -> dict:
        """The state of ``summaries`` without the spare capacity."""
        return summaries.columns(np.arange(len(self.fields))).to_state()

    @classmethod
    def from_state(cls, state: dict) -> Gaussian:
        g = cls(**state["params"])
        g.fields = ValueIndex.from_state(state["fields"])
        g.stats = GaussianSummaries.from_state(state["stats"])
        g.overall = GaussianSummaries.from_state(state["overall"])
        return g

    def memory_bytes(self) -> int:
        return sum(a.nbytes for s in (self.stats, self.overall) for a in (s.weight, s.mean, s.m2))
