"""Per-event prequential predictions of a whole block of events, at mini-batch speed.

Predicting event ``i`` of a block with the model that has learned every event before it
(``predict_proba_one`` then ``learn_one``, event by event) needs no event-by-event work for
the count text models: their sufficient statistics are sums, so the counts the model holds
before event ``i`` are the counts at the block's start plus the in-block sums of the events
``j < i``. For multinomial and complement naive Bayes on plain token counts (no decay, no
tf/idf/length transform, no m-estimate, no weight normalisation) :func:`block_log_proba`
computes, vectorised over the block:

- per (token id, event) pair, the class-token counts ``N_ct + Σ_{j<i, y_j=c} w_j x_jt``: the
  block's pairs sorted by id then event, an exclusive cumulative sum within each id;
- whether the id counts at event ``i`` (seen before the block, or with a positive value in an
  earlier event of the block) and the vocabulary ``V_i`` (seen ids before event ``i``: first
  occurrences counted);
- class totals and class counts (the prior) by exclusive cumulative sums over the events.

``alpha="auto"`` is refitted right after fixed event counts
(:func:`~streambayes.stats.evidence.is_refit_point`), and a new label adds a class:
:func:`predict_learn` cuts a block after each refit point and after each event that brings
a new class, predicts each part as above, then learns it with ``learn_many`` (the same state
as learning the block at once). The probabilities equal those of event-by-event
predict-then-learn to rounding (~1e-12 relative; equal in exact arithmetic).

>>> from streambayes.models import MultinomialNB
>>> xs = [{"text": t} for t in ["free prize", "lunch at noon", "free lunch", "prize now"]]
>>> ys = ["spam", "ham", "ham", "spam"]
>>> block, one = MultinomialNB(), MultinomialNB()
>>> parts = predict_learn(block, block.featurize(xs), ys, None)
>>> [(a, b, classes) for a, b, classes, _ in parts]  # alpha='auto' refits after events 1 ... 8
[(0, 1, []), (1, 2, ['spam']), (2, 3, ['spam', 'ham']), (3, 4, ['spam', 'ham'])]
>>> by_one = []
>>> for x, y in zip(xs, ys):
...     by_one.append(one.predict_proba_one(x)); one.learn_one(x, y)
>>> got = np.exp(np.vstack([p[3] for p in parts[2:]]))
>>> bool(np.allclose(got, [list(p.values()) for p in by_one[2:]], atol=1e-12))
True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streambayes.errors import FeatureError, ModelError
from streambayes.features import Batch
from streambayes.models.base import NaiveBayesBase
from streambayes.models.token_components import Complement, Multinomial
from streambayes.stats import event_weights, lidstone_log, log_normalize

Part = tuple[int, int, list, np.ndarray]  # (start, stop, classes, log-probabilities)
# classes x token entries of one part at most: the (classes, pairs) arrays in flight stay under
# 32 MiB each; a bigger block is cut into parts (the same predictions, a little slower)
PART_CELLS = 2**22


def supports(model: object, batch: Batch) -> bool:
    """Whether :func:`block_log_proba` is exact for ``model`` on ``batch``: a naive Bayes learner
    whose first component is a multinomial or complement table of plain counts (no decay, no
    m-estimate, no complement weight normalisation) and whose other components (categorical,
    Gaussian in ``NaiveBayes``) have nothing to score in the batch."""
    if not isinstance(model, NaiveBayesBase) or not isinstance(batch, Batch):
        return False
    comps = model._components
    token = comps[0] if comps else None
    if type(token) not in (Multinomial, Complement) or not token.plain or token.m is not None:
        return False
    if getattr(token, "norm", False) or model._forget.active or model._forget.to_true() != 1.0:
        return False
    if token.fold and (batch.categorical or batch.numeric):
        try:
            token.check(batch)  # a field that is not a count: the ordinary path reports it
        except FeatureError:
            return False
        return True
    return len(comps) == 1 or not (batch.categorical or batch.numeric)


def _checked(model: NaiveBayesBase, batch: Batch, ys: Sequence,
             ws: Sequence[float] | None) -> np.ndarray | None:
    """The event weights if ``learn_many`` would take the whole block, else None (nothing changed)."""
    try:
        weights = event_weights(ws, batch.n)
        if len(ys) != batch.n or any(y is None for y in ys):
            return None
        n_classes = model._check_bounds(batch, ys)
        for comp in model._components:
            comp.check(batch, n_classes)
    except (ModelError, FeatureError):
        return None
    return weights


def predict_learn(model: NaiveBayesBase, batch: Batch, ys: Sequence,
                  ws: Sequence[float] | None) -> list[Part] | None:
    """Predict every event of ``batch`` with the model of all events before it, and learn them.

    Returns the parts ``(start, stop, classes, log_proba)`` (``classes`` are the columns of
    ``log_proba``; none for a model that has learned nothing), or None — the model untouched —
    when the block could not be learned whole (a bound, a bad weight or label): the caller then
    takes its ordinary path. Needs :func:`supports`."""
    weights = _checked(model, batch, ys, ws)
    if weights is None:
        return None
    ys = list(ys)
    parts: list[Part] = []
    start = 0
    while start < batch.n:
        stop = min(start + model._refit_cuts(batch.n - start)[0],
                   _part_end(batch, start, len(model._classes) + 1))
        rows = model._classes.lookup(ys[start:stop])
        new = np.flatnonzero(rows < 0)
        if len(new):  # the event bringing a new class ends the part: later ones see the class
            stop = start + int(new[0]) + 1
            rows = rows[: stop - start]
        part = batch if (start, stop) == (0, batch.n) else batch.slice(start, stop)
        w = weights[start:stop]
        classes = model.classes
        pairs = Pairs(model._components[0], part)
        log_proba = block_log_proba(model, part, rows, w, pairs) if classes else \
            np.zeros((stop - start, 0))
        parts.append((start, stop, classes, log_proba))
        learn_pairs(model, part, ys[start:stop], w, pairs)
        start = stop
    return parts


def _part_end(batch: Batch, start: int, k: int) -> int:
    """The end of a part from ``start`` holding at most :data:`PART_CELLS` / ``k`` token entries
    (at least one event)."""
    ip = batch.tokens.indptr
    end = int(np.searchsorted(ip, ip[start] + PART_CELLS // k, side="right")) - 1
    return min(max(end, start + 1), batch.n)


class Pairs:
    """The distinct (token id, event) pairs of a batch's token entries, sorted by id then event:
    ``pid``, ``pev``, their summed values ``x``; ``starts`` (first pair of each id), ``group``
    (each pair's id), ``ids`` (the distinct ids), ``found`` (their place in the model's index)."""

    def __init__(self, token, batch: Batch) -> None:
        sr = token.entries(batch)
        n = max(batch.n, 1)
        r = sr.row_ids()
        dtype = np.uint32 if token.n_features * n < 2**32 else np.int64
        keys = sr.indices.astype(dtype) * dtype(n) + r.astype(dtype)
        if not len(keys):
            self.x = np.zeros(0)
        elif np.all(sr.values == 1.0):  # plain text: a sort, and run lengths as the values
            keys = np.sort(keys)
            cut = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1], True])
            keys, self.x = keys[cut[:-1]], np.diff(cut).astype(np.float64)
        else:
            keys, inverse = np.unique(keys, return_inverse=True)
            self.x = np.bincount(inverse.reshape(-1), sr.values, minlength=len(keys))
        self.pid, self.pev = (keys // dtype(n)).astype(np.int64), (keys % dtype(n)).astype(np.int64)
        first = np.r_[True, self.pid[1:] != self.pid[:-1]] if len(keys) else np.zeros(0, bool)
        self.starts = np.flatnonzero(first)
        self.group = np.cumsum(first) - 1
        self.ids = self.pid[self.starts]
        self.found = token.table.index.find(self.ids)
        self.event_values = np.bincount(r, sr.values, minlength=batch.n)  # Σ values per event


def learn_pairs(model: NaiveBayesBase, batch: Batch, ys: list, w: np.ndarray, pairs: Pairs) -> None:
    """``model.learn_many(batch, ys, w)`` for a part checked by :func:`predict_learn` (whole, no
    refit point inside), its token counts added per (id, event) pair from ``pairs`` instead of
    per entry: the same counts (equal sums; with fractional weights, to rounding)."""
    from streambayes.models.base import _field_names

    model._fields.codes(_field_names(batch))
    rows = model._classes.codes(ys)
    model._grow_classes()
    np.add.at(model._class_counts, rows, w)
    token, *others = model._components
    positive = pairs.x > 0
    if positive.all():
        cols = token.table.columns(pairs.ids, pairs.found)
    else:  # an id becomes seen with a positive value only
        ids = np.unique(pairs.pid[positive])
        cols = np.full(len(pairs.ids), -1, np.int64)
        cols[np.searchsorted(pairs.ids, ids)] = token.table.columns(ids)
    token.table.add_columns(rows[pairs.pev[positive]], cols[pairs.group[positive]],
                            (pairs.x * w[pairs.pev])[positive])
    np.add.at(token.totals, rows, pairs.event_values * w)
    token._cache.clear()
    token._last_lookup = None
    for comp in others:
        comp.learn(batch, rows, w, raw=w)
    model.n_events += batch.n
    model._refit_due()


def block_log_proba(model: NaiveBayesBase, batch: Batch, rows: np.ndarray,
                    weights: np.ndarray, pairs: Pairs | None = None) -> np.ndarray:
    """Row ``i``: ``log P(c | x_i)`` of the model after learning events ``0 … i-1`` of ``batch``
    (class codes ``rows``, -1 for a class the model does not know yet — only the last event may
    have one) with the model's current classes and smoothing. Needs :func:`supports`."""
    token = model._components[0]
    k, n = len(model._classes), batch.n
    w = np.where(rows >= 0, weights, 0.0)
    pairs = Pairs(token, batch) if pairs is None else pairs
    jll = _token_scores(token, pairs, np.maximum(rows, 0), w, k, n)
    if model.use_prior or k == 1:
        jll += _log_prior(model, rows, w, k, n)
    return log_normalize(jll)


def _exclusive(adds: np.ndarray, starts: np.ndarray | None = None,
               group: np.ndarray | None = None) -> np.ndarray:
    """Cumulative sums along the last axis excluding each element itself; with ``starts`` (the
    first index of each group) and ``group`` (each element's group), restarted in each group."""
    out = np.cumsum(adds, axis=-1)
    out -= adds
    if starts is not None:
        out -= out[..., starts][..., group]
    return out


def _log_prior(model: NaiveBayesBase, rows: np.ndarray, w: np.ndarray, k: int, n: int) -> np.ndarray:
    """``log P(c)`` before each event, shape (n, k)."""
    if model.class_prior is not None:
        return np.broadcast_to(model._log_prior(), (n, k))
    adds = np.zeros((k, n))
    adds[rows[rows >= 0], np.flatnonzero(rows >= 0)] = w[rows >= 0]
    counts = model._class_counts[:, None] + _exclusive(adds)
    with np.errstate(divide="ignore"):
        return lidstone_log(counts, counts.sum(axis=0), k, model.prior_alpha).T


def _token_scores(token, pairs: Pairs, rows: np.ndarray, w: np.ndarray, k: int, n: int) -> np.ndarray:
    """Per event and class, the token log-likelihood under the counts before the event."""
    out = np.zeros((n, k))
    if not len(pairs.x):
        return out
    pev, x, starts = pairs.pev, pairs.x, pairs.starts
    sizes = np.diff(np.r_[starts, len(x)])  # pairs per id: repeat an id's values over its pairs
    seen = pairs.found[1]
    counts = np.zeros((k, len(pairs.ids)))  # (k, ids), 0 for ids not seen yet
    if len(token.table):
        counts[:, seen] = token.table.gather_columns(token.table.index.known(pairs.found))
    adds = np.zeros((k, len(x)))
    adds[rows[pev], np.arange(len(x))] = x * w[pev]
    before = np.cumsum(adds, axis=1)
    before -= adds  # in-block sums before each pair, from the block's start
    counts -= before[:, starts]  # ... from the id's first pair in the block
    counts = np.repeat(counts, sizes, axis=1)
    counts += before
    event_adds = np.zeros((k, n))
    event_adds[rows, np.arange(n)] = pairs.event_values * w
    totals = token.totals[:, None] + _exclusive(event_adds)  # (k, n)
    seen = np.repeat(seen, sizes)
    positive = x > 0
    if positive.all():  # an earlier pair of the same id was positive: any but its first
        earlier = np.ones(len(x), bool)
        earlier[starts] = False
    else:
        earlier = _exclusive(positive.astype(np.float64), starts, np.repeat(np.arange(len(sizes)), sizes)) > 0
    if token.vocab_size is not None:
        counted = np.ones(len(x), bool)
        vocab = np.full(n, float(token.vocab_size))
    else:
        counted = seen | earlier
        fresh = positive & ~seen & ~earlier  # first positive pair of a new id
        vocab = token.n_seen + np.searchsorted(np.sort(pev[fresh]), np.arange(n), side="left")
        vocab = vocab.astype(np.float64)
    if not counted.all():
        counts, pev, x = counts[:, counted], pev[counted], x[counted]
    if isinstance(token, Complement):
        counts = counts.sum(axis=0, keepdims=True) - counts
        totals = totals.sum(axis=0, keepdims=True) - totals
    a = token._alpha()
    with np.errstate(divide="ignore", invalid="ignore"):  # alpha = 0: log 0 = -inf, as the model
        numerator = np.log(counts + a)
        numerator *= x
        mass = np.bincount(pev, x, minlength=n)  # an event with no counted token: no term
        denominator = np.where(mass > 0, np.log(totals + a * vocab) * mass, 0.0)
        sign = -1.0 if isinstance(token, Complement) else 1.0  # complement: minus log theta
        for c in range(k):
            out[:, c] = sign * (np.bincount(pev, numerator[c], minlength=n) - denominator[c])
    return out
