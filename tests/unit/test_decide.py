"""Cost-sensitive decisions: Bayes risk on a hand-made loss matrix, the reject option, bad loss
matrices, and three-way cutoffs tuned on a replay."""

import itertools

import numpy as np
import pytest

from streambayes.decide import (
    UNSURE,
    LossMatrix,
    ThreeWay,
    decide,
    decide_one,
    expected_cost,
    risks,
    tune_cutoffs,
)
from streambayes.errors import ModelError

CLASSES = ("a", "b", "c")
# loss[i, j]: decide CLASSES[i] when the truth is CLASSES[j]
LOSS = np.array([[0.0, 2.0, 6.0],
                 [1.0, 0.0, 3.0],
                 [4.0, 1.0, 0.0]])
POSTERIOR = np.array([[0.5, 0.25, 0.25]])  # binary fractions: the risks below are exact


def test_risk_is_loss_times_posterior_and_the_decision_its_argmin():
    m = LossMatrix(CLASSES, LOSS)
    # R(a) = 0*.5 + 2*.25 + 6*.25 = 2.0; R(b) = 1*.5 + 0 + 3*.25 = 1.25; R(c) = 4*.5 + 1*.25 + 0 = 2.25
    assert risks(m, POSTERIOR, CLASSES).tolist() == [[2.0, 1.25, 2.25]]
    assert decide(m, POSTERIOR, CLASSES) == ["b"]  # not "a", the most probable class
    assert decide(LossMatrix.zero_one(CLASSES), POSTERIOR, CLASSES) == ["a"]


def test_reject_when_the_smallest_risk_exceeds_the_reject_cost_and_only_then():
    assert decide(LossMatrix(CLASSES, LOSS, reject=1.0), POSTERIOR, CLASSES) == [UNSURE]
    assert decide(LossMatrix(CLASSES, LOSS, reject=1.25), POSTERIOR, CLASSES) == ["b"]  # equal: answer
    assert decide(LossMatrix(CLASSES, LOSS, reject=1.5), POSTERIOR, CLASSES) == ["b"]


def test_columns_are_aligned_by_class_name_and_log_input_agrees():
    m = LossMatrix(CLASSES, LOSS)
    permuted = POSTERIOR[:, [2, 0, 1]]
    assert risks(m, permuted, ["c", "a", "b"]).tolist() == [[2.0, 1.25, 2.25]]
    assert np.allclose(risks(m, np.log(permuted), ["c", "a", "b"], log=True), [[2.0, 1.25, 2.25]])
    # a class the model has not seen has probability 0: R = (1, 0.5, 2.5)
    assert np.allclose(risks(m, [[0.5, 0.5]], ["a", "b"]), [[1.0, 0.5, 2.5]])


def test_a_model_class_missing_from_the_matrix_is_named():
    with pytest.raises(ModelError, match="class 'd'.*does not list"):
        decide(LossMatrix(CLASSES, LOSS), [[0.5, 0.5]], ["a", "d"])


def test_ties_go_to_the_first_class_and_an_empty_posterior_is_unsure():
    m = LossMatrix.zero_one(("ham", "spam"))
    assert decide(m, [[0.5, 0.5]], ["spam", "ham"]) == ["ham"]
    assert decide(m, np.zeros((1, 0)), []) == [UNSURE]


def test_ten_to_one_false_positive_cost_moves_the_threshold_to_ten_elevenths():
    m = LossMatrix.false_positive(("ham", "spam"), positive="spam", fp=10, fn=1)
    p_spam = np.array([0.5, 0.9, 0.905, 0.915, 0.99])
    got = decide(m, np.column_stack([1 - p_spam, p_spam]), ["ham", "spam"])
    assert got == ["ham", "ham", "ham", "spam", "spam"]
    with_reject = LossMatrix.false_positive(fp=10, fn=1, reject=0.5)  # unsure for 0.5 < p < 0.95
    assert decide_one(with_reject, {"ham": 0.4, "spam": 0.6}) == UNSURE
    assert decide_one(with_reject, {"ham": 0.6, "spam": 0.4}) == "ham"
    assert decide_one(with_reject, {"spam": 0.96, "ham": 0.04}) == "spam"


def test_from_mapping_fills_missing_entries_and_keeps_the_given_order():
    m = LossMatrix.from_mapping({"spam": {"ham": 10}}, classes=["ham", "spam"], reject=0.5)
    assert m.loss.tolist() == [[0.0, 1.0], [10.0, 0.0]] and m.reject == 0.5
    inferred = LossMatrix.from_mapping({"x": {"y": 3}, "z": {}})
    assert inferred.classes == ("x", "y", "z")
    assert inferred.loss.tolist() == [[0.0, 3.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]]
    assert LossMatrix.from_mapping(m.to_mapping(), reject=0.5) == m
    assert LossMatrix.from_mapping(m.to_mapping()) != m  # no reject cost


def test_the_loss_matrix_is_a_frozen_copy():
    source = LOSS.copy()
    m = LossMatrix(CLASSES, source)
    source[0, 1] = 99.0
    assert m.loss[0, 1] == 2.0
    with pytest.raises(ValueError):
        m.loss[0, 1] = 5.0


@pytest.mark.parametrize(("build", "message"), [
    (lambda: LossMatrix(("ham", "spam"), np.ones((2, 3))),
     r"loss matrix must be 2x2 for classes \('ham', 'spam'\), got shape \(2, 3\)"),
    (lambda: LossMatrix(("ham", "spam"), [[0, -1], [1, 0]]),
     r"entry \[decide 'ham', truth 'spam'\] = -1.0 is negative"),
    (lambda: LossMatrix(("ham", "spam"), [[0, 1], [np.nan, 0]]),
     r"entry \[decide 'spam', truth 'ham'\] = nan is not finite"),
    (lambda: LossMatrix.from_mapping({"spma": {"ham": 10}}, classes=["ham", "spam"]),
     r"unknown class 'spma' in loss matrix \(decided class\); known classes: ham, spam"),
    (lambda: LossMatrix.from_mapping({"spam": {"hma": 10}}, classes=["ham", "spam"]),
     r"unknown class 'hma' in loss matrix \(true class, row 'spam'\)"),
    (lambda: LossMatrix.from_mapping({"spam": {"ham": "ten"}}, classes=["ham", "spam"]),
     r"entry \[decide 'spam', truth 'ham'\] must be a number, got 'ten'"),
    (lambda: LossMatrix(("ham", "ham"), np.zeros((2, 2))), "repeated class name 'ham'"),
    (lambda: LossMatrix(("ham",), np.zeros((1, 1))), "at least two classes"),
    (lambda: LossMatrix.zero_one(("ham", "spam"), reject=-0.5), "reject cost must be a finite number >= 0"),
    (lambda: LossMatrix.zero_one(("ham", UNSURE), reject=0.5), "reserved for the reject option"),
    (lambda: LossMatrix.false_positive(("ham", "spam"), positive="Spam"), "unknown positive class 'Spam'"),
    (lambda: ThreeWay("spam", "ham", low=0.9, high=0.2), "0 <= low <= high <= 1"),
])
def test_bad_loss_configuration_is_refused_with_a_message_naming_the_problem(build, message):
    with pytest.raises(ModelError, match=message) as info:
        build()
    assert isinstance(info.value, ValueError)


def test_expected_cost_by_hand():
    m = LossMatrix.false_positive(fp=10, fn=1, reject=0.5)
    decisions = ["spam", "ham", UNSURE, "ham", "spam"]
    truths = ["ham", "spam", "spam", "ham", "spam"]
    assert expected_cost(decisions, truths, m) == pytest.approx((10 + 1 + 0.5 + 0 + 0) / 5)
    assert expected_cost(decisions, truths, m, weights=[0, 1, 1, 1, 1]) == pytest.approx(1.5 / 4)
    with pytest.raises(ModelError, match="no reject cost"):
        expected_cost([UNSURE], ["ham"], LossMatrix.false_positive())
    with pytest.raises(ModelError, match="unknown class 'eggs'"):
        expected_cost(["eggs"], ["ham"], m)


def test_three_way_rule():
    rule = ThreeWay("spam", "ham", low=0.3, high=0.8)
    assert rule.decide([0.0, 0.29, 0.3, 0.8, 0.81, 1.0]) == ["ham", "ham", UNSURE, UNSURE, "spam", "spam"]


P = [0.1, 0.3, 0.5, 0.7, 0.9]
Y = [False, True, False, True, True]


def test_tuned_cutoffs_on_a_hand_made_replay():
    # fp 10, fn 2, unsure 0.5. Marking the negative at 0.5 spam costs 10, so spam starts above it;
    # the positive at 0.3 costs 2 as ham but 0.5 as unsure, and 0.5 (negative) must then be unsure
    # too: unsure = {0.3, 0.5}, cost (0.5 + 0.5) / 5 = 0.2; every other rule costs more.
    c = tune_cutoffs(P, Y, fp_cost=10, fn_cost=2, unsure_cost=0.5)
    assert (c.low, c.high) == pytest.approx((0.2, 0.6))
    assert c.cost == pytest.approx(0.2) and c.unsure_rate == pytest.approx(0.4)
    assert c.rule("spam", "ham").decide(P) == ["ham", UNSURE, UNSURE, "spam", "spam"]


def test_equal_costs_prefer_the_rule_with_fewer_unsure_answers():
    # with fn 1, calling 0.3 and 0.5 ham costs 1, the same as two unsure answers: prefer no unsure
    c = tune_cutoffs(P, Y, fp_cost=10, fn_cost=1, unsure_cost=0.5)
    assert (c.low, c.high, c.unsure_rate) == pytest.approx((0.6, 0.6, 0.0))
    assert c.cost == pytest.approx(0.2)


def test_weights_count_like_repeated_events():
    weighted = tune_cutoffs(P, Y, weights=[1, 3, 1, 1, 1], fp_cost=10, fn_cost=1, unsure_cost=0.5)
    repeated = tune_cutoffs(P + [0.3, 0.3], Y + [True, True], fp_cost=10, fn_cost=1, unsure_cost=0.5)
    assert (weighted.low, weighted.high) == (repeated.low, repeated.high) == (0.2, 0.6)
    assert weighted.cost == pytest.approx(repeated.cost) == pytest.approx((3 * 0.5 + 0.5) / 7)


def _brute_force(p, y, fp, fn, u):
    values = np.unique(p)
    cuts = sorted({0.0, 1.0, *((values[1:] + values[:-1]) / 2).tolist()})
    best = np.inf
    for low, high in itertools.combinations_with_replacement(cuts, 2):
        d = ThreeWay("p", "n", low, high).decide(p)
        costs = {"p": (fp, 0), "n": (0, fn), UNSURE: (u, u)}
        cost = np.mean([costs[x][int(t)] for x, t in zip(d, y, strict=True)])
        best = min(best, cost)
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tuned_cutoffs_match_an_exhaustive_search(seed):
    rng = np.random.default_rng(seed)
    p = np.round(rng.random(120), 2)  # ties on purpose
    y = rng.random(120) < p
    p[:3] = [0.0, 1.0, 1.0]  # the ends: 0 can never be positive, 1 never negative
    c = tune_cutoffs(p, y, fp_cost=10, fn_cost=1, unsure_cost=0.4)
    assert c.cost == pytest.approx(_brute_force(p, y, 10, 1, 0.4))
    d = c.rule("p", "n").decide(p)
    assert c.unsure_rate == pytest.approx(np.mean([x == UNSURE for x in d]))


def test_tune_cutoffs_is_fast_on_a_long_replay():
    import time

    rng = np.random.default_rng(3)
    p = rng.random(200_000)
    t0 = time.perf_counter()
    tune_cutoffs(p, rng.random(200_000) < p, fp_cost=10, fn_cost=1, unsure_cost=0.5)
    assert time.perf_counter() - t0 < 10.0  # O(n log n): ~0.1 s; an O(n^2) search would take hours


def test_tune_cutoffs_refuses_bad_input():
    with pytest.raises(ModelError, match="within \\[0, 1\\]"):
        tune_cutoffs([0.2, 1.5], [True, False], fp_cost=1, fn_cost=1, unsure_cost=0.5)
    with pytest.raises(ModelError, match="equally long"):
        tune_cutoffs([0.2, 0.5], [True], fp_cost=1, fn_cost=1, unsure_cost=0.5)
