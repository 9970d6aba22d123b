"""The online naive Bayes family: multinomial, Bernoulli, complement, categorical, Gaussian,
and ``NaiveBayes``, one posterior over text tokens + categorical fields + numeric fields.

All of them learn from an unbounded stream: labels are discovered as they appear, events
carry weights, ``decay`` forgets exponentially, and two learners trained on disjoint
streams ``merge`` into the learner trained on both.

>>> nb = MultinomialNB()
>>> nb.learn_one({"text": "win a free prize now"}, "spam")
>>> nb.learn_one({"text": "lunch tomorrow at noon"}, "ham")
>>> nb.predict_one({"text": "free prize"})
'spam'
>>> nb = NaiveBayes()
>>> nb.learn_many([{"text": "free prize", "n_links": 4, "tld": "biz"},
...                {"text": "see you at lunch", "n_links": 0, "tld": "org"}], ["spam", "ham"])
>>> sorted(nb.predict_proba_one({"text": "free lunch", "tld": "biz"}).items())[1][0]
'spam'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from streambayes.errors import ModelError
from streambayes.features.batch import MAX_ABS_VALUE
from streambayes.models import token_one
from streambayes.models.base import NaiveBayesBase
from streambayes.models.field_components import Categorical, Gaussian
from streambayes.models.token_components import Bernoulli, Complement, Multinomial
from streambayes.stats import log_normalize


class MultinomialNB(NaiveBayesBase):
    """Multinomial naive Bayes over hashed tokens (McCallum & Nigam 1998; Mitchell Table 6.2).

    Categorical fields become ``field=value`` tokens and numeric fields token counts.
    ``alpha`` is Lidstone smoothing: ``"auto"`` fits it to the counts by the Dirichlet evidence at
    event counts fixed by the stream (see :mod:`streambayes.stats.evidence`), a number fixes it
    (1 = Laplace); the default ``None`` is ``"auto"`` on plain counts and 1 under the ``tf``/``idf``/
    ``length_norm`` transforms (whose weights are not counts; there 1 scored better); ``m``
    switches to the m-estimate with a uniform prior ``p = 1/V``; ``vocab_size`` fixes ``V`` (else
    the vocabulary seen so far).
    """

    name = "mnb"

    def __init__(self, alpha: float | str | None = None, m: float | None = None,
                 vocab_size: int | None = None, *, prior_alpha: float = 0.0,
                 class_prior: Mapping | None = None,
                 decay: float | None = None, n_features: int = 2**20,
                 text_fields: Sequence[str] = ("text",), lowercase: bool = True,
                 bigrams: bool = False, max_classes: int = 1000,
                 max_fields: int = 10_000, max_values: int = 100_000, **text_options) -> None:
        self.alpha, self.m, self.vocab_size = alpha, m, vocab_size
        super().__init__(prior_alpha=prior_alpha, class_prior=class_prior, decay=decay,
                         n_features=n_features, text_fields=text_fields, lowercase=lowercase,
                         bigrams=bigrams, max_classes=max_classes,
                         max_fields=max_fields, max_values=max_values, **text_options)

    def _make_components(self) -> list:
        return [Multinomial(self.n_features, self._text_alpha(), True, self.vocab_size, self.m,
                            **self._transform())]

    # A single event made only of text is the common case of per-event streaming: these skip
    # building a one-row batch, with the same arithmetic (learn_many gives the same state), and
    # a prequential learn_one(x) right after predict_proba_one(x) reuses x's tokens.
    def _reset(self) -> None:
        super()._reset()
        self._last_plain: tuple | None = None
        self._prior_list: tuple | None = None  # (class counts, the log-prior), as lists

    def _plain_buckets(self, x: Mapping) -> np.ndarray | None:
        last = self._last_plain  # (x, its items, buckets): the same dict with the same values
        if last is not None and last[0] is x and (isinstance(x, str) or _same_items(x, last[1])):
            return last[2]
        f = self._featurizer
        if isinstance(x, str):  # a plain string is the event's text
            out = f.hasher.bucket_ids(f.tokenizer(x))
            self._last_plain = (x, (), out)
            return out
        items = tuple(x.items())
        if len(items) == 1 and items[0][1].__class__ is str and items[0][0] in f.text_fields:
            out = f.hasher.bucket_ids(f.tokenizer(items[0][1]))  # one text: the common event
            self._last_plain = (x, items, out)
            return out
        buckets = []
        for key, value in items:
            if value is None:
                if key not in f.text_fields:
                    return None
            elif key not in f.text_fields or not isinstance(value, str):
                return None
            else:
                buckets += f.hasher.buckets(f.tokenizer(value))
        out = np.fromiter(buckets, np.int64, len(buckets))
        self._last_plain = (x, items, out)
        return out

    def __getstate__(self) -> dict:  # the last event is a cache: never pickled (nor aliased)
        state = {**self.__dict__, "_last_plain": None, "_prior_list": None}
        state.pop("_last_batch", None)  # the last batch is a cache too (NaiveBayesBase's rule)
        return state

    def _one_ready(self) -> bool:
        """Whether the per-event fast path serves this model now (no decay, plain counts)."""
        return self._forget.factor is None and token_one.fits(self._components[0])

    def _one_prior(self) -> list[float]:
        """``log P(c)`` as plain floats: the values of :meth:`_log_prior`, made without its array
        in the common case (maximum likelihood, every class seen), cached with the class counts."""
        c = self._class_counts.tolist()
        cached = getattr(self, "_prior_list", None)  # (absent from older pickles)
        if cached is not None and cached[0] == c:
            return cached[1]
        if self.class_prior is None and self.prior_alpha == 0 and len(c) <= 32 and min(c) > 0:
            log_total = math.log(math.fsum(c))  # as _derive_log_prior computes it
            prior = [math.log(v) - log_total for v in c]
        else:
            prior = self._log_prior().tolist()
        self._prior_list = (c, prior)
        return prior

    def learn_one(self, x: Mapping, y, w: float = 1.0) -> None:
        buckets = self._plain_buckets(x)
        if buckets is None or not self._one_ready():
            return super().learn_one(x, y, w)
        if y is None:
            raise ModelError("learn_one: the label is missing (None)")
        w = float(w)
        if not (math.isfinite(w) and w >= 0):
            raise ModelError("weights must be finite and >= 0")
        c = self._classes.get(y)
        if c < 0:
            self._classes.check_room([y], self.max_classes, "max_classes", "class")
            c = self._classes.add(y)
            self._grow_classes()
        self._class_counts[c] += w
        token_one.learn_one(self._components[0], c, buckets, w)
        self.n_events += 1
        self._refit_due()

    def predict_proba_one(self, x: Mapping) -> dict:
        buckets = self._plain_buckets(x) if len(self._classes) else None
        if buckets is None or not self._one_ready():
            return super().predict_proba_one(x)
        jll = token_one.score_one(self._components[0], buckets, self._one_prior())
        top = max(jll)
        p = [math.exp(v - top) for v in jll]
        total = sum(p)
        return {c: v / total for c, v in zip(self._classes.values, p, strict=True)}


def _same_items(x: Mapping, items: tuple) -> bool:
    """Whether ``x`` holds exactly ``items``' keys with the very same value objects."""
    if len(x) != len(items):
        return False
    if len(items) == 1:
        key, value = items[0]
        return x.get(key) is value
    return all(x.get(k) is v for k, v in items)


class BernoulliNB(NaiveBayesBase):
    """Bernoulli naive Bayes: presence and absence of every vocabulary token."""

    name = "bnb"

    def __init__(self, alpha: float = 1.0, vocab_size: int | None = None, *,
                 prior_alpha: float = 0.0, class_prior: Mapping | None = None,
                 decay: float | None = None, n_features: int = 2**20,
                 text_fields: Sequence[str] = ("text",), lowercase: bool = True,
                 bigrams: bool = False, max_classes: int = 1000,
                 max_fields: int = 10_000, max_values: int = 100_000, **text_options) -> None:
        self.alpha, self.vocab_size = alpha, vocab_size
        super().__init__(prior_alpha=prior_alpha, class_prior=class_prior, decay=decay,
                         n_features=n_features, text_fields=text_fields, lowercase=lowercase,
                         bigrams=bigrams, max_classes=max_classes,
                         max_fields=max_fields, max_values=max_values, **text_options)

    def _make_components(self) -> list:
        return [Bernoulli(self.n_features, self.alpha, True, self.vocab_size, **self._transform())]


class ComplementNB(NaiveBayesBase):
    """Complement naive Bayes (Rennie et al. 2003); ``norm`` is the weight normalisation; ``alpha`` as
    in :class:`MultinomialNB` (``"auto"`` on plain counts by default, fitted to the complement counts)."""

    name = "cnb"
    use_prior = False

    def __init__(self, alpha: float | str | None = None, norm: bool = False, vocab_size: int | None = None, *,
                 prior_alpha: float = 0.0, class_prior: Mapping | None = None,
                 decay: float | None = None, n_features: int = 2**20,
                 text_fields: Sequence[str] = ("text",), lowercase: bool = True,
                 bigrams: bool = False, max_classes: int = 1000,
                 max_fields: int = 10_000, max_values: int = 100_000, **text_options) -> None:
        self.alpha, self.norm, self.vocab_size = alpha, norm, vocab_size
        super().__init__(prior_alpha=prior_alpha, class_prior=class_prior, decay=decay,
                         n_features=n_features, text_fields=text_fields, lowercase=lowercase,
                         bigrams=bigrams, max_classes=max_classes,
                         max_fields=max_fields, max_values=max_values, **text_options)

    def _make_components(self) -> list:
        return [Complement(self.n_features, self._text_alpha(), True, self.vocab_size, None, self.norm,
                           **self._transform())]


class CategoricalNB(NaiveBayesBase):
    """Categorical naive Bayes: every field (numbers too) is a category; Laplace by default."""

    name = "catnb"

    def __init__(self, alpha: float = 1.0, m: float | None = None, *, prior_alpha: float = 0.0,
                 class_prior: Mapping | None = None, decay: float | None = None,
                 n_features: int = 2**20, text_fields: Sequence[str] = ("text",),
                 lowercase: bool = True, bigrams: bool = False, max_classes: int = 1000,
                 max_fields: int = 10_000, max_values: int = 100_000, **text_options) -> None:
        self.alpha, self.m = alpha, m
        super().__init__(prior_alpha=prior_alpha, class_prior=class_prior, decay=decay,
                         n_features=n_features, text_fields=text_fields, lowercase=lowercase,
                         bigrams=bigrams, max_classes=max_classes,
                         max_fields=max_fields, max_values=max_values, **text_options)

    def _make_components(self) -> list:
        return [Categorical(self.alpha, True, self.m, self.max_values)]

    # -- one event (River style): plain Python over the event's own fields, no batch ----------
    def _event_pairs(self, x: Mapping, comp: Categorical) -> tuple[list, list] | None:
        """(name, field code, column) of each of ``x``'s categorical values, then of its numbers
        (the batch's order); the code is -1 and the column None where the model has not seen
        them. None when ``x`` needs the batch path (a text, a value that is not a str, bool or
        plain number, or one the batch path would refuse)."""
        if not isinstance(x, dict):
            return None
        cats: list = []
        nums: list = []
        text_fields, fields, column = self._featurizer.text_fields, comp.fields, comp._column
        for key, value in x.items():
            kind = type(value)
            if value is None:
                continue
            if kind is str:
                if key in text_fields:
                    return None
                out, v = cats, value
            elif kind is bool:
                out, v = cats, "true" if value else "false"
            elif kind is float or kind is int:
                v = float(value) if -MAX_ABS_VALUE <= value <= MAX_ABS_VALUE else math.nan
                if v != v:  # inf, NaN, too large: the batch path says why
                    return None
                out = nums
            else:
                return None
            i = fields.get(key)
            c = column.get((i, v)) if i >= 0 else None
            out.append((key, i, c))
        return cats, nums

    def predict_proba_one(self, x: Mapping) -> dict:
        """As ``predict_proba_many([x])[0]`` (the same floats), without making a batch."""
        comp = self._components[0]
        pairs = self._event_pairs(x, comp) if len(self._classes) else None
        if pairs is None:
            return super().predict_proba_one(x)
        self._last_batch = None  # (a batch of the same dicts, changed since, is not theirs)
        k = len(self._classes)
        scale = self._forget.to_true()
        alpha, m = float(self.alpha), None if self.m is None else float(self.m)  # (numpy 2 keeps
        out = np.zeros(k)                            # a float32 alpha float32 against a float)
        for _, i, c in (*pairs[0], *pairs[1]):  # the batch's order: categorical, then numbers
            if c is None:
                continue
            counts = comp._counts[c] * scale
            total = comp._field_totals(i) * scale
            n_values = float(len(comp._columns_of[i]))
            with np.errstate(divide="ignore", invalid="ignore"):
                if m is not None:
                    out += np.log(counts + m * (1.0 / n_values)) - np.log(total + m)
                else:
                    out += np.log(counts + alpha) - np.log(total + alpha * n_values)
        jll = np.zeros((1, k))
        if self.use_prior or k == 1:
            jll += self._log_prior()
        jll[0] += out
        proba = np.exp(log_normalize(jll))[0]
        return dict(zip(self._classes.values, proba.tolist(), strict=True))

    def learn_one(self, x: Mapping, y, w: float = 1.0) -> None:
        """As ``learn_many([x], [y], [w])``: an event of a class and values all seen before, with
        a plain positive weight and no decay, is counted in place; any other, by the batch."""
        comp = self._components[0]
        pairs = (self._event_pairs(x, comp) if not self._forget.active and type(w) in (int, float)
                 and 0 < w < math.inf else None)
        try:
            c = self._classes.get(y) if pairs is not None and y is not None else -1
        except TypeError:  # unhashable: the batch path says so
            c = -1
        known = pairs[0] + pairs[1] if c >= 0 else []
        if c < 0 or any(col is None or self._fields.get(key) < 0 for key, _, col in known):
            return super().learn_one(x, y, w)
        w = float(w)
        self._last_batch = None
        self._class_counts[c] += w
        counts, totals = comp._counts, comp._totals
        for _, i, col in known:
            counts[col, c] += w
            totals.pop(i, None)
        self.n_events += 1
        self._refit_due()


class GaussianNB(NaiveBayesBase):
    """Gaussian naive Bayes over numeric fields; ``variance`` is ``"mle"`` or ``"sample"``."""

    name = "gnb"

    def __init__(self, variance: str = "mle", var_smoothing: float = 1e-9, *,
                 prior_alpha: float = 0.0, class_prior: Mapping | None = None,
                 decay: float | None = None, n_features: int = 2**20,
                 text_fields: Sequence[str] = ("text",), lowercase: bool = True,
                 bigrams: bool = False, max_classes: int = 1000,
                 max_fields: int = 10_000, max_values: int = 100_000, **text_options) -> None:
        self.variance, self.var_smoothing = variance, var_smoothing
        super().__init__(prior_alpha=prior_alpha, class_prior=class_prior, decay=decay,
                         n_features=n_features, text_fields=text_fields, lowercase=lowercase,
                         bigrams=bigrams, max_classes=max_classes,
                         max_fields=max_fields, max_values=max_values, **text_options)

    def _make_components(self) -> list:
        return [Gaussian(self.variance, self.var_smoothing)]


class NaiveBayes(NaiveBayesBase):
    """One posterior over text tokens (multinomial), categorical fields and numeric fields
    (Gaussian): ``P(c | x) ∝ P(c) Π_w P(w|c) Π_i P(x_i|c) Π_j p(x_j|c)``. ``alpha`` smooths the
    text part as in :class:`MultinomialNB` (``"auto"`` on plain counts by default), ``cat_alpha`` the
    categorical one.

    A column that mixes numbers and words (nursery's ``children``: 1, 2, 3, "more") is both: its
    numbers feed the Gaussian, its words the categorical table, and each event's value speaks in
    the part it belongs to. Such columns make a class's numeric variance zero easily (a class seen
    only with ``children=1``), which would let that one column decide; ``var_smoothing`` (default
    1e-2, against scikit-learn's 1e-9 for :class:`GaussianNB`) adds that fraction of the largest
    field variance to every variance, a floor that keeps a single column from dominating.
    """

    name = "nb"

    def __init__(self, alpha: float | str | None = None, cat_alpha: float = 1.0, variance: str = "mle",
                 var_smoothing: float = 1e-2, *, prior_alpha: float = 0.0,
                 class_prior: Mapping | None = None, decay: float | None = None,
                 n_features: int = 2**20, text_fields: Sequence[str] = ("text",),
                 lowercase: bool = True, bigrams: bool = False, max_classes: int = 1000,
                 max_fields: int = 10_000, max_values: int = 100_000, **text_options) -> None:
        self.alpha, self.cat_alpha = alpha, cat_alpha
        self.variance, self.var_smoothing = variance, var_smoothing
        super().__init__(prior_alpha=prior_alpha, class_prior=class_prior, decay=decay,
                         n_features=n_features, text_fields=text_fields, lowercase=lowercase,
                         bigrams=bigrams, max_classes=max_classes,
                         max_fields=max_fields, max_values=max_values, **text_options)

    def _make_components(self) -> list:
        return [Multinomial(self.n_features, self._text_alpha(), fold=False, **self._transform()),
                Categorical(self.cat_alpha, numeric_as_categories=False, max_values=self.max_values),
                Gaussian(self.variance, self.var_smoothing)]
