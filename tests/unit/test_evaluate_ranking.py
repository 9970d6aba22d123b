"""Precision of the top fraction and NDCG, on hand-made rankings, and their per-user averages."""

import math

import numpy as np
import pytest

from streambayes.evaluate.ranking import (
    dcg,
    ndcg,
    ndcg_per_key,
    per_key,
    precision_at_fraction,
    precision_at_fraction_per_key,
    rank_order,
    top_count,
)


def test_precision_at_10_percent_on_a_hand_made_ranking():
    # 20 messages: the top 10% are the two highest scores, items 7 (spam) and 3 (ham)
    scores = [0.1] * 20
    scores[7], scores[3], scores[12] = 0.99, 0.95, 0.90
    relevant = [False] * 20
    relevant[7] = relevant[12] = True
    assert precision_at_fraction(scores, relevant) == 0.5
    assert precision_at_fraction(scores, relevant, fraction=0.15) == pytest.approx(2 / 3)
    assert precision_at_fraction(scores, relevant, fraction=0.05) == 1.0


def test_top_count_rounds_up_without_floating_point_surprises():
    assert [top_count(n, 0.1) for n in (1, 9, 10, 11, 30, 70, 100)] == [1, 1, 1, 2, 3, 7, 10]
    assert top_count(100, 0.07) == 7 and math.ceil(0.07 * 100) == 8  # 0.07 * 100 = 7.000000000000001
    assert top_count(3, 1.0) == 3 and top_count(7, 1 / 3) == 3
    with pytest.raises(ValueError):
        top_count(10, 0.0)


def test_ties_are_broken_by_index_order():
    assert rank_order([1.0, 2.0, 1.0, 2.0, 1.0]).tolist() == [1, 3, 0, 2, 4]
    # a constant scorer keeps the given order: the top 1 of 5 is item 0
    assert precision_at_fraction([0.5] * 5, [True, False, False, False, False], 0.2) == 1.0
    assert precision_at_fraction([0.5] * 5, [False, True, False, False, False], 0.2) == 0.0
    assert ndcg([0.5, 0.5], [0, 1]) == pytest.approx(1 / math.log2(3))


def test_ndcg_by_hand():
    # order by score: items 1, 0, 2 with relevances 3, 2, 3 (gains are the relevances)
    scores, relevance = [0.5, 0.9, 0.1], [2, 3, 3]
    dcg_value = 3 + 2 / math.log2(3) + 3 / 2
    ideal = 3 + 3 / math.log2(3) + 2 / 2
    assert ndcg(scores, relevance) == pytest.approx(dcg_value / ideal)
    assert ndcg(scores, relevance, k=1) == 1.0
    assert ndcg(scores, relevance, k=2) == pytest.approx((3 + 2 / math.log2(3)) / (3 + 3 / math.log2(3)))
    assert ndcg(scores, relevance, k=10) == ndcg(scores, relevance)
    assert dcg(np.array([1.0, 1.0, 1.0, 1.0])) == pytest.approx(1 + 1 / math.log2(3) + 0.5 + 1 / math.log2(5))


def test_binary_ndcg_of_the_worst_and_best_orders():
    relevance = [1, 0, 0, 0]
    assert ndcg([4, 3, 2, 1], relevance) == 1.0
    assert ndcg([1, 2, 3, 4], relevance) == pytest.approx(1 / math.log2(5))


def test_no_relevant_item_and_bad_inputs():
    assert ndcg([0.3, 0.2], [0, 0]) is None
    assert precision_at_fraction([], []) is None
    assert precision_at_fraction([0.3, 0.2], [False, False]) == 0.0
    for bad in (lambda: ndcg([1.0], [-1.0]), lambda: ndcg([1.0, 2.0], [1.0]),
                lambda: ndcg([1.0], [1.0], k=0), lambda: rank_order([float("nan")]),
                lambda: precision_at_fraction([1.0], [True], fraction=1.5)):
        with pytest.raises(ValueError):
            bad()


def test_per_user_averages_skip_users_without_relevant_items_for_ndcg_only():
    users = ["ann", "bob", "ann", "cy", "bob", "ann", "cy"]
    scores = [0.9, 0.2, 0.1, 0.5, 0.8, 0.5, 0.4]
    relevant = [0, 1, 1, 0, 0, 0, 0]
    # ann: order 0 (0), 5 (0), 2 (1) -> DCG 1/log2(4) = 0.5, ideal 1; bob: order 4 (0), 1 (1)
    result = ndcg_per_key(users, scores, relevant)
    assert result.values == pytest.approx({"ann": 0.5, "bob": 1 / math.log2(3)})
    assert result.skipped == ["cy"]
    assert result.mean == pytest.approx((0.5 + 1 / math.log2(3)) / 2)
    # precision of the top ceil(0.34 n): ann top 2 -> 0/2, bob top 1 -> 0/1, cy top 1 -> 0/1
    p = precision_at_fraction_per_key(users, scores, relevant, fraction=0.34)
    assert p.values == {"ann": 0.0, "bob": 0.0, "cy": 0.0} and p.skipped == [] and p.mean == 0.0
    p = precision_at_fraction_per_key(users, [-s for s in scores], relevant, fraction=0.5)
    # reversed scores: ann top 2 = items 2, 5 -> 1/2; bob top 1 = item 1 -> 1; cy top 1 -> 0
    assert p.values == {"ann": 0.5, "bob": 1.0, "cy": 0.0} and p.mean == pytest.approx(0.5)


def test_per_key_with_a_custom_metric_and_all_skipped():
    r = per_key(lambda s, y: None, ["a", "b"], [1.0, 2.0], [0, 1])
    assert r.mean is None and r.values == {} and r.skipped == ["a", "b"]
    with pytest.raises(ValueError):
        per_key(ndcg, ["a"], [1.0, 2.0], [0, 1])
