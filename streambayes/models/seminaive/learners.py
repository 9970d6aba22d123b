"""The semi-naive learners, on the naive Bayes skeleton (class index, decay, merge, state).

>>> m = AODE()
>>> m.learn_many([{"colour": "green", "root": "curled"}, {"colour": "dark", "root": "stiff"}],
...              ["good", "bad"])
>>> m.predict_one({"colour": "green", "root": "curled"})
'good'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from streambayes.features.batch import MAX_ABS_VALUE
from streambayes.models.base import NaiveBayesBase
from streambayes.models.seminaive.kdb import KDBTable
from streambayes.models.seminaive.ode import AODETable
from streambayes.models.seminaive.spode import SPODETable
from streambayes.models.seminaive.tan import TANTable
from streambayes.stats.smoothing import log_normalize


class _SemiNaive(NaiveBayesBase):
    """Common constructor arguments; the estimators hold their own class × value statistics.

    Their work per event grows with the square of the number of attributes, so ``max_fields``
    defaults to 100 here (10,000 for naive Bayes) and ``max_values`` to 1,000 categories."""

    use_prior = False  # every estimator carries P(c, ·) itself

    def __init__(self, alpha: float = 1.0, m: float | None = None, *, bins: int = 5,
                 warmup: int = 100, max_values: int = 1000, schema: Sequence[str] | None = None,
                 edges: Mapping[str, Sequence[float]] | None = None, max_bytes: int = 512 * 2**20,
                 missing: str = "skip", decay: float | None = None,
                 prior_alpha: float = 0.0, class_prior: Mapping | None = None, n_features: int = 2**20,
                 text_fields: Sequence[str] = ("text",), lowercase: bool = True,
                 bigrams: bool = False, max_classes: int = 1000, max_fields: int = 100) -> None:
        self.alpha, self.m = alpha, m
        self.bins, self.warmup, self.max_values, self.max_bytes = bins, warmup, max_values, max_bytes
        self.missing = missing
        self.schema = None if schema is None else sorted(schema)
        self.edges = None if edges is None else {k: [float(e) for e in v] for k, v in edges.items()}
        super().__init__(prior_alpha=prior_alpha, class_prior=class_prior, decay=decay,
                         n_features=n_features, text_fields=text_fields, lowercase=lowercase,
                         bigrams=bigrams, max_classes=max_classes, max_fields=max_fields,
                         max_values=max_values)

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop("_codes_memo", None)  # the last event's codes (and values): never pickled
        return state

    # -- per event, without the mini-batch machinery (River style) ----------------------------
    def _event_codes(self, x: Mapping, learn: bool = False) -> list | None:
        """The codes of an event (by attribute, -1 missing or unseen) when it can take the per-event
        path: no decay, every field a known attribute holding a string, a bool (the category
        "true" or "false"), None (missing=skip) or a number (a Python int or float within the
        batch path's range) of an attribute whose bins are fixed, and (``learn``) every category
        seen before. None otherwise: the caller takes the mini-batch path, which handles
        everything, errors included."""
        table = self._components[0]
        attrs = table.attrs
        if self.decay is not None or attrs.missing != "skip" or table.buffers:
            return None
        # River's loop predicts an event, then learns it: its codes are made once. The very same
        # values (by identity, kept alive by the memo) under the same names, of the same
        # statistics (table and version), have the same codes.
        names, values = tuple(x), tuple(x.values())
        ids = tuple(map(id, values))
        memo = getattr(self, "_codes_memo", None)
        if memo is not None and memo[0] is table and memo[1] == table.version and memo[3] == ids \
                and memo[2] == names:
            codes, unseen = memo[5], memo[6]
        else:
            codes, unseen = self._codes_of(x, table)
            self._codes_memo = (table, table.version, names, ids, values, codes, unseen)
        return None if codes is None or (learn and unseen) else codes

    def _codes_of(self, x: Mapping, table) -> tuple[list | None, bool]:
        """(codes, whether a category was unseen) of :meth:`_event_codes`; codes None where the
        event takes the mini-batch path however it is used."""
        attrs = table.attrs
        unseen = False
        codes = [-1] * len(attrs.names)
        name_of, values, gcodes, edges = attrs.names.table.get, attrs.values, attrs.gcodes, attrs.edges
        text_fields = self.text_fields
        for field, value in x.items():
            a = name_of(field)
            if a is None:
                return None, unseen
            kind = type(value)
            if kind is str and field in text_fields:  # text, not a category (the batch path's rule)
                return None, unseen
            if kind is str or kind is bool:
                local = values[a].table.get(value if kind is str else ("true" if value else "false"))
                if local is not None:
                    codes[a] = gcodes[a][local]
                else:
                    unseen = True
            elif kind is float or kind is int:  # (numpy's numbers take the batch path)
                if edges[a] is None:
                    return None, unseen
                try:
                    v = float(value)
                except OverflowError:  # an int past float64: the batch path says so
                    return None, unseen
                if not -MAX_ABS_VALUE <= v <= MAX_ABS_VALUE:  # inf, NaN or too large: refused there
                    return None, unseen
                codes[a] = attrs.bin_code(a, v)
            elif value is not None:
                return None, unseen
        return codes, unseen

    def learn_one(self, x: Mapping, y, w: float = 1.0) -> None:
        """As ``learn_many([x], [y], [w])``; an event whose class and values are all known takes
        a per-event path (its pairs buffered until the counts are read)."""
        codes = self._event_codes(x, learn=True) if len(x) else None
        self._codes_memo = None  # used: the event's values are not kept alive past it
        c = self._classes.get(y) if codes is not None else -1
        if (c < 0 or type(w) not in (int, float) or not 0 < w < math.inf
                or not self._components[0].learn_event(c, codes, float(w))):
            return super().learn_one(x, y, w)
        self._class_counts[c] += w
        self._prior_cache = None
        self.n_events += 1

    def predict_proba_one(self, x: Mapping) -> dict:
        codes = self._event_codes(x)
        k = len(self._classes)
        if codes is None or k < 2:
            return super().predict_proba_one(x)
        table = self._components[0]
        if hasattr(table, "event_likelihood"):  # AODE: products, no logs
            likelihood = table.event_likelihood(codes)
            if likelihood is not None:
                total = sum(likelihood)
                return dict(zip(self._classes.values, [v / total for v in likelihood], strict=True))
        jll = table.event_log_likelihood(codes) if hasattr(table, "event_log_likelihood") else None
        if jll is None:
            proba = np.exp(log_normalize(table.codes_log_likelihood(np.array([codes], np.int64), 1.0)))[0]
        else:  # finite (alpha > 0)
            proba = np.exp(jll - jll.max())
            proba /= proba.sum()
        return dict(zip(self._classes.values, proba.tolist(), strict=True))

    def _table_args(self) -> dict:
        return {"alpha": self.alpha, "m": self.m, "bins": self.bins, "warmup": self.warmup,
                "max_values": self.max_values, "schema": self.schema, "edges": self.edges,
                "max_bytes": self.max_bytes, "missing": self.missing}


class AODE(_SemiNaive):
    """Averaged one-dependence estimators (Webb, Boughton & Wang 2005); ``min_count`` is m'."""

    name = "aode"

    def __init__(self, alpha: float = 1.0, m: float | None = None, min_count: float = 1.0,
                 **kwargs) -> None:
        self.min_count = min_count
        super().__init__(alpha, m, **kwargs)

    def _make_components(self) -> list:
        return [AODETable(min_count=self.min_count, **self._table_args())]


class SPODE(_SemiNaive):
    """Super-parent one-dependence estimator; ``parent=None`` chooses it online (``select``)."""

    name = "spode"

    def __init__(self, alpha: float = 1.0, m: float | None = None, parent=None, select: str = "cmi",
                 **kwargs) -> None:
        self.parent, self.select = parent, select
        super().__init__(alpha, m, **kwargs)

    @property
    def super_parent(self) -> object:
        return self._components[0].super_parent()

    def _make_components(self) -> list:
        return [SPODETable(parent=self.parent, select=self.select, **self._table_args())]


class TAN(_SemiNaive):
    """Tree augmented naive Bayes (Friedman, Geiger & Goldszmidt 1997), its tree derived from
    the counts: ``root`` is ``"mi"`` (largest I(x_i; y)), an attribute's name, or ``"average"``
    (averaged TAN: the mean joint of the tree rooted at each attribute; ``tree()`` shows the
    ``"mi"`` rooting; on the bench's seven UCI sets it moves the error by at most 0.003); the tree is
    re-derived once ``refit_every`` events were learned since the last time (1: always current).

    Edges are weighted by ``edge_weight``: ``"bayes"`` (default), the gain in the Bayesian
    (Dirichlet, pseudo-count ``alpha``) score of the child's family, the larger of the two
    directions, as Weka's BayesNet TAN scores them (a pair whose gain is not positive is not
    linked); or ``"cmi"``, I(x_i; x_j | y) (Friedman et al.). The defaults ``alpha=0.25`` and
    ``"bayes"`` had the lowest mean 10-fold error over the five shared UCI sets and Weka's
    soybean and breast-cancer, of alpha in {0.1, 0.25, 0.5, 1} × {"cmi", "bayes"}
    (bench/seminaive.py folds, seed 1; chosen on the folds that are reported, not nested).

    >>> m = TAN()
    >>> m.learn_many([{"a": "x", "b": "x", "c": "u"}, {"a": "y", "b": "y", "c": "u"},
    ...               {"a": "x", "b": "x", "c": "v"}, {"a": "y", "b": "y", "c": "v"}], [0, 0, 1, 1])
    >>> m.tree()  # b copies a given the class; c, independent of both, stays a root
    [('a', 'b')]
    """

    name = "tan"

    def __init__(self, alpha: float = 0.25, m: float | None = None, root="mi", refit_every: int = 1,
                 edge_weight: str = "bayes", **kwargs) -> None:
        self.root, self.refit_every, self.edge_weight = root, refit_every, edge_weight
        super().__init__(alpha, m, **kwargs)

    def tree(self) -> list[tuple]:
        """Directed edges ``(parent, child)`` of the tree in use (attribute names)."""
        return self._components[0].tree(self._forget.to_true())

    def structure(self) -> dict:
        """Each attribute's parents besides the class: ``{attribute: [parent]}``."""
        return {child: list(ps) for child, ps in self._components[0].structure(self._forget.to_true())}

    def _make_components(self) -> list:
        return [TANTable(root=self.root, refit_every=self.refit_every, edge_weight=self.edge_weight,
                         **self._table_args())]


class KDB(_SemiNaive):
    """k-dependence Bayesian classifier (Sahami 1996), k = 1 or 2, its structure derived from
    the counts like :class:`TAN`'s; with k = 2 the class × value³ table counts against
    ``max_bytes`` too."""

    name = "kdb"
    # alpha=1 and edge_weight="cmi" stay the defaults: of alpha in {0.25, 0.5, 1} × {"cmi", "bayes"}
    # they had the lowest mean 10-fold error for k = 1 and k = 2 over the seven sets of
    # bench/seminaive.py (the grid that chose TAN's)

    def __init__(self, alpha: float = 1.0, m: float | None = None, k: int = 1, refit_every: int = 1,
                 edge_weight: str = "cmi", **kwargs) -> None:
        self.k, self.refit_every, self.edge_weight = k, refit_every, edge_weight
        super().__init__(alpha, m, **kwargs)

    def structure(self) -> dict:
        """Each attribute's parents besides the class, strongest first: ``{attribute: [parents]}``."""
        return {child: list(ps) for child, ps in self._components[0].structure(self._forget.to_true())}

    def _make_components(self) -> list:
        return [KDBTable(k=self.k, refit_every=self.refit_every, edge_weight=self.edge_weight,
                         **self._table_args())]
