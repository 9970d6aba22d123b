"""The naive Bayes skeleton shared by every member of the family.

A learner = a class index + class counts (the prior) + likelihood *components*, each
owning its own counts: multinomial/Bernoulli/complement over hashed tokens, categorical
over fields, Gaussian over numeric fields. ``NaiveBayes`` simply has several components.

The update is "count, then derive" (STYLE habit 2): ``learn_many`` only adds (weighted,
possibly decayed) counts; probabilities are derived at prediction time, in log space.
"""

from __future__ import annotations

import inspect
import math
import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from streambayes.errors import LimitError, ModelError
from streambayes.features import Batch, Featurizer
from streambayes.models.text_transform import check_transform
from streambayes.stats import Forgetting, ValueIndex, class_prior_log, event_weights, log_normalize
from streambayes.stats.evidence import is_refit_point, refit_points

if TYPE_CHECKING:
    from streambayes.models.clues import ClueBatch

# A big batch is scored (and, for plain counts, learned) in parts: about IN_FLIGHT_BYTES of
# per-class scores in flight (three float64 arrays of classes x token entries), at least
# ENTRY_CHUNK entries. Parts of 4,096 entries (16 long mails) made long mail 30% slower.
IN_FLIGHT_BYTES = 8 << 20
ENTRY_CHUNK = 4096


def _entries_per_part(n_classes: int) -> int:
    """Token entries per part of a big batch for a model of ``n_classes`` classes.

    >>> _entries_per_part(2), _entries_per_part(20), _entries_per_part(10_000)
    (174762, 17476, 4096)
    """
    return max(ENTRY_CHUNK, IN_FLIGHT_BYTES // (24 * max(n_classes, 1)))


class NaiveBayesBase:
    """Class index, priors, decay and the learner protocol; subclasses name the components."""

    name = "base"
    use_prior = True
    _supervised = True  # River reads this in progressive_val_score

    def __init__(
        self,
        *,
        prior_alpha: float = 0.0,
        class_prior: Mapping | None = None,
        decay: float | None = None,
        n_features: int = 2**20,
        text_fields: Sequence[str] = ("text",),
        lowercase: bool = True,
        bigrams: bool = False,
        max_classes: int = 1000,
        max_fields: int = 10_000,
        max_values: int = 100_000,
        min_token_length: int = 1,
        token_pattern: str | None = None,
        stop_words: str | Sequence[str] | None = None,
        ngram_range: Sequence[int] | None = None,
        tf: str | None = None,
        idf: bool = False,
        length_norm: str | None = None,
    ) -> None:
        if prior_alpha < 0:
            raise ModelError(f"prior_alpha must be >= 0, got {prior_alpha}")
        for bound, limit in (("max_classes", max_classes), ("max_fields", max_fields),
                             ("max_values", max_values)):
            if not isinstance(limit, int) or limit < 1:
                raise ModelError(f"{bound} must be an integer >= 1, got {limit!r}")
        self.max_classes, self.max_fields, self.max_values = max_classes, max_fields, max_values
        self.prior_alpha = prior_alpha
        self.class_prior = dict(class_prior) if class_prior is not None else None
        self.decay = decay
        self.n_features = n_features
        self.text_fields = tuple(text_fields)
        self.lowercase = lowercase
        self.bigrams = bigrams
        self._featurizer = Featurizer(n_features, self.text_fields, lowercase, bigrams,
                                      min_token_length=min_token_length, token_pattern=token_pattern,
                                      stop_words=stop_words, ngram_range=ngram_range)
        tok = self._featurizer.tokenizer  # the token options, validated and normalised
        self.min_token_length, self.token_pattern = tok.min_token_length, tok.token_pattern
        self.stop_words, self.ngram_range = tok.stop_words, tok.ngram_range
        self.tf, self.idf, self.length_norm = check_transform(tf, idf, length_norm)
        self._reset()

    # -- hyperparameters ------------------------------------------------------------------
    def params(self) -> dict:
        """Constructor arguments by name (STYLE habit 5): ``type(m)(**m.params())`` clones."""
        names: list[str] = []
        for klass in type(self).__mro__:  # follow **kwargs up to the constructor that ends them
            if "__init__" not in klass.__dict__:
                continue
            params = list(inspect.signature(klass.__dict__["__init__"]).parameters.values())
            names += [p.name for p in params[1:] if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
                      and p.name not in names]
            if not any(p.kind == p.VAR_KEYWORD for p in params):
                break
        out = {name: getattr(self, name) for name in names}
        out["text_fields"] = list(out["text_fields"])
        return out

    def _text_alpha(self) -> float | str:
        """The token smoothing in use: ``alpha``, or by default (``None``) ``"auto"`` on plain counts
        and 1 under the text transforms (their weights are not counts)."""
        alpha = getattr(self, "alpha", None)
        if alpha is not None:
            return alpha
        return "auto" if self.tf is None and not self.idf and self.length_norm is None else 1.0

    def _transform(self) -> dict:
        """The text transform options of the token components (see ``TokenTable``)."""
        return {"tf": self.tf, "idf": self.idf, "length_norm": self.length_norm}

    def clone(self) -> NaiveBayesBase:
        return type(self)(**self.params())

    def _make_components(self) -> list:
        raise NotImplementedError

    def _reset(self) -> None:
        self._classes = ValueIndex()
        self._fields = ValueIndex()  # categorical and numeric field names learned (max_fields)
        self._class_counts = np.zeros(0)
        self._forget = Forgetting(self.decay)
        self._components = self._make_components()
        self.n_events = 0
        self._prior_cache = None

    @property
    def classes(self) -> list:
        return list(self._classes.values)

    # -- learning -------------------------------------------------------------------------
    def featurize(self, xs: Sequence[Mapping], keep_words: bool = False) -> Batch:
        """The batch of ``xs``; the last one is remembered (with the dicts, by identity) so that
        ``clues_many`` on the same dicts — the predictor's clues right after its predictions — does
        not featurize them again. A dict changed in place in between is not noticed. Once clues
        were asked for, batches keep their words' places, so a batch's clues name their words
        without tokenizing its texts again."""
        batch = self._featurizer.featurize(xs, keep_words=keep_words,
                                           keep_places=getattr(self, "_name_places", False))
        self._last_batch = (list(xs), batch)
        return batch

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_last_batch", None)  # a cache of the last input: never pickled
        return state

    def _featurized(self, X: Sequence[Mapping]) -> Batch:
        """The remembered batch if ``X`` holds the very dicts last featurized, else a new one."""
        last = getattr(self, "_last_batch", None)
        if last is not None and len(last[0]) == len(X) and all(map(operator.is_, last[0], X)):
            return last[1]
        return self.featurize(X)

    def _as_batch(self, X) -> Batch:
        return X if isinstance(X, Batch) else self.featurize(X)

    def learn_one(self, x: Mapping, y, w: float = 1.0) -> None:
        self.learn_many([x], [y], [w])

    def learn_many(self, X, y: Sequence, w: Sequence[float] | None = None) -> None:
        """Add a mini-batch: ``X`` is a list of ``x`` dicts or a :class:`Batch`."""
        batch = self._as_batch(X)
        if len(y) != batch.n:
            raise ModelError(f"learn_many got {batch.n} events but {len(y)} labels")
        weights = event_weights(w, batch.n)
        y = y if isinstance(y, list) else list(y)
        if None in y:
            raise ModelError("learn_many: a label is missing (None)")
        n_classes = self._check_bounds(batch, y)
        for comp in self._components:  # refuse a bad batch before anything changes
            comp.check(batch, n_classes)
        self._fields.codes(_field_names(batch))
        rows = self._classes.codes(y)
        self._grow_classes()
        start = 0
        for stop in self._refit_cuts(batch.n):  # alpha="auto": learn up to each refit point, refit
            part = batch if (start, stop) == (0, batch.n) else batch.slice(start, stop)
            self._learn_rows(part, rows[start:stop], weights[start:stop])
            start = stop
            self._refit_due()

    def _refit_cuts(self, n: int) -> list[int]:
        """Where a batch of ``n`` events is cut: after each event whose count is a refit point of
        ``alpha="auto"`` (:func:`~streambayes.stats.evidence.refit_points`), and at its end."""
        if not any(getattr(comp, "auto", False) for comp in self._components):
            return [n]
        cuts = [p - self.n_events for p in refit_points(self.n_events, self.n_events + n)]
        return cuts if cuts and cuts[-1] == n else [*cuts, n]

    def _refit_due(self) -> None:
        """Refit ``alpha="auto"`` if the event count is a refit point (after learning it)."""
        if is_refit_point(self.n_events):
            self.refit_alpha()

    def _learn_rows(self, batch: Batch, rows: np.ndarray, weights: np.ndarray) -> None:
        """Add checked events (class codes ``rows``) and count them; a big batch of plain token
        counts in parts (:func:`_entries_per_part`; the same additions in the same order: the
        same state, with less memory in flight)."""
        if self._forget.active or not all(getattr(c, "plain", False) for c in self._components):
            return self._learn_part(batch, rows, weights)
        for a, b in _row_chunks(batch, _entries_per_part(len(self._classes))):
            part = batch if (a, b) == (0, batch.n) else batch.slice(a, b)
            self._learn_part(part, rows[a:b], weights[a:b])

    def _learn_part(self, batch: Batch, rows: np.ndarray, weights: np.ndarray) -> None:
        if self._forget.due(batch.n):
            self._rescale(self._forget.restart(ahead=batch.n))
        mult = self._forget.multipliers(batch.n)
        stored = weights if mult is None else weights * mult
        np.add.at(self._class_counts, rows, stored)
        for comp in self._components:
            comp.learn(batch, rows, stored, raw=weights)
        self.n_events += batch.n

    def _check_bounds(self, batch: Batch, y: Sequence) -> int:
        """Raise :class:`LimitError` (nothing changed) if the batch would take the model past
        ``max_classes`` or ``max_fields``; return the number of classes after it."""
        n_classes = self._classes.check_room(dict.fromkeys(y), self.max_classes, "max_classes", "class")
        self._fields.check_room(_field_names(batch), self.max_fields, "max_fields", "field")
        return n_classes

    def _grow_classes(self) -> None:
        k = len(self._classes)
        if k > len(self._class_counts):
            self._class_counts = np.pad(self._class_counts, (0, k - len(self._class_counts)))
            for comp in self._components:
                comp.grow_classes(k)

    def _rescale(self, factor: float) -> None:
        self._class_counts *= factor
        for comp in self._components:
            comp.scale(factor)

    # -- prediction -----------------------------------------------------------------------
    def _log_prior(self) -> np.ndarray:
        """``log P(c)``, cached until the class counts change (read-only)."""
        key = (self.n_events, len(self._class_counts), self._forget.t)
        if self._prior_cache is None or self._prior_cache[0] != key:
            self._prior_cache = (key, self._derive_log_prior())
        return self._prior_cache[1]

    def _derive_log_prior(self) -> np.ndarray:
        if self.class_prior is not None:
            try:
                p = np.array([self.class_prior[c] for c in self._classes.values], np.float64)
            except KeyError as e:
                raise ModelError(f"class_prior has no entry for class {e.args[0]!r}") from None
            with np.errstate(divide="ignore"):
                return np.log(p / p.sum())
        counts = self._class_counts
        if self.prior_alpha == 0 and len(counts) <= 32:  # maximum likelihood, few classes: the
            c = counts.tolist()                          # per-event hot path, in plain floats
            if min(c) > 0:
                log_total = math.log(math.fsum(c))
                return np.array([math.log(v) - log_total for v in c])
        return class_prior_log(counts * self._forget.to_true(), self.prior_alpha)

    def joint_log_likelihood_many(self, X) -> np.ndarray:
        """Unnormalised ``log P(c) + Σ log P(x_i | c)``, shape (n, classes)."""
        batch = self._as_batch(X)
        k = len(self._classes)
        jll = np.zeros((batch.n, k))
        if k == 0:
            return jll
        if self.use_prior or k == 1:
            jll += self._log_prior()
        scale = self._forget.to_true()
        # rows score independently: parts bound the memory in flight
        for a, b in _row_chunks(batch, _entries_per_part(k)):
            part = batch if (a, b) == (0, batch.n) else batch.slice(a, b)
            for comp in self._components:
                jll[a:b] += comp.log_likelihood(part, scale)
        return jll

    def predict_log_proba_many(self, X) -> np.ndarray:
        return log_normalize(self.joint_log_likelihood_many(X))

    def predict_proba_many(self, X) -> np.ndarray:
        return np.exp(self.predict_log_proba_many(X))

    def predict_proba_one(self, x: Mapping) -> dict:
        if not len(self._classes):
            return {}
        proba = self.predict_proba_many([x])[0]
        return dict(zip(self._classes.values, proba.tolist(), strict=True))

    def predict_one(self, x: Mapping):
        proba = self.predict_proba_one(x)
        return max(proba, key=proba.get) if proba else None

    def joint_log_likelihood_one(self, x: Mapping) -> dict:
        jll = self.joint_log_likelihood_many([x])[0]
        return dict(zip(self._classes.values, jll.tolist(), strict=True))

    def clues_one(self, x: Mapping, k: int = 5) -> list[tuple[str, float]]:
        """The ``k`` features that most favour the predicted class over the runner-up.

        Each clue is (feature, contribution to ``log P(top|x) - log P(second|x)``); all of
        them plus the ``"prior"`` term sum to that log-odds.
        """
        from streambayes.models.clues import clue_key

        terms = self.log_odds_terms(x)
        terms = [t for t in terms if t[0] != "prior"]
        terms.sort(key=clue_key)  # ties: by name, then term order
        return terms[:k]

    def clues_many(self, X: Sequence[Mapping], k: int = 5) -> list[list[tuple[str, float]]]:
        """``clues_one`` of every event, the terms of the whole batch scored in numpy at once
        (:mod:`streambayes.models.clues`); equal to ``clues_one``, ties included."""
        if len(self._classes) < 2:
            return [[] for _ in X]
        self._name_places = True  # a predictor with clues: its next batches keep their places
        batch = X if isinstance(X, Batch) else self._featurized(X)
        return self._clues_of(batch, self.joint_log_likelihood_many(batch), k)

    def predict_log_proba_and_clues_many(self, X, k: int = 5) -> tuple[np.ndarray, list[list]]:
        """``(predict_log_proba_many(X), clues_many(X, k))`` from one scoring of the batch (equal
        to the two calls, ties included); the predictor takes :meth:`predict_log_proba_and_clue_batch`."""
        from streambayes.models.clues import gc_paused

        log_proba, clues = self.predict_log_proba_and_clue_batch(X, k)
        with gc_paused():  # ~k tuples per event: one young collection, not one per 700 of them
            return log_proba, clues.lists()

    def predict_log_proba_and_clue_batch(self, X, k: int = 5) -> tuple[np.ndarray, ClueBatch]:
        """``predict_log_proba_and_clues_many`` with the clues as a
        :class:`~streambayes.models.clues.ClueBatch` (``.lists()`` is ``clues_many(X, k)``): the
        predictor writes their JSON for the whole batch at once."""
        from streambayes.models.clues import ClueBatch

        self._name_places = True
        batch = self._as_batch(X)
        tables = [c for c in self._components if hasattr(c, "scores_kept_for")]
        for table in tables:  # the prediction's entry scores kept for the clues' terms
            table._keep_scores = True
        try:
            jll = self.joint_log_likelihood_many(batch)
            if len(self._classes) >= 2 and batch.n:
                return log_normalize(jll), self._clue_batch_of(batch, jll, k)
        finally:
            for table in tables:
                table._keep_scores, table._kept_scores = False, None
        return log_normalize(jll), ClueBatch.none(batch.n)

    def _clues_of(self, batch: Batch, jll: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """The clues of ``batch`` whose joint log-likelihoods are ``jll`` (two classes or more)."""
        from streambayes.models.clues import gc_paused

        if not batch.n:
            return []
        clues = self._clue_batch_of(batch, jll, k)
        with gc_paused():  # ~k tuples per event: one young collection, not one per 700 of them
            return clues.lists()

    def _clue_batch_of(self, batch: Batch, jll: np.ndarray, k: int) -> ClueBatch:
        from streambayes.models.clues import batch_terms, top_clue_batch

        order = np.argsort(-jll, axis=1, kind="stable")
        rows, diffs, name_of = batch_terms(self._components, batch, self._forget.to_true(),
                                           order[:, 0], order[:, 1])
        return top_clue_batch(rows, diffs, name_of, batch.n, k)

    def log_odds_terms(self, x: Mapping) -> list[tuple[str, float]]:
        """Every term of the log-odds between the predicted class and the runner-up."""
        if len(self._classes) < 2:
            return []
        batch = self.featurize([x], keep_words=True)
        return self._terms(batch, self.joint_log_likelihood_many(batch)[0])

    def _terms(self, one: Batch, jll: np.ndarray) -> list[tuple[str, float]]:
        """The log-odds terms of a one-event batch whose joint log-likelihoods are ``jll``."""
        order = np.argsort(-jll, kind="stable")
        a, b = order[0], order[1]
        prior = self._log_prior() if (self.use_prior or len(self._classes) == 1) else None
        terms = [] if prior is None else [("prior", float(prior[a] - prior[b]))]
        scale = self._forget.to_true()
        for comp in self._components:
            for name, vec in comp.contributions(one, scale):
                terms.append((name, float(vec[a] - vec[b])))
        return terms

    # -- merge and state ------------------------------------------------------------------
    def merge(self, other: NaiveBayesBase) -> None:
        """Add ``other``'s statistics (trained on a disjoint stream) into ``self``."""
        if type(other) is not type(self) or other.params() != self.params():
            raise ModelError(f"cannot merge {type(other).__name__}{other.params()} into "
                             f"{type(self).__name__}{self.params()}: type and parameters must match")
        self._check_merge(other)
        class_map = self._classes.absorb(other._classes)
        self._fields.absorb(other._fields)
        self._grow_classes()
        factor = other._forget.to_true() / self._forget.to_true()
        np.add.at(self._class_counts, class_map, other._class_counts * factor)
        for mine, theirs in zip(self._components, other._components, strict=True):
            mine.merge(theirs, class_map, factor)
        self.n_events += other.n_events
        self._prior_cache = None
        self.refit_alpha()  # alpha="auto": the fit of the merged counts

    def refit_alpha(self) -> None:
        """Fit ``alpha="auto"`` to the counts now (nothing for a fixed alpha). Learning refits at
        event counts 1, 2, 3, …, 8, 10, 12, 14, 16, 20, … whatever the mini-batches
        (:func:`~streambayes.stats.evidence.is_refit_point`); a merge refits on the merged counts."""
        scale = self._forget.to_true()
        for comp in self._components:
            if getattr(comp, "auto", False):
                comp.refit(scale)

    def _check_merge(self, other: NaiveBayesBase) -> None:
        """Refuse (before any change) a merge whose union exceeds a bound."""
        try:
            self._classes.check_room(other._classes.values, self.max_classes, "max_classes", "class")
            self._fields.check_room(other._fields.values, self.max_fields, "max_fields", "field")
            for mine, theirs in zip(self._components, other._components, strict=True):
                if hasattr(mine, "check_merge"):
                    mine.check_merge(theirs)
        except LimitError as exc:
            raise ModelError(f"cannot merge: the union of the two models is too large: {exc}") from None

    def to_state(self) -> dict:
        return {
            "model": self.name,
            "params": self.params(),
            "classes": self._classes.to_state(),
            "fields": sorted(self._fields.values, key=str),  # not in learning order (batch-dependent)
            "class_counts": self._class_counts.copy(),
            "decay_t": self._forget.t,
            "n_events": self.n_events,
            "components": [comp.to_state() for comp in self._components],
        }

    @classmethod
    def from_state(cls, state: Mapping) -> NaiveBayesBase:
        if state.get("model") != cls.name:
            raise ModelError(f"state is for model {state.get('model')!r}, not {cls.name!r}")
        model = cls(**state["params"])
        model._classes = ValueIndex.from_state(state["classes"])
        model._class_counts = np.array(state["class_counts"], np.float64)
        model._forget = Forgetting(model.decay, int(state["decay_t"]))
        model.n_events = int(state["n_events"])
        model._prior_cache = None
        model._components = [type(c).from_state(s) for c, s in
                             zip(model._components, state["components"], strict=True)]
        fields = state.get("fields")  # a snapshot from before max_fields: the components know
        model._fields = ValueIndex(fields if fields is not None else
                                   [f for c in model._components for f in _known_fields(c)])
        return model

    def memory_bytes(self) -> int:
        return self._class_counts.nbytes + sum(c.memory_bytes() for c in self._components)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(classes={self.classes}, n_events={self.n_events})"


def _row_chunks(batch: Batch, limit: int | None = None) -> list[tuple[int, int]]:
    """Row ranges of ``batch`` holding about ``limit`` (default :data:`ENTRY_CHUNK`) token entries each
    (a row is never cut; one range when the batch holds fewer)."""
    limit = ENTRY_CHUNK if limit is None else limit
    ip = batch.tokens.indptr
    if ip[-1] <= limit:
        return [(0, batch.n)]
    starts = np.searchsorted(ip, np.arange(limit, ip[-1], limit), side="right") - 1
    bounds = sorted({0, batch.n, *starts.tolist()})
    return [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def _field_names(batch: Batch) -> list:
    """The categorical and numeric field names of a batch (what ``max_fields`` counts)."""
    return [*batch.categorical, *batch.numeric]


def _known_fields(component) -> list:
    fields = getattr(component, "fields", None) or getattr(getattr(component, "attrs", None), "names", None)
    return list(fields.values) if fields is not None else []
