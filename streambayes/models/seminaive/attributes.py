"""Attributes of the semi-naive learners: names, values and their global codes.

Every field other than text is an attribute. Its string (and bool) values are categories; its
numbers fall into equal-frequency bins whose edges are fixed by the attribute's first numbers,
of total weight ``warmup``, in stream order (until then the learner buffers them, see
``table.py``). An attribute may have both: a column such as "children" = 1, 2, 3 or "more" is
bins plus the category "more". Each (attribute, value) has a global code, in order of first
appearance; local values are the category strings and the bin numbers 0, 1, … .
With a declared ``schema`` (attribute names), any other field is a :class:`FeatureError`; without
one, attributes are added as they appear. An attribute takes at most ``max_values`` categories:
a batch (or a merge) that would add one more is refused with a :class:`LimitError` before
anything changes (the stream runtime dead-letters such an event as ``limit``); ``dropped`` stays
from snapshots of the time when new categories past the bound counted as missing. ``edges``
fixes the bins of named attributes from the start: shards that are to be merged exactly must
share their edges (a shard that fixed its own from its own warm-up cannot be re-binned).

Missing values (``missing``): ``"skip"`` (default) leaves a missing or absent value out of every
count and estimate, as the seed does. ``"value"`` needs a ``schema``: every schema attribute an
event does not carry (absent, None or NaN) takes the category :data:`MISSING` of its own, counted
and used for prediction like any other value (the rule of scikit-learn's ``CategoricalNB`` on
ordinal codes, and close to Weka's mode filling when one value dominates). With the schema the
attribute set is fixed from the first event, so the rule does not depend on the batch boundaries.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence

import numpy as np

from streambayes.errors import FeatureError, LimitError
from streambayes.features import Batch
from streambayes.features.discretize import bin_codes
from streambayes.stats import ValueIndex

CAT, NUM = "categorical", "numeric"
MISSING = "\x00missing"  # the category of a missing value under missing="value"
MISSING_RULES = ("skip", "value")


class Attributes:
    def __init__(self, schema: Sequence[str] | None = None, max_values: int = 1000,
                 edges: Mapping | None = None, missing: str = "skip") -> None:
        if missing not in MISSING_RULES:
            raise FeatureError(f"missing must be one of {MISSING_RULES}, got {missing!r}")
        if missing == "value" and schema is None:
            raise FeatureError('missing="value" needs a schema (the attributes every event has)')
        self.missing = missing
        self.schema = None if schema is None else frozenset(schema)
        self.given_edges = dict(edges or {})  # numeric attribute → edges fixed from the start
        self.max_values = max_values
        self.names = ValueIndex()
        self.values: list[ValueIndex] = []  # category strings and bin numbers 0..n-1
        self.gcodes: list[list[int]] = []  # per attribute: local code → global code
        self.attr_of: list[int] = []  # global code → attribute
        self.edges: list[np.ndarray | None] = []  # numeric: bin edges once fixed
        self.dropped = 0
        # derived, not state: per attribute, (edges, edges as floats, global code of each bin) and
        # the local → global table as an array (valid while its length is that of gcodes + 1)
        self._bin_cache: dict[int, tuple[np.ndarray, list[float], list[int]]] = {}
        self._table_cache: dict[int, np.ndarray] = {}

    def __getstate__(self) -> dict:  # the caches are derived: never pickled
        return {**self.__dict__, "_bin_cache": {}, "_table_cache": {}}

    def __setstate__(self, state: dict) -> None:  # (older pickles have no caches)
        self.__dict__.update({"_bin_cache": {}, "_table_cache": {}, **state})

    @property
    def n_codes(self) -> int:
        return len(self.attr_of)

    def n_values(self) -> np.ndarray:
        return np.array([len(v) for v in self.values], np.int64)

    def columns(self, batch: Batch) -> list[tuple[object, str, np.ndarray]]:
        """(name, kind, column) of the batch's fields, in a fixed (name) order."""
        cols = [(f, CAT, c) for f, c in batch.categorical.items()]
        cols += [(f, NUM, c) for f, c in batch.numeric.items()]
        return sorted(cols, key=lambda t: (str(t[0]), t[1]))

    def check(self, batch: Batch) -> None:
        """Refuse the batch (before any change) for fields outside the declared schema."""
        if self.schema is None:
            return
        for name, kind, col in self.columns(batch):
            if name not in self.schema and _present(kind, col).any():
                raise FeatureError(f"unknown attribute {name!r}; the model's attributes are "
                                   f"{sorted(self.schema)}")

    def check_values(self, batch: Batch) -> None:
        """Refuse (LimitError, before any change) a batch that would give an attribute more than
        ``max_values`` categories."""
        for name, kind, col in self.columns(batch):
            if kind == NUM:
                continue
            a = self.names.get(name)
            have, new = (self.n_categories(a) if a >= 0 else 0), set()
            for v in col[_present(kind, col)].tolist():
                if isinstance(v, str) and v not in new and (a < 0 or v not in self.values[a]):
                    if have + len(new) >= self.max_values:
                        raise LimitError("max_values", self.max_values, v,
                                         f"attribute {name!r}: value {v!r} would exceed max_values="
                                         f"{self.max_values:,} (it has {have:,} categories)")
                    new.add(v)

    def check_merge(self, other: Attributes) -> None:
        """Refuse (LimitError) a merge that would give an attribute more than ``max_values``."""
        for b, name in enumerate(other.names.values):
            a = self.names.get(name)
            new = [v for v in other.values[b].values if isinstance(v, str)
                   and (a < 0 or v not in self.values[a])]
            have = self.n_categories(a) if a >= 0 else 0
            if new and have + len(new) > self.max_values:
                raise LimitError("max_values", self.max_values, new[0],
                                 f"attribute {name!r} would have {have + len(new):,} categories, "
                                 f"over max_values={self.max_values:,}")

    def add_attribute(self, name: object) -> int:
        a = self.names.add(name)
        if a == len(self.values):
            self.values.append(ValueIndex())
            self.gcodes.append([])
            self.edges.append(None)
            if name in self.given_edges:
                self.fix_edges(a, np.sort(np.asarray(self.given_edges[name], np.float64)))
        return a

    def add_value(self, a: int, value: object) -> int:
        """Local code of ``value`` for attribute ``a``, adding it (and a global code); -1 if the
        attribute already has ``max_values`` categories (bins, bounded by ``bins``, always fit)."""
        local = self.values[a].get(value)
        if local >= 0:
            return local
        if isinstance(value, str) and self.n_categories(a) >= self.max_values:
            self.dropped += 1
            return -1
        local = self.values[a].add(value)
        self.gcodes[a].append(len(self.attr_of))
        self.attr_of.append(a)
        return local

    def n_categories(self, a: int) -> int:
        return sum(isinstance(v, str) for v in self.values[a].values)

    def fix_edges(self, a: int, edges: np.ndarray) -> None:
        self.edges[a] = np.asarray(edges, np.float64)
        for b in range(len(self.edges[a]) + 1):
            self.add_value(a, b)

    def global_codes(self, a: int, local: np.ndarray) -> np.ndarray:
        table = self._table_cache.get(a)
        if table is None or len(table) != len(self.gcodes[a]) + 1:  # codes are only ever appended
            table = self._table_cache[a] = np.array(self.gcodes[a] + [-1], np.int64)  # local -1 → -1
        return table[local]

    def bins(self, a: int) -> tuple[list[float], list[int]]:
        """Numeric attribute ``a`` (its edges fixed): its edges, and the global code of each bin
        (-1 for a bin without one)."""
        edges = self.edges[a]
        cached = self._bin_cache.get(a)
        if cached is None or cached[0] is not edges:
            local = [self.values[a].get(b) for b in range(len(edges) + 1)]
            codes = [self.gcodes[a][i] if i >= 0 else -1 for i in local]
            cached = self._bin_cache[a] = (edges, edges.tolist(), codes)
        return cached[1], cached[2]

    def bin_code(self, a: int, value: float) -> int:
        """Global code of the bin of ``value`` (a finite float) in attribute ``a``, its edges fixed:
        :func:`bin_codes` of one value (a value equal to an edge falls in the lower bin)."""
        edges, codes = self.bins(a)
        return codes[bisect_left(edges, value) if value == value else len(edges)]  # NaN: last, as numpy

    def encode(self, batch: Batch, learn: bool) -> np.ndarray:
        """Codes (n, attributes) with -1 for missing, unseen (when not learning) or not yet binned."""
        if learn:
            self.check(batch)
            for name, kind, col in self.columns(batch):
                if _present(kind, col).any():
                    self.add_attribute(name)
        else:
            self.check(batch)  # the same fields are refused when predicting as when learning
        if self.missing == "value":
            for name in sorted(self.schema, key=str):
                self.add_attribute(name)
        codes = np.full((batch.n, len(self.names)), -1, np.int64)
        carried = np.zeros(codes.shape, bool)
        for name, kind, col in self.columns(batch):
            a = self.names.get(name)
            if a >= 0:
                column = self.encode_column(a, kind, col, learn)
                codes[:, a] = np.where(column >= 0, column, codes[:, a])
                carried[:, a] |= _present(kind, col)
        if self.missing == "value":
            self._code_missing(codes, ~carried, learn)
        return codes

    def _code_missing(self, codes: np.ndarray, missing: np.ndarray, learn: bool) -> None:
        """Under missing="value": the MISSING category's code where an attribute is missing."""
        for a in np.flatnonzero(missing.any(axis=0)).tolist():
            local = self.add_value(a, MISSING) if learn else self.values[a].get(MISSING)
            if local >= 0:
                codes[missing[:, a], a] = self.gcodes[a][local]

    def missing_codes(self, carried: set) -> list[int]:
        """Under missing="value": the codes of MISSING of every attribute not in ``carried``
        (names), for replays of buffered events; [] under "skip"."""
        if self.missing != "value":
            return []
        out = []
        for a, name in enumerate(self.names.values):
            local = self.values[a].get(MISSING)
            if name not in carried and local >= 0:
                out.append(self.gcodes[a][local])
        return out

    def encode_column(self, a: int, kind: str, col: np.ndarray, learn: bool) -> np.ndarray:
        present = np.flatnonzero(_present(kind, col))
        if kind == NUM:
            out = np.full(len(col), -1, np.int64)
            if self.edges[a] is not None:  # bin number → its global code (categories may come first)
                out[present] = np.array(self.bins(a)[1], np.int64)[bin_codes(self.edges[a], col[present])]
            return out
        local = np.full(len(col), -1, np.int64)
        if learn:
            local[present] = [self.add_value(a, v) for v in col[present].tolist()]
        else:
            local[present] = self.values[a].lookup(col[present].tolist())
        return self.global_codes(a, local)

    def code_of(self, a: int, value: object) -> int:
        """Global code of one raw value (for replays); -1 if it has none (yet)."""
        if isinstance(value, str):
            local = self.values[a].get(value)
            return self.gcodes[a][local] if local >= 0 else -1
        if self.edges[a] is None:
            return -1
        return self.bin_code(a, float(value))

    def canonical_order(self) -> tuple[list[int], np.ndarray]:
        """Attributes sorted by name, and the global codes in that order (values by appearance)."""
        attrs = sorted(range(len(self.names)), key=lambda a: str(self.names.values[a]))
        order = [g for a in attrs for g in self._canonical_codes(a)]
        return attrs, np.array(order, np.int64)

    def _canonical_codes(self, a: int) -> list[int]:
        """Attribute ``a``'s global codes: bins in bin order, then categories by first appearance
        (bins are added when the warm-up ends, which batch boundaries must not change)."""
        values = self.values[a].values
        bins = sorted((v, g) for v, g in zip(values, self.gcodes[a], strict=True) if not isinstance(v, str))
        return [g for _, g in bins] + [g for v, g in zip(values, self.gcodes[a], strict=True)
                                       if isinstance(v, str)]

    def canonical_values(self, a: int) -> list:
        local = {g: v for v, g in zip(self.values[a].values, self.gcodes[a], strict=True)}
        return [local[g] for g in self._canonical_codes(a)]

    def memory_bytes(self) -> int:
        return 8 * (len(self.attr_of) + sum(len(g) for g in self.gcodes))


def _present(kind: str, col: np.ndarray) -> np.ndarray:
    return ~np.isnan(col) if kind == NUM else col != None  # noqa: E711 (object array: elementwise)
