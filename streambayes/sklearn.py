"""scikit-learn face of the learners: estimators with ``fit``, ``partial_fit``, ``predict``,
``predict_proba``, ``predict_log_proba``, ``get_params`` / ``set_params``.

They take dense arrays, scipy sparse matrices and DataFrames (``n_samples × n_features``, as
scikit-learn's own naive Bayes do) and hold a pure streambayes learner: column ``j`` is token ``j``
of the token models (counts), or field ``"j"`` of the others (a Gaussian, a category, a binned
attribute of the semi-naive learners). Every estimator of :data:`ESTIMATORS` passes scikit-learn's
``check_estimator``; the only tag set beyond the input kinds is ``poor_score`` on the count models
(justified where it is set). Prediction of the token
models is one sparse product ``X @ L.T`` with ``L`` the per-class log-likelihood of one occurrence of
each column, derived from the learner's sparse count table (cached until it learns again), plus the
learner's per-class constant: the same numbers as the pure learner's batch prediction, at the speed
of scikit-learn's own naive Bayes.

scikit-learn is an optional dependency (``pip install streambayes[sklearn]``); this module needs it.

>>> import numpy as np
>>> X = np.array([[2, 0, 1], [0, 3, 0], [1, 0, 2]])
>>> MultinomialNB().fit(X, ["spam", "ham", "spam"]).predict([[1, 0, 0]]).tolist()
['spam']
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from streambayes import models as pure
from streambayes.features import Batch
from streambayes.features.batch import SparseRows
from streambayes.stats import log_normalize


class _NB(ClassifierMixin, BaseEstimator):
    """Shared plumbing; subclasses say which pure learner and how ``X`` becomes a batch."""

    _positive = False

    def _make(self, n_features: int):
        raise NotImplementedError

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = self._positive
        # count models on the checks' Gaussian blobs score as poorly as scikit-learn's own
        # MultinomialNB / ComplementNB / BernoulliNB (identical probabilities), which set this too
        tags.classifier_tags.poor_score = isinstance(self, _TokenNB)
        return tags

    # -- learning ------------------------------------------------------------------------------
    def fit(self, X, y, sample_weight=None):
        """Learn from ``X``, ``y`` afresh (forgets what was learned before)."""
        for name in ("model_", "classes_", "n_features_in_", "feature_names_in_"):
            if hasattr(self, name):
                delattr(self, name)
        return self._learn(X, y, None, sample_weight, fit=True)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Learn one more batch; ``classes`` (every label the stream will bring) on the first call."""
        return self._learn(X, y, classes, sample_weight, fit=False)

    def _learn(self, X, y, classes, sample_weight, fit: bool):
        first = not hasattr(self, "model_")
        X, y = validate_data(self, X, y, reset=first, accept_sparse="csr", dtype=np.float64,
                             ensure_min_samples=1)
        check_classification_targets(y)
        if fit:
            classes = np.unique(y)
        if first:
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit")
            self.classes_ = np.unique(np.asarray(classes))
            self.model_ = self._make(X.shape[1])
            self.model_._classes.codes(self.classes_.tolist())
            self.model_._grow_classes()
        elif classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(f"classes {np.unique(classes)} differ from the first call's {self.classes_}")
        unknown = np.setdiff1d(y, self.classes_)
        if len(unknown):
            raise ValueError(f"labels {unknown.tolist()} are not in classes {self.classes_.tolist()}")
        w = _check_sample_weight(sample_weight, X)
        if sample_weight is not None and not w.all():
            # a row of weight 0 brings no evidence, not even a new category (as removing it)
            keep = np.flatnonzero(w)
            X, y, w = X[keep], y[keep], w[keep]
        self.model_.learn_many(self._batch(X), y.tolist(), w)
        return self

    # -- prediction ----------------------------------------------------------------------------
    def _joint_log_likelihood(self, X) -> np.ndarray:
        check_is_fitted(self, "model_")
        X = validate_data(self, X, reset=False, accept_sparse="csr")  # integer counts stay (no copy)
        jll = self._jll(X)
        order = self.model_._classes.codes(self.classes_.tolist())  # learner's order → sorted
        return jll[:, order]

    def _jll(self, X) -> np.ndarray:
        return self.model_.joint_log_likelihood_many(self._batch(X))

    def predict_log_proba(self, X) -> np.ndarray:
        return log_normalize(self._joint_log_likelihood(X))

    def predict_proba(self, X) -> np.ndarray:
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        check_is_fitted(self, "model_")
        return self.classes_[np.argmax(self._joint_log_likelihood(X), axis=1)]


class _TokenNB(_NB):
    """Token models: column ``j`` counts token ``j``; prediction is one sparse product."""

    _positive = True

    def _batch(self, X) -> Batch:
        X = sp.csr_matrix(X) if not sp.issparse(X) else X.tocsr()
        X.sum_duplicates()
        if X.nnz and X.data.min() < 0:
            raise ValueError(f"Negative values in data passed to {type(self).__name__} (counts)")
        tokens = SparseRows(X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64))
        return Batch(X.shape[0], tokens, {}, {})

    def _jll(self, X) -> np.ndarray:
        if sp.issparse(X) and X.nnz and X.data.min() < 0 or not sp.issparse(X) and (X < 0).any():
            raise ValueError(f"Negative values in data passed to {type(self).__name__} (counts)")
        L, const = self._linear()
        X = self._presence(X)
        jll = np.asarray(X @ L.T) if sp.issparse(X) else X @ L.T
        return jll + const

    def _presence(self, X):
        return X

    def _linear(self) -> tuple[np.ndarray, np.ndarray]:
        """(L, const): ``log P(c) + Σ_j x_j L[c, j] + const[c]`` is the learner's joint
        log-likelihood; cached until the learner learns again."""
        m = self.model_
        key = (m.n_events, m._forget.t, len(m._classes))
        cached = getattr(m, "_sklearn_linear", None)  # on the learner: predict leaves the estimator unchanged
        if cached is not None and cached[0] == key:
            return cached[1]
        comp, scale = m._components[0], m._forget.to_true()
        k, d = len(m._classes), self.n_features_in_
        L = np.zeros((k, d))
        if comp.vocabulary:
            ids = np.arange(d, dtype=np.int64)
            cols = comp.table.index.lookup(ids) if len(comp.table) else np.full(d, -1)
            keep = cols >= 0 if comp.vocab_size is None else np.ones(d, bool)  # unseen: ignored
            counts = comp.table.gather(ids[keep]) if len(comp.table) else np.zeros((k, int(keep.sum())))
            L[:, keep] = comp.entry_scores(counts, scale)
        const = np.zeros(k) if comp.row_constant(scale) is None or not comp.vocabulary \
            else np.asarray(comp.row_constant(scale), np.float64)
        if m.use_prior or k == 1:
            const = const + m._log_prior()
        m._sklearn_linear = (key, (L, const))
        return L, const


class MultinomialNB(_TokenNB):
    """Multinomial naive Bayes over count columns; ``alpha`` is Lidstone smoothing (1 = Laplace)."""

    def __init__(self, alpha: float = 1.0):
        self.alpha = alpha

    def _make(self, n_features: int):
        return pure.MultinomialNB(alpha=self.alpha, n_features=_power_of_two(n_features))


class ComplementNB(_TokenNB):
    """Complement naive Bayes (Rennie et al. 2003) over count columns."""

    def __init__(self, alpha: float = 1.0, norm: bool = False):
        self.alpha, self.norm = alpha, norm

    def _make(self, n_features: int):
        return pure.ComplementNB(alpha=self.alpha, norm=self.norm, n_features=_power_of_two(n_features))


class BernoulliNB(_TokenNB):
    """Bernoulli naive Bayes: column ``j`` present when its value exceeds ``binarize``."""

    _positive = False

    def __init__(self, alpha: float = 1.0, binarize: float = 0.0):
        self.alpha, self.binarize = alpha, binarize

    def _make(self, n_features: int):
        return pure.BernoulliNB(alpha=self.alpha, n_features=_power_of_two(n_features))

    def _presence(self, X):
        if sp.issparse(X):
            X = X.copy()
            X.data = (X.data > self.binarize).astype(np.float64)
            X.eliminate_zeros()
            return X
        return (X > self.binarize).astype(np.float64)

    def _batch(self, X) -> Batch:
        return super()._batch(self._presence(X))

    def _jll(self, X) -> np.ndarray:
        L, const = self._linear()
        X = self._presence(X)
        return (np.asarray(X @ L.T) if sp.issparse(X) else X @ L.T) + const


class GaussianNB(_NB):
    """Gaussian naive Bayes over numeric columns; ``var_smoothing`` as scikit-learn's."""

    def __init__(self, var_smoothing: float = 1e-9):
        self.var_smoothing = var_smoothing

    def _make(self, n_features: int):
        return pure.GaussianNB(var_smoothing=self.var_smoothing, max_fields=max(n_features, 1))

    def _batch(self, X) -> Batch:
        return _numeric_batch(X)


class CategoricalNB(_NB):
    """Categorical naive Bayes: every column's values are categories (numbers too), Laplace by
    default; a value never seen in training is smoothed as one more category of its column."""

    def __init__(self, alpha: float = 1.0):
        self.alpha = alpha

    def _make(self, n_features: int):
        return pure.CategoricalNB(alpha=self.alpha, max_fields=max(n_features, 1))

    def _batch(self, X) -> Batch:
        return _numeric_batch(X)


class _SemiNaiveNB(_NB):
    """Semi-naive learners over numeric columns (column ``j`` is attribute ``"j"``): numbers are
    binned into ``bins`` equal-frequency bins once ``warmup`` rows fixed the edges."""

    def _batch(self, X) -> Batch:
        return _numeric_batch(X)

    def _common(self) -> dict:
        return {"alpha": self.alpha, "m": self.m, "bins": self.bins, "warmup": self.warmup}


class AODE(_SemiNaiveNB):
    """Averaged one-dependence estimators (Webb, Boughton & Wang 2005)."""

    def __init__(self, alpha: float = 1.0, m: float | None = None, min_count: float = 1.0, bins: int = 5,
                 warmup: int = 100):
        self.alpha, self.m, self.min_count, self.bins, self.warmup = alpha, m, min_count, bins, warmup

    def _make(self, n_features: int):
        return pure.AODE(min_count=self.min_count, **self._common())


class SPODE(_SemiNaiveNB):
    """Super-parent one-dependence estimator; ``parent`` a column's name (``"0"`` …) or chosen online."""

    def __init__(self, alpha: float = 1.0, m: float | None = None, parent: str | None = None,
                 select: str = "cmi", bins: int = 5, warmup: int = 100):
        self.alpha, self.m, self.parent, self.select = alpha, m, parent, select
        self.bins, self.warmup = bins, warmup

    def _make(self, n_features: int):
        return pure.SPODE(parent=self.parent, select=self.select, **self._common())


class TAN(_SemiNaiveNB):
    """Tree augmented naive Bayes (Friedman, Geiger & Goldszmidt 1997)."""

    def __init__(self, alpha: float = 1.0, m: float | None = None, root: str = "mi", refit_every: int = 1,
                 bins: int = 5, warmup: int = 100):
        self.alpha, self.m, self.root, self.refit_every = alpha, m, root, refit_every
        self.bins, self.warmup = bins, warmup

    def _make(self, n_features: int):
        return pure.TAN(root=self.root, refit_every=self.refit_every, **self._common())


class KDB(_SemiNaiveNB):
    """k-dependence Bayesian classifier (Sahami 1996), k = 1 or 2."""

    def __init__(self, alpha: float = 1.0, m: float | None = None, k: int = 1, refit_every: int = 1,
                 bins: int = 5, warmup: int = 100):
        self.alpha, self.m, self.k, self.refit_every = alpha, m, k, refit_every
        self.bins, self.warmup = bins, warmup

    def _make(self, n_features: int):
        return pure.KDB(k=self.k, refit_every=self.refit_every, **self._common())


def _numeric_batch(X) -> Batch:
    """Column ``j`` as the numeric field ``"j"`` (sparse input made dense: these models read
    every column of every row)."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X, np.float64)
    numeric = {str(j): np.ascontiguousarray(X[:, j], np.float64) for j in range(X.shape[1])}
    return Batch(X.shape[0], SparseRows.empty(X.shape[0]), {}, numeric)


def _power_of_two(n: int) -> int:
    """The hashing space of a learner over ``n`` columns (columns are ids below it)."""
    return 1 << max(1, (max(n, 1) - 1).bit_length())


ESTIMATORS: dict[str, type] = {"mnb": MultinomialNB, "bnb": BernoulliNB, "cnb": ComplementNB,
                               "catnb": CategoricalNB, "gnb": GaussianNB, "aode": AODE, "spode": SPODE,
                               "tan": TAN, "kdb": KDB}

__all__ = ["AODE", "ESTIMATORS", "KDB", "SPODE", "TAN", "BernoulliNB", "CategoricalNB", "ComplementNB",
           "GaussianNB", "MultinomialNB"]
