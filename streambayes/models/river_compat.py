"""River faces of the learners: real ``river.base.MiniBatchClassifier`` subclasses.

The pure learners (``streambayes.models``) import no River; the classes here subclass each of them
together with River's base class, so River's checks, pipelines, bagging, ``clone(new_params)`` and
``_get_params`` work as for River's own estimators. What they add to the pure learners:

- an ``x`` may be a plain string (the event's text) or a dict; numpy scalars (``numpy.bool_``,
  ``numpy.int64``, ``numpy.float32`` ...) are read as the Python values they stand for;
- the token models (:class:`MultinomialNB`, :class:`BernoulliNB`, :class:`ComplementNB`) read every
  numeric value as the count of the token named by its key and every other string as the token
  ``key=value`` (River's convention for bag-of-words dicts; strings under a ``text_fields`` key
  are tokenized): ``BagOfWords() | MultinomialNB()`` learns word counts, whatever the words;
- :class:`NaiveBayes` reads numbers as Gaussian measurements, or with ``numeric="counts"`` as token
  counts; the default ``"auto"`` reads an event whose values are all non-negative integers (River's
  ``BagOfWords`` output) as counts and any other event's numbers as measurements;
- ``learn_many`` / ``predict_proba_many`` / ``predict_many`` take River's pandas frames too.

>>> from river import compose, evaluate, feature_extraction, metrics
>>> stream = [("free prize, text me", "spam"), ("lunch at noon", "ham")] * 5
>>> model = compose.Pipeline(feature_extraction.BagOfWords(), MultinomialNB())
>>> evaluate.progressive_val_score(stream, model, metrics.Accuracy())
Accuracy: 88.89%
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence

import numpy as np
from river import base

from streambayes import models as pure
from streambayes.errors import FeatureError, ModelError
from streambayes.features import Batch
from streambayes.features.batch import MAX_ABS_VALUE, SparseRows
from streambayes.models import token_one

NUMERIC_MODES = ("auto", "gaussian", "counts")


def _py(value):
    """A numpy scalar as the Python value it stands for; anything else unchanged."""
    return value.item() if isinstance(value, np.generic) else value


def _plain(x):
    """``x`` with numpy scalars (keys and values) as Python values; a string stays a string."""
    if isinstance(x, str):
        return x if type(x) is str else str(x)  # numpy.str_ too
    if isinstance(x, Mapping):
        return {_py(k): _py(v) for k, v in x.items()}
    raise FeatureError(f"an event is a dict of features or a string, got {type(x).__name__}")


def _is_frame(X) -> bool:
    return type(X).__module__.split(".")[0] == "pandas"


def _frame_rows(X) -> list[dict]:
    """Rows of a pandas frame as dicts, NaN (a missing value) left out."""
    cols = list(X.columns)
    return [{c: v for c, v in zip(cols, row, strict=True) if not (isinstance(v, float) and math.isnan(v))}
            for row in X.itertuples(index=False, name=None)]


def _count(key, value) -> float:
    v = float(value)
    if not math.isfinite(v) or v < 0 or v > MAX_ABS_VALUE:
        raise FeatureError(f"field {key!r}: a count must be finite, >= 0 and <= {MAX_ABS_VALUE:g}, "
                           f"got {value!r}")
    return v


class _RiverFace:
    """What every River face adds to a pure learner (mixed in before it)."""

    def _get_params(self) -> dict:
        return self.params()

    def clone(self, new_params: Mapping | None = None, include_attributes: bool = False):
        params = {**self.params(), **copy.deepcopy(dict(new_params or {}))}
        clone = type(self)(**params)
        if include_attributes:
            for name, value in vars(self).items():
                if name not in params:
                    setattr(clone, name, copy.deepcopy(value))
        return clone

    @property
    def _multiclass(self) -> bool:
        return True

    def _unit_test_skips(self) -> set:
        return set()

    # -- events ------------------------------------------------------------------------------
    def _events(self, X) -> Batch | list:
        if isinstance(X, Batch):
            return X
        if _is_frame(X):
            X = _frame_rows(X)
        return [_plain(x) for x in X]

    def _labels(self, y) -> list:
        if _is_frame(y):
            y = y.tolist()
        return [_py(v) for v in y]

    def learn_one(self, x, y, w: float = 1.0, **kwargs) -> None:
        super().learn_one(_plain(x), _py(y), _py(w))

    def learn_many(self, X, y, w: Sequence[float] | None = None, **kwargs) -> None:
        super().learn_many(self._events(X), self._labels(y), w)

    def predict_proba_one(self, x, **kwargs) -> dict:
        return super().predict_proba_one(_plain(x))

    def predict_one(self, x, **kwargs):
        return super().predict_one(_plain(x))

    def predict_proba_many(self, X):
        proba = super().predict_proba_many(self._events(X))
        if not _is_frame(X):
            return proba
        import pandas as pd

        return pd.DataFrame(proba, columns=self.classes, index=X.index)

    def predict_many(self, X):
        if not _is_frame(X):
            proba = super().predict_proba_many(self._events(X))
            if not len(self.classes):
                return [None] * len(proba)
            return [self.classes[i] for i in proba.argmax(axis=1)]
        import pandas as pd

        proba = self.predict_proba_many(X)
        if proba.empty:
            return pd.Series([None] * len(X), index=X.index, dtype=object)
        return proba.idxmax(axis="columns")


class _ByBatch(_RiverFace):
    """Faces whose events become a batch of their own (token counts, mixed counts): one event is
    a batch of one."""

    def learn_one(self, x, y, w: float = 1.0, **kwargs) -> None:
        self.learn_many([x], [y], [w])

    def predict_proba_one(self, x, **kwargs) -> dict:
        if not len(self._classes):
            return {}
        proba = self.predict_proba_many([x])[0]
        return dict(zip(self._classes.values, proba.tolist(), strict=True))


class _TokenFace(_ByBatch):
    """Token models: every feature of an event is a token count (see the module's notes)."""

    def _events(self, X) -> Batch:
        if isinstance(X, Batch):
            return X
        return self._token_batch(super()._events(X))

    def _token_batch(self, xs: list) -> Batch:
        f = self._featurizer
        indptr = np.zeros(len(xs) + 1, np.int64)
        names: list[str] = []
        values: list[float] = []
        for i, x in enumerate(xs):
            indptr[i + 1] = indptr[i] + _tokens_of(x, f, names, values)
        buckets = f.hasher.buckets(names)
        ids = np.fromiter(buckets, np.int64, len(buckets))
        tokens = SparseRows(indptr, ids, np.array(values, np.float64))
        return Batch(len(xs), tokens, {}, {})


    def predict_one(self, x, **kwargs):
        proba = self.predict_proba_one(x)
        return max(proba, key=proba.get) if proba else None


def _tokens_of(x, f, names: list, values: list) -> int:
    """Append the tokens (names) and their counts (values) of one event; return how many."""
    start = len(names)
    if isinstance(x, str):
        words = f.tokenizer(x)
        names += words
        values += [1.0] * len(words)
        return len(names) - start
    for key, value in x.items():
        if value is None:
            continue
        if isinstance(value, str):
            if key in f.text_fields:
                words = f.tokenizer(value)
                names += words
                values += [1.0] * len(words)
            else:
                names.append(f"{key}={value}")
                values.append(1.0)
        elif isinstance(value, bool):
            names.append(f"{key}={'true' if value else 'false'}")
            values.append(1.0)
        elif isinstance(value, int | float):
            names.append(str(key))
            values.append(_count(key, value))
        else:
            raise FeatureError(f"field {key!r}: expected str, bool, int, float or null, "
                               f"got {type(value).__name__}")
    return len(names) - start


class MultinomialNB(_TokenFace, pure.MultinomialNB, base.MiniBatchClassifier):
    """River face of :class:`streambayes.models.MultinomialNB` (multinomial naive Bayes over tokens)."""

    def __init__(self, alpha: float | str | None = 1.0, m: float | None = None, **kwargs) -> None:
        super().__init__(alpha, m, **kwargs)  # alpha 1 as River's own MultinomialNB ("auto" on ask)

    def _more_tags(self) -> set:
        return {base.tags.POSITIVE_INPUT}  # counts, as River's own MultinomialNB

    def learn_one(self, x, y, w: float = 1.0, **kwargs) -> None:
        fast = self._fast_buckets(x)
        if fast is None:
            return super().learn_one(x, y, w)
        y = y if type(y) is str else _py(y)
        w = w if type(w) is float else float(_py(w))
        if not (math.isfinite(w) and w >= 0):
            raise ModelError("weights must be finite and >= 0")
        c = self._classes.get(y)
        if c < 0:  # a new class: checked against the bound, and room made for it
            if y is None:
                raise ModelError("learn_one: the label is missing (None)")
            self._classes.check_room([y], self.max_classes, "max_classes", "class")
            c = self._classes.add(y)
            self._grow_classes()
        self._class_counts[c] += w
        comp = self._components[0]
        token_one.learn_one(comp, c, fast, w) if token_one.fits(comp) else comp.learn_buckets(c, fast, w)
        self.n_events += 1
        self._refit_due()  # alpha="auto" refits at the same event counts as learn_many

    def predict_proba_one(self, x, **kwargs) -> dict:
        fast = self._fast_buckets(x) if len(self._classes) else None
        if fast is None:
            return super().predict_proba_one(x)
        comp = self._components[0]
        jll = token_one.score_one(comp, fast, self._one_prior()) if token_one.fits(comp) else \
            (self._log_prior() + comp.score_buckets(fast, 1.0)).tolist()
        top = max(jll)
        p = [math.exp(v - top) for v in jll]
        total = sum(p)
        return {c: v / total for c, v in zip(self._classes.values, p, strict=True)}

    def _fast_buckets(self, x) -> np.ndarray | None:
        """One event's token ids, each repeated as often as it counts, when the per-event path
        applies (plain counts, no decay, whole counts): the same sums as ``learn_many``. A pipeline
        transforms an event once to predict and again to learn: the second, equal dict reuses the
        first's ids."""
        if self._forget.active or not self._components[0].plain:
            return None
        if isinstance(x, str):
            return self._plain_buckets(x)
        last = self.__dict__.get("_last_counts")
        if last is not None and last[0] == x:
            return last[1]
        if type(x) is not dict or not x:
            return None
        keys, counts = list(x), list(x.values())
        if set(map(type, keys)) != {str} or set(map(type, counts)) != {int} or min(counts) < 0:
            return None  # strings, floats, numpy scalars: the batch path
        f = self._featurizer
        ids = np.fromiter(f.hasher.buckets(keys), np.int64, len(keys))
        if max(counts) != 1:
            ids = np.repeat(ids, counts)
        self._last_counts = (dict(x), ids)  # a copy: the caller's dict is never held
        return ids

    def __getstate__(self) -> dict:  # the last event is a cache: never pickled
        return {**super().__getstate__(), "_last_counts": None}


class BernoulliNB(_TokenFace, pure.BernoulliNB, base.MiniBatchClassifier):
    """River face of :class:`streambayes.models.BernoulliNB` (presence of tokens): a number is
    present when it is above 0 (River's ``true_threshold``), so any number is accepted."""

    def _token_batch(self, xs: list) -> Batch:
        present = [x if isinstance(x, str) else
                   {k: (1 if v > 0 else None) if isinstance(v, int | float) and not isinstance(v, bool) else v
                    for k, v in x.items()} for x in xs]
        return super()._token_batch(present)


class ComplementNB(_TokenFace, pure.ComplementNB, base.MiniBatchClassifier):
    """River face of :class:`streambayes.models.ComplementNB` (Rennie et al. 2003)."""

    def __init__(self, alpha: float | str | None = 1.0, norm: bool = False, **kwargs) -> None:
        super().__init__(alpha, norm, **kwargs)  # alpha 1 as River's own ComplementNB

    def _more_tags(self) -> set:
        return {base.tags.POSITIVE_INPUT}  # counts, as River's own ComplementNB


class NaiveBayes(_ByBatch, pure.NaiveBayes, base.MiniBatchClassifier):
    """River face of :class:`streambayes.models.NaiveBayes` (tokens + categories + Gaussians);
    ``numeric`` says how numbers are read: ``"gaussian"``, ``"counts"`` or ``"auto"`` (see the module)."""

    def __init__(self, alpha: float | str = 1.0, cat_alpha: float = 1.0, variance: str = "mle",
                 var_smoothing: float = 1e-2, numeric: str = "auto", **kwargs) -> None:
        if numeric not in NUMERIC_MODES:
            raise ModelError(f"numeric must be one of {', '.join(NUMERIC_MODES)}, got {numeric!r}")
        self.numeric = numeric
        super().__init__(alpha, cat_alpha, variance, var_smoothing, **kwargs)

    def _events(self, X) -> Batch | list:
        xs = super()._events(X)
        if isinstance(xs, Batch) or self.numeric == "gaussian":
            return xs
        if not any(self._as_counts(x) for x in xs):
            return xs
        return self._mixed_batch(xs)

    def _as_counts(self, x) -> bool:
        if isinstance(x, str) or not x:
            return False
        if self.numeric == "counts":
            return True
        return all(type(v) is int and v >= 0 for v in x.values())

    def _mixed_batch(self, xs: list) -> Batch:
        """Events whose numbers are token counts: their numbers join the text tokens."""
        f = self._featurizer
        rest, names, values, rows = [], [], [], []
        for i, x in enumerate(xs):
            if not self._as_counts(x):
                rest.append(x)
                continue
            counted = {k: v for k, v in x.items()
                       if isinstance(v, int | float) and not isinstance(v, bool)}
            rest.append({k: v for k, v in x.items() if k not in counted})
            n = _tokens_of(counted, f, names, values)
            rows += [i] * n
        batch = f.featurize(rest)
        buckets = np.fromiter(f.hasher.buckets(names), np.int64, len(names))
        tok = batch.tokens
        all_rows = np.concatenate([tok.row_ids(), np.array(rows, np.int64)])
        order = np.argsort(all_rows, kind="stable")
        indptr = np.zeros(batch.n + 1, np.int64)
        np.cumsum(np.bincount(all_rows, minlength=batch.n), out=indptr[1:])
        tokens = SparseRows(indptr, np.concatenate([tok.indices, buckets])[order],
                            np.concatenate([tok.values, np.array(values, np.float64)])[order])
        return Batch(batch.n, tokens, batch.categorical, batch.numeric)



class CategoricalNB(_RiverFace, pure.CategoricalNB, base.MiniBatchClassifier):
    """River face of :class:`streambayes.models.CategoricalNB` (every field a category)."""


class GaussianNB(_RiverFace, pure.GaussianNB, base.MiniBatchClassifier):
    """River face of :class:`streambayes.models.GaussianNB` (Gaussian over numeric fields)."""


class AODE(_RiverFace, pure.AODE, base.MiniBatchClassifier):
    """River face of :class:`streambayes.models.AODE` (averaged one-dependence estimators)."""


class SPODE(_RiverFace, pure.SPODE, base.MiniBatchClassifier):
    """River face of :class:`streambayes.models.SPODE` (a super-parent one-dependence estimator)."""


class TAN(_RiverFace, pure.TAN, base.MiniBatchClassifier):
    """River face of :class:`streambayes.models.TAN` (tree augmented naive Bayes)."""


class KDB(_RiverFace, pure.KDB, base.MiniBatchClassifier):
    """River face of :class:`streambayes.models.KDB` (k-dependence Bayesian classifier)."""


CLASSIFIERS: dict[str, type] = {cls.name: cls for cls in (
    NaiveBayes, MultinomialNB, BernoulliNB, ComplementNB, CategoricalNB, GaussianNB, AODE, SPODE, TAN, KDB)}


def river_model(name: str, **params):
    """The River face of a learner by its CLI name (``nb``, ``mnb`` ... ``kdb``)."""
    try:
        return CLASSIFIERS[name](**params)
    except KeyError:
        raise ModelError(f"no River face for model {name!r}; choose from {', '.join(CLASSIFIERS)}") from None


for _cls in pure.MODELS.values():  # the pure learners still count as River classifiers (duck-typed)
    if not issubclass(_cls, base.Classifier):
        base.Classifier.register(_cls)


def is_river_classifier(model: object) -> bool:
    """Whether River treats ``model`` as a classifier."""
    return isinstance(model, base.Classifier)
