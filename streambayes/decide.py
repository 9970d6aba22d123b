"""PURE cost-sensitive decisions: a loss matrix, Bayes decisions with a reject option, and
three-way (negative / unsure / positive) cutoffs tuned on a replay.

Bayesian decision theory (Duda, Hart & Stork 2001, §2.2; Zhou 2016, "Machine Learning" §7.1):
``λ_ij`` is the loss of deciding class ``i`` when the truth is ``j``; the conditional risk of
deciding ``i`` is ``R(c_i | x) = Σ_j λ_ij P(c_j | x)`` and the Bayes decision is
``h*(x) = argmin_i R(c_i | x)``. With a reject option (Chow 1970, "On optimum recognition
error and reject tradeoff") the answer is :data:`UNSURE` when even the smallest risk exceeds
the cost of not answering. Spam filters use the same idea as two cutoffs on ``P(spam)``
(ham / unsure / spam, as in SpamBayes).

>>> loss = LossMatrix.false_positive(("ham", "spam"), positive="spam", fp=10, fn=1, reject=0.5)
>>> loss.loss.tolist()
[[0.0, 1.0], [10.0, 0.0]]
>>> decide(loss, np.array([[0.99, 0.01], [0.3, 0.7], [0.01, 0.99]]), ["ham", "spam"])
['ham', 'unsure', 'spam']
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from streambayes.errors import ModelError

UNSURE = "unsure"


@dataclass(frozen=True, eq=False)
class LossMatrix:
    """``loss[i, j] = λ_ij``: the cost of deciding ``classes[i]`` when the truth is ``classes[j]``.

    ``reject`` is the cost of answering :data:`UNSURE` (None: never unsure). Invalid input raises
    :class:`~streambayes.errors.ModelError` naming the problem:

    >>> LossMatrix(("ham", "spam"), np.ones((2, 3)))
    Traceback (most recent call last):
    ...
    streambayes.errors.ModelError: loss matrix must be 2x2 for classes ('ham', 'spam'), got shape (2, 3)
    """

    classes: tuple[str, ...]
    loss: np.ndarray
    reject: float | None = None

    def __post_init__(self) -> None:
        classes = tuple(self.classes)
        _check_classes(classes)
        loss = np.array(self.loss, dtype=np.float64)  # a private copy, then frozen
        k = len(classes)
        if loss.shape != (k, k):
            raise ModelError(f"loss matrix must be {k}x{k} for classes {classes}, got shape {loss.shape}")
        for i, j in zip(*np.nonzero(~np.isfinite(loss) | (loss < 0)), strict=True):
            kind = "negative" if loss[i, j] < 0 else "not finite"
            raise ModelError(f"loss matrix entry [decide {classes[i]!r}, truth {classes[j]!r}] = "
                             f"{loss[i, j]} is {kind}; costs must be finite and >= 0")
        loss.flags.writeable = False
        reject = self.reject
        if reject is not None:
            if isinstance(reject, bool) or not isinstance(reject, int | float) \
                    or not math.isfinite(reject) or reject < 0:
                raise ModelError(f"reject cost must be a finite number >= 0, got {reject!r}")
            if UNSURE in classes:
                raise ModelError(f"class name {UNSURE!r} is reserved for the reject option")
            reject = float(reject)
        object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "loss", loss)
        object.__setattr__(self, "reject", reject)

    # -- constructors ---------------------------------------------------------------------
    @classmethod
    def zero_one(cls, classes: Sequence[str], reject: float | None = None) -> LossMatrix:
        """0 on the diagonal, 1 off it: the Bayes decision is the most probable class.

        >>> LossMatrix.zero_one(["a", "b", "c"]).loss.tolist()[0]
        [0.0, 1.0, 1.0]
        """
        k = len(classes)
        return cls(tuple(classes), 1.0 - np.eye(k), reject)

    @classmethod
    def false_positive(cls, classes: Sequence[str] = ("ham", "spam"), positive: str = "spam",
                       fp: float = 10.0, fn: float = 1.0, reject: float | None = None) -> LossMatrix:
        """Two classes: deciding ``positive`` for a negative costs ``fp``, the reverse ``fn``."""
        classes = tuple(classes)
        if len(classes) != 2:
            raise ModelError(f"false_positive needs exactly two classes, got {classes}")
        if positive not in classes:
            raise ModelError(f"unknown positive class {positive!r}; classes: {', '.join(classes)}")
        p = classes.index(positive)
        loss = np.zeros((2, 2))
        loss[p, 1 - p] = fp
        loss[1 - p, p] = fn
        return cls(classes, loss, reject)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Mapping[str, float]],
                     classes: Sequence[str] | None = None, reject: float | None = None) -> LossMatrix:
        """From config ``{"decide": {"truth": cost}}``; a missing entry is 0 on the diagonal and 1
        off it. ``classes`` fixes the order (else: order of first mention) and the allowed names.

        >>> m = LossMatrix.from_mapping({"spam": {"ham": 10}}, classes=["ham", "spam"], reject=0.5)
        >>> m.loss.tolist(), m.reject
        ([[0.0, 1.0], [10.0, 0.0]], 0.5)
        >>> try:
        ...     LossMatrix.from_mapping({"spma": {"ham": 10}}, classes=["ham", "spam"])
        ... except ModelError as e:
        ...     print(e)
        unknown class 'spma' in loss matrix (decided class); known classes: ham, spam
        """
        if not isinstance(mapping, Mapping):
            raise ModelError(f"loss matrix config must be a mapping {{decide: {{truth: cost}}}}, "
                             f"got {type(mapping).__name__}")
        for decided, row in mapping.items():
            if not isinstance(row, Mapping):
                raise ModelError(f"loss matrix row {decided!r} must be a mapping {{truth: cost}}, "
                                 f"got {type(row).__name__}")
        if classes is None:
            seen: dict[str, None] = {}
            for decided, row in mapping.items():
                seen.update(dict.fromkeys([decided, *row]))
            classes = tuple(seen)
        classes = tuple(classes)
        _check_classes(classes)
        index = {c: i for i, c in enumerate(classes)}
        loss = 1.0 - np.eye(len(classes))
        for decided, row in mapping.items():
            i = _lookup(index, decided, "decided class")
            for truth, cost in row.items():
                j = _lookup(index, truth, f"true class, row {decided!r}")
                if isinstance(cost, bool) or not isinstance(cost, int | float):
                    raise ModelError(f"loss matrix entry [decide {decided!r}, truth {truth!r}] must be a "
                                     f"number, got {cost!r}")
                loss[i, j] = cost
        return cls(classes, loss, reject)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LossMatrix):
            return NotImplemented
        return (self.classes, self.reject) == (other.classes, other.reject) and \
            np.array_equal(self.loss, other.loss)

    def to_mapping(self) -> dict[str, dict[str, float]]:
        """The inverse of :meth:`from_mapping` (every entry spelled out)."""
        return {d: {t: float(self.loss[i, j]) for j, t in enumerate(self.classes)}
                for i, d in enumerate(self.classes)}


def _check_classes(classes: tuple) -> None:
    if len(classes) < 2:
        raise ModelError(f"a loss matrix needs at least two classes, got {classes}")
    seen = set()
    for c in classes:
        if not isinstance(c, str) or not c:
            raise ModelError(f"class names must be non-empty strings, got {c!r}")
        if c in seen:
            raise ModelError(f"repeated class name {c!r} in loss matrix classes {classes}")
        seen.add(c)


def _lookup(index: Mapping[str, int], name: object, role: str) -> int:
    try:
        return index[name]  # type: ignore[index]
    except (KeyError, TypeError):
        raise ModelError(f"unknown class {name!r} in loss matrix ({role}); "
                         f"known classes: {', '.join(index)}") from None


# -- Bayes decisions ------------------------------------------------------------------------
def aligned_proba(loss: LossMatrix, proba: np.ndarray, model_classes: Sequence[str], *,
                  log: bool = False) -> np.ndarray:
    """Rows of ``P(c_j | x)`` in the loss matrix's class order, shape (n, k).

    ``proba`` (or, with ``log=True``, log-probabilities) has one column per ``model_classes``.
    A class the model has not seen gets probability 0; a model class the matrix does not list
    is an error naming it.
    """
    rows = np.atleast_2d(np.asarray(proba, dtype=np.float64))
    model_classes = list(model_classes)
    if rows.shape[1] != len(model_classes) and rows.size:
        raise ModelError(f"posterior rows have {rows.shape[1]} columns but the model has "
                         f"{len(model_classes)} classes {model_classes}")
    index = {c: i for i, c in enumerate(loss.classes)}
    out = np.zeros((rows.shape[0], len(loss.classes)))
    for col, c in enumerate(model_classes):
        if c not in index:
            raise ModelError(f"the model predicts class {c!r}, which the loss matrix does not list "
                             f"(its classes: {', '.join(loss.classes)})")
        out[:, index[c]] = np.exp(rows[:, col]) if log else rows[:, col]
    return out


def risks(loss: LossMatrix, proba: np.ndarray, model_classes: Sequence[str], *,
          log: bool = False) -> np.ndarray:
    """Conditional risks ``R[n, i] = Σ_j λ_ij P(c_j | x_n)``, columns in ``loss.classes`` order.

    >>> m = LossMatrix.false_positive(fp=10, fn=1)
    >>> risks(m, np.log([[0.8, 0.2]]), ["ham", "spam"], log=True).round(3).tolist()
    [[0.2, 8.0]]
    """
    return aligned_proba(loss, proba, model_classes, log=log) @ loss.loss.T


def decide(loss: LossMatrix, proba: np.ndarray, model_classes: Sequence[str], *,
           log: bool = False) -> list[str]:
    """The Bayes decision per row: ``argmin_i R(c_i | x)`` (ties: the first class of the matrix);
    :data:`UNSURE` when ``loss.reject`` is set and the smallest risk exceeds it. A row with no
    probability mass (a model that has learned nothing) is :data:`UNSURE` too.

    >>> m = LossMatrix.false_positive(fp=10, fn=1)
    >>> decide(m, np.array([[0.05, 0.95], [0.1, 0.9]]), ["ham", "spam"])  # spam iff P > 10/11
    ['spam', 'ham']
    """
    p = aligned_proba(loss, proba, model_classes, log=log)
    r = p @ loss.loss.T
    best = r.argmin(axis=1)
    out = [loss.classes[i] for i in best.tolist()]
    unsure = p.sum(axis=1) <= 0
    if loss.reject is not None:
        unsure |= r[np.arange(len(best)), best] > loss.reject
    for i in np.flatnonzero(unsure).tolist():
        out[i] = UNSURE
    return out


def decide_one(loss: LossMatrix, posterior: Mapping[str, float]) -> str:
    """The decision for one posterior event ``{"ham": 0.03, "spam": 0.97}`` (DESIGN.md §2).

    >>> decide_one(LossMatrix.false_positive(fp=10, fn=1, reject=0.5), {"ham": 0.03, "spam": 0.97})
    'spam'
    """
    names = list(posterior)
    return decide(loss, np.array([[posterior[c] for c in names]]), names)[0]


def expected_cost(decisions: Sequence[str], truths: Sequence[str], loss: LossMatrix,
                  weights: Sequence[float] | None = None) -> float:
    """Mean (weighted) cost ``λ[decision, truth]``; :data:`UNSURE` costs ``loss.reject``.

    >>> m = LossMatrix.false_positive(fp=10, fn=1, reject=0.5)
    >>> expected_cost(["spam", "ham", "unsure", "ham"], ["ham", "spam", "spam", "ham"], m)
    2.875
    """
    if len(decisions) != len(truths):
        raise ModelError(f"expected_cost got {len(decisions)} decisions but {len(truths)} truths")
    index = {c: i for i, c in enumerate(loss.classes)}
    extended = np.vstack([loss.loss, np.full(len(loss.classes), np.nan if loss.reject is None
                                             else loss.reject)])
    rows = [len(loss.classes) if d == UNSURE else _lookup(index, d, "decision") for d in decisions]
    cols = [_lookup(index, t, "truth") for t in truths]
    costs = extended[rows, cols]
    if np.isnan(costs).any():
        raise ModelError(f"a decision is {UNSURE!r} but the loss matrix has no reject cost")
    w = np.ones(len(costs)) if weights is None else np.asarray(weights, dtype=np.float64)
    return float(np.dot(costs, w) / w.sum()) if len(costs) else math.nan


# -- three-way cutoffs on P(positive) ----------------------------------------------------------
@dataclass(frozen=True)
class ThreeWay:
    """Two classes by cutoffs on ``P(positive)``: below ``low`` → ``negative``, above ``high``
    → ``positive``, otherwise :data:`UNSURE`.

    >>> ThreeWay("spam", "ham", low=0.2, high=0.9).decide([0.1, 0.5, 0.95])
    ['ham', 'unsure', 'spam']
    """

    positive: str
    negative: str
    low: float
    high: float

    def __post_init__(self) -> None:
        if not (0.0 <= self.low <= self.high <= 1.0):
            raise ModelError(f"three-way cutoffs need 0 <= low <= high <= 1, got low={self.low}, "
                             f"high={self.high}")
        if self.positive == self.negative or UNSURE in (self.positive, self.negative):
            raise ModelError(f"three-way classes must be two distinct names other than {UNSURE!r}, "
                             f"got {self.positive!r} and {self.negative!r}")

    def decide(self, p_positive: Sequence[float] | np.ndarray) -> list[str]:
        p = np.asarray(p_positive, dtype=np.float64)
        out = np.where(p > self.high, 1, np.where(p < self.low, 0, 2))
        names = (self.negative, self.positive, UNSURE)
        return [names[i] for i in out.tolist()]


@dataclass(frozen=True)
class Cutoffs:
    """The result of :func:`tune_cutoffs`: the rule's cutoffs, its mean cost and unsure rate."""

    low: float
    high: float
    cost: float
    unsure_rate: float

    def rule(self, positive: str, negative: str) -> ThreeWay:
        return ThreeWay(positive, negative, self.low, self.high)


def tune_cutoffs(p_positive: Sequence[float] | np.ndarray, y_is_positive: Sequence[bool] | np.ndarray,
                 weights: Sequence[float] | None = None, *, fp_cost: float, fn_cost: float,
                 unsure_cost: float) -> Cutoffs:
    """The cutoffs ``0 <= low <= high <= 1`` minimising the mean cost on a replay (exhaustive).

    1. Sort the events by ``P(positive)`` and group equal values: a rule decides negative for a
       prefix of the groups, positive for a suffix and unsure in between.
    2. With cumulative sums, the cost of ``a`` negative groups and positives from group ``b`` on is
       ``f(a) + g(b)``, ``f(a) = fn·W⁺(<a) − u·W(<a)``, ``g(b) = fp·W⁻(≥b) + u·W(<b)``.
    3. For every ``b`` the best ``a <= b`` is the running minimum of ``f``; the best pair has the
       smallest cost, then the fewest unsure events. O(n log n) for the sort, O(n) after.
    4. Cutoffs sit halfway between neighbouring distinct probabilities.

    >>> c = tune_cutoffs([0.1, 0.4, 0.6, 0.9], [False, False, True, True], fp_cost=10,
    ...                  fn_cost=1, unsure_cost=0.5)
    >>> c.low, c.high, c.cost, c.unsure_rate
    (0.5, 0.5, 0.0, 0.0)
    """
    p = np.asarray(p_positive, dtype=np.float64)
    y = np.asarray(y_is_positive, dtype=bool)
    w = np.ones(len(p)) if weights is None else np.asarray(weights, dtype=np.float64)
    if not (p.ndim == 1 and p.shape == y.shape == w.shape and len(p)):
        raise ModelError(f"tune_cutoffs needs equally long non-empty 1-D inputs, got p {p.shape}, "
                         f"y {y.shape}, weights {w.shape}")
    if not (np.isfinite(p).all() and p.min() >= 0 and p.max() <= 1):
        raise ModelError("tune_cutoffs: probabilities must be finite and within [0, 1]")
    if not (np.isfinite(w).all() and w.min() >= 0 and w.sum() > 0):
        raise ModelError("tune_cutoffs: weights must be finite, >= 0 and not all 0")
    order = np.argsort(p, kind="stable")
    values, group = np.unique(p[order], return_inverse=True)
    m = len(values)
    w_pos = np.bincount(group, weights=(w * y)[order], minlength=m)
    w_all = np.bincount(group, weights=w[order], minlength=m)
    cum_pos = np.concatenate([[0.0], np.cumsum(w_pos)])  # weight of the first a groups, a = 0..m
    cum_all = np.concatenate([[0.0], np.cumsum(w_all)])
    cum_neg = cum_all - cum_pos
    f = fn_cost * cum_pos - unsure_cost * cum_all
    g = fp_cost * (cum_neg[-1] - cum_neg) + unsure_cost * cum_all
    if values[-1] >= 1.0:  # P = 1 can never be below low <= 1
        f[m] = np.inf
    if values[0] <= 0.0:  # P = 0 can never be above high >= 0
        g[0] = np.inf
    run_min = np.minimum.accumulate(f)
    ties = np.where(f == run_min, np.arange(m + 1), -1)
    best_a = np.maximum.accumulate(ties)  # latest a <= b reaching the minimum: fewest unsure
    total = run_min + g
    unsure = cum_all - cum_all[best_a]
    b = int(np.lexsort((unsure, total))[0])
    a = int(best_a[b])
    low, high = _cutoff(values, a, side="low"), _cutoff(values, b, side="high")
    high = max(high, low)
    code = np.where(p > high, 1, np.where(p < low, 0, 2))  # as ThreeWay.decide: 1 pos, 0 neg, 2 unsure
    costs = np.where(code == 1, np.where(y, 0.0, fp_cost),
                     np.where(code == 0, np.where(y, fn_cost, 0.0), unsure_cost))
    return Cutoffs(low, high, float(costs @ w / w.sum()), float((code == 2) @ w / w.sum()))


def _cutoff(values: np.ndarray, i: int, side: str) -> float:
    """A cutoff between distinct values ``values[i-1]`` and ``values[i]`` (0 or 1 at the ends)."""
    if i == 0:
        return 0.0
    if i == len(values):
        return 1.0
    lo, hi = float(values[i - 1]), float(values[i])
    mid = 0.5 * (lo + hi)
    if side == "low":  # need lo < low <= hi
        return mid if lo < mid else hi
    return mid if mid < hi else lo  # need lo <= high < hi


def positive_proba(proba: np.ndarray, model_classes: Sequence[str], positive: str, *,
                   log: bool = False) -> np.ndarray:
    """The column ``P(positive | x)`` of posterior rows (0 if the model has not seen the class)."""
    rows = np.atleast_2d(np.asarray(proba, dtype=np.float64))
    classes = list(model_classes)
    if positive not in classes:
        return np.zeros(rows.shape[0])
    col = rows[:, classes.index(positive)]
    return np.exp(col) if log else col.copy()


__all__ = ["UNSURE", "Cutoffs", "LossMatrix", "ThreeWay", "aligned_proba", "decide", "decide_one",
           "expected_cost", "positive_proba", "risks", "tune_cutoffs"]
