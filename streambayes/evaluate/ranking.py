"""Ranking metrics: precision of the top fraction, NDCG, and their average over keys (users).

Items are ranked by score, highest first; **ties keep index order** (a stable sort), so the
result never depends on the sort algorithm and an all-equal scorer ranks items as given.

- :func:`precision_at_fraction`: the share of relevant items among the top ``ceil(fraction·n)``.
  The fraction is read as the nearest ratio with a denominator up to 10^6, so ``0.07 · 100`` is 7,
  not the 8 that floating-point ``math.ceil(0.07 * 100)`` gives.
- :func:`ndcg`: ``DCG@k = Σ_{i=1..k} rel_i / log2(i + 1)`` with linear gains (the relevance
  itself), divided by the DCG of the ideal order (Järvelin & Kekäläinen 2002, "Cumulated
  gain-based evaluation of IR techniques", ACM TOIS 20). With no relevant item the ideal DCG is 0
  and NDCG is undefined: it is ``None``.
- :func:`per_key` groups items by key (e.g. user) and averages a metric over the keys (macro
  average); keys where the metric is ``None`` are skipped and listed. :func:`ndcg_per_key` thus
  skips users with no relevant item; :func:`precision_at_fraction_per_key` keeps them (their
  precision is 0).

>>> precision_at_fraction([0.9, 0.1, 0.8, 0.3], [True, False, False, True], fraction=0.5)
0.5
>>> round(ndcg([0.9, 0.8, 0.1], [0, 1, 1]), 4)  # DCG 1/log2(3) + 1/log2(4); ideal 1 + 1/log2(3)
0.6934
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np


def rank_order(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    """Item indices from the highest score to the lowest; ties keep index order.

    >>> rank_order([0.2, 0.9, 0.2, 0.9]).tolist()
    [1, 3, 0, 2]
    """
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1:
        raise ValueError(f"scores must be one-dimensional, got shape {s.shape}")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN: the ranking is undefined")
    return np.argsort(-s, kind="stable")


def top_count(n: int, fraction: float) -> int:
    """``ceil(fraction · n)`` with ``fraction`` read as a short ratio (see the module docstring).

    >>> top_count(30, 0.1), top_count(31, 0.1), top_count(5, 0.1), top_count(100, 0.07)
    (3, 4, 1, 7)
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    return math.ceil(Fraction(fraction).limit_denominator(10**6) * n)


def _check_lengths(scores: Sequence, labels: Sequence, name: str) -> None:
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores but {len(labels)} {name}")


def precision_at_fraction(scores: Sequence[float] | np.ndarray, relevant: Sequence[bool] | np.ndarray,
                          fraction: float = 0.10) -> float | None:
    """Share of relevant items among the top ``ceil(fraction·n)`` by score; ``None`` if ``n == 0``.

    >>> precision_at_fraction([5, 4, 3, 2, 1, 0, 0, 0, 0, 0], [0, 1] + [1] * 8, fraction=0.2)
    0.5
    """
    _check_lengths(scores, relevant, "relevance flags")
    n = len(scores)
    if n == 0:
        return None
    top = rank_order(scores)[:top_count(n, fraction)]
    return float(np.asarray(relevant, dtype=bool)[top].mean())


def dcg(gains_in_rank_order: np.ndarray) -> float:
    """``Σ_i gain_i / log2(i + 1)`` for ranks ``i = 1, 2, ...``.

    >>> round(dcg(np.array([3.0, 2.0, 3.0])), 6)  # 3/1 + 2/log2(3) + 3/2
    5.76186
    """
    ranks = np.arange(1, len(gains_in_rank_order) + 1)
    return float(np.sum(gains_in_rank_order / np.log2(ranks + 1)))


def ndcg(scores: Sequence[float] | np.ndarray, relevance: Sequence[float] | np.ndarray,
         k: int | None = None) -> float | None:
    """NDCG of the score order (cut at ``k`` items if given); ``None`` when nothing is relevant.

    >>> ndcg([3, 2, 1], [2, 1, 0]), ndcg([1, 2, 3], [0, 0, 0])
    (1.0, None)
    """
    _check_lengths(scores, relevance, "relevance values")
    if k is not None and k < 1:
        raise ValueError(f"ndcg: k must be >= 1, got {k}")
    rel = np.asarray(relevance, dtype=float)
    if (rel < 0).any() or np.isnan(rel).any():
        raise ValueError("ndcg: relevance must be >= 0")
    k = len(rel) if k is None else min(k, len(rel))
    ideal = dcg(np.sort(rel)[::-1][:k])
    if ideal == 0.0:
        return None
    return dcg(rel[rank_order(scores)[:k]]) / ideal


@dataclass(frozen=True)
class KeyedScore:
    """A metric averaged over keys: the mean, each key's value, and the keys skipped (``None``)."""

    mean: float | None
    values: dict[Hashable, float] = field(default_factory=dict)
    skipped: list[Hashable] = field(default_factory=list)


def group_by_key(keys: Sequence[Hashable], scores: Sequence[float] | np.ndarray,
                 labels: Sequence | np.ndarray) -> dict[Hashable, tuple[np.ndarray, np.ndarray]]:
    """``{key: (scores, labels)}`` in order of each key's first item; items keep their order.

    >>> {k: v[0].tolist() for k, v in group_by_key(["u", "v", "u"], [1, 2, 3], [0, 1, 1]).items()}
    {'u': [1.0, 3.0], 'v': [2.0]}
    """
    if not len(keys) == len(scores) == len(labels):
        raise ValueError(f"{len(keys)} keys, {len(scores)} scores and {len(labels)} labels differ")
    rows: dict[Hashable, list[int]] = {}
    for i, key in enumerate(keys):
        rows.setdefault(key, []).append(i)
    s, y = np.asarray(scores, dtype=float), np.asarray(labels)
    return {key: (s[idx], y[idx]) for key, idx in rows.items()}


def per_key(metric: Callable[..., float | None], keys: Sequence[Hashable],
            scores: Sequence[float] | np.ndarray, labels: Sequence | np.ndarray,
            **kwargs: object) -> KeyedScore:
    """Apply ``metric(scores, labels, **kwargs)`` per key and average the non-``None`` values."""
    values: dict[Hashable, float] = {}
    skipped: list[Hashable] = []
    for key, (s, y) in group_by_key(keys, scores, labels).items():
        value = metric(s, y, **kwargs)
        if value is None:
            skipped.append(key)
        else:
            values[key] = value
    mean = math.fsum(values.values()) / len(values) if values else None
    return KeyedScore(mean, values, skipped)


def precision_at_fraction_per_key(keys: Sequence[Hashable], scores: Sequence[float] | np.ndarray,
                                  relevant: Sequence[bool] | np.ndarray,
                                  fraction: float = 0.10) -> KeyedScore:
    """Mean over keys of :func:`precision_at_fraction`; keys with no relevant item count as 0."""
    return per_key(precision_at_fraction, keys, scores, relevant, fraction=fraction)


def ndcg_per_key(keys: Sequence[Hashable], scores: Sequence[float] | np.ndarray,
                 relevance: Sequence[float] | np.ndarray, k: int | None = None) -> KeyedScore:
    """Mean over keys of :func:`ndcg`; keys with no relevant item are skipped (``skipped``).

    >>> r = ndcg_per_key(["u", "u", "v", "v"], [2, 1, 2, 1], [1, 0, 0, 0])
    >>> r.mean, r.skipped
    (1.0, ['v'])
    """
    return per_key(ndcg, keys, scores, relevance, k=k)
