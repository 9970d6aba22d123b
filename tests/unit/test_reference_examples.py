"""The worked examples of ../shared/reference, reproduced exactly.

Conditional estimates are read through the public API: ``joint_log_likelihood_one({})``
is ``log P(c)`` and ``joint_log_likelihood_one({field: value})`` adds ``log P(value | c)``.
"""

import math

import pytest

from streambayes.models import CategoricalNB, MultinomialNB, NaiveBayes


def joint(model, x):
    return {c: math.exp(v) for c, v in model.joint_log_likelihood_one(x).items()}


def conditional(model, field, value):
    prior, both = joint(model, {}), joint(model, {field: value})
    return {c: both[c] / prior[c] for c in prior}


# -- Mitchell ch. 6 (reference 000) and CMU 10-601 (reference 004): the cancer test ---------

def cancer_model(tests: int, class_prior=None):
    """P(cancer)=0.008, P(+|cancer)=0.98, P(+|¬cancer)=0.03, learnt as weighted events."""
    m = CategoricalNB(alpha=0.0, class_prior=class_prior)
    like = {"cancer": {"+": 0.98, "-": 0.02}, "no": {"+": 0.03, "-": 0.97}}
    prior = {"cancer": 0.008, "no": 0.992}
    outcomes = [[]]
    for _ in range(tests):
        outcomes = [o + [r] for o in outcomes for r in "+-"]
    for c in prior:
        for o in outcomes:  # every combination of results, weighted by its probability
            w = prior[c] * math.prod(like[c][r] for r in o)
            m.learn_one({f"test{i}": r for i, r in enumerate(o)}, c, w=w)
    return m


def test_cancer_one_positive_test():
    m = cancer_model(1)
    j = joint(m, {"test0": "+"})
    assert j["cancer"] == pytest.approx(0.008 * 0.98, rel=1e-12)
    assert j["no"] == pytest.approx(0.992 * 0.03, rel=1e-12)
    assert (round(j["cancer"], 4), round(j["no"], 4)) == (0.0078, 0.0298)
    post = m.predict_proba_one({"test0": "+"})
    assert post["cancer"] == pytest.approx(0.00784 / (0.00784 + 0.02976), rel=1e-12)
    assert round(post["cancer"], 2) == 0.21 and round(post["no"], 2) == 0.79
    assert m.predict_one({"test0": "+"}) == "no"  # h_MAP = ¬cancer


def test_cancer_second_positive_test_by_sequential_updating():
    first = cancer_model(1).predict_proba_one({"test0": "+"})
    exact = 0.008 * 0.98**2 / (0.008 * 0.98**2 + 0.992 * 0.03**2)
    sequential = cancer_model(1, class_prior=first).predict_proba_one({"test0": "+"})
    both_at_once = cancer_model(2).predict_proba_one({"test0": "+", "test1": "+"})
    assert sequential["cancer"] == pytest.approx(exact, rel=1e-12)
    assert both_at_once["cancer"] == pytest.approx(exact, rel=1e-12)
    # The notes carry the rounded posterior 0.208 forward as the prior and print 0.895: both
    # 0.89561 (from 0.208) and the exact 0.89590 read 0.895 when cut to three decimals.
    rounded = cancer_model(1, class_prior={"cancer": 0.208, "no": 0.792})
    for p in (rounded.predict_proba_one({"test0": "+"})["cancer"], exact):
        assert math.floor(p * 1000) / 1000 == 0.895


# -- Zhou, ch. 7 (reference 002): the watermelon table ----------------------------------------

WATERMELON = """\
青绿 蜷缩 浊响 清晰 是
乌黑 蜷缩 沉闷 清晰 是
乌黑 蜷缩 浊响 清晰 是
青绿 蜷缩 沉闷 清晰 是
浅白 蜷缩 浊响 清晰 是
青绿 稍蜷 浊响 清晰 是
乌黑 稍蜷 浊响 稍糊 是
乌黑 稍蜷 浊响 清晰 是
乌黑 稍蜷 沉闷 稍糊 否
青绿 硬挺 清脆 清晰 否
浅白 硬挺 清脆 模糊 否
浅白 蜷缩 浊响 模糊 否
青绿 稍蜷 浊响 稍糊 否
浅白 稍蜷 沉闷 稍糊 否
乌黑 稍蜷 浊响 清晰 否
浅白 蜷缩 浊响 模糊 否
青绿 蜷缩 沉闷 稍糊 否"""
FIELDS = ("色泽", "根蒂", "敲声", "纹理")
QUERY = dict(zip(FIELDS, ("青绿", "稍蜷", "浊响", "清晰"), strict=True))


def watermelon(**params):
    m = CategoricalNB(**params)
    for line in WATERMELON.splitlines():
        *values, label = line.split()
        m.learn_one(dict(zip(FIELDS, values, strict=True)), label)
    return m


def test_watermelon_estimates_and_classification():
    m = watermelon(alpha=0.0)
    assert joint(m, {}) == pytest.approx({"是": 8 / 17, "否": 9 / 17}, rel=1e-12)
    listed = {"色泽": (3 / 8, 3 / 9), "根蒂": (3 / 8, 4 / 9), "敲声": (6 / 8, 4 / 9), "纹理": (7 / 8, 2 / 9)}
    for field, (good, bad) in listed.items():
        got = conditional(m, field, QUERY[field])
        assert got == pytest.approx({"是": good, "否": bad}, rel=1e-12)
    j = joint(m, QUERY)
    assert j["是"] == pytest.approx(3 / 8 * 3 / 8 * 6 / 8 * 7 / 8 * 8 / 17, rel=1e-12)
    assert j["否"] == pytest.approx(3 / 9 * 4 / 9 * 4 / 9 * 2 / 9 * 9 / 17, rel=1e-12)
    assert m.predict_one(QUERY) == "是"  # 好瓜


def test_watermelon_laplace_correction():
    m = watermelon(alpha=1.0, prior_alpha=1.0)
    assert joint(m, {}) == pytest.approx({"是": 9 / 19, "否": 10 / 19}, rel=1e-12)  # (|D_c|+1)/(|D|+N)
    corrected = {"色泽": (4 / 11, 4 / 12), "根蒂": (4 / 11, 5 / 12), "敲声": (7 / 11, 5 / 12),
                 "纹理": (8 / 11, 3 / 12)}  # (|D_c,xi|+1)/(|D_c|+N_i), N_i = 3
    for field, (good, bad) in corrected.items():
        assert conditional(m, field, QUERY[field]) == pytest.approx({"是": good, "否": bad}, rel=1e-12)
    # "敲声=清脆" never occurs with a good melon: Laplace keeps it from erasing the rest.
    assert conditional(m, "敲声", "清脆")["是"] == pytest.approx(1 / 11, rel=1e-12)
    assert m.predict_one(QUERY) == "是"


# -- reference 001: the loan-default table (Gaussian income, sample variance) ----------------

LOANS = [("Female", "No", 125, "No"), ("Male", "Yes", 100, "No"), ("Male", "No", 70, "No"),
         ("Female", "Yes", 120, "No"), ("Male", "No", 95, "Yes"), ("Male", "Yes", 60, "No"),
         ("Female", "No", 220, "No"), ("Male", "No", 85, "Yes"), ("Male", "Yes", 75, "No"),
         ("Male", "Yes", 90, "Yes")]


def normal_pdf(x, mean, var):
    return math.exp(-((x - mean) ** 2) / (2 * var)) / math.sqrt(2 * math.pi * var)


def test_loan_default_example():
    m = NaiveBayes(cat_alpha=0.0, variance="sample", var_smoothing=0.0)
    for gender, married, income, label in LOANS:
        m.learn_one({"Gender": gender, "Married": married, "Income": income}, label)
    assert joint(m, {}) == pytest.approx({"No": 7 / 10, "Yes": 3 / 10}, rel=1e-12)
    assert conditional(m, "Gender", "Male") == pytest.approx({"No": 4 / 7, "Yes": 1.0}, rel=1e-12)
    assert conditional(m, "Married", "No") == pytest.approx({"No": 3 / 7, "Yes": 2 / 3}, rel=1e-12)
    for income in (120, 60):  # two points pin both mean and variance: 110/2975 and 90/25
        got = conditional(m, "Income", income)
        assert got["No"] == pytest.approx(normal_pdf(income, 110, 2975), rel=1e-12)
        assert got["Yes"] == pytest.approx(normal_pdf(income, 90, 25), rel=1e-12)
    assert round(conditional(m, "Income", 120)["No"], 4) == 0.0072
    assert f"{conditional(m, 'Income', 120)['Yes']:.1e}" == "1.2e-09"
    j = joint(m, {"Gender": "Male", "Married": "No", "Income": 120})
    assert (f"{j['No']:.1e}", f"{j['Yes']:.1e}") == ("1.2e-03", "2.4e-10")
    assert m.predict_one({"Gender": "Male", "Married": "No", "Income": 120}) == "No"


# -- Mitchell Table 3.2 (reference 004): PlayTennis -------------------------------------------

PLAY_TENNIS = """\
Sunny Hot High Weak No
Sunny Hot High Strong No
Overcast Hot High Weak Yes
Rain Mild High Weak Yes
Rain Cool Normal Weak Yes
Rain Cool Normal Strong No
Overcast Cool Normal Strong Yes
Sunny Mild High Weak No
Sunny Cool Normal Weak Yes
Rain Mild Normal Weak Yes
Sunny Mild Normal Strong Yes
Overcast Mild High Strong Yes
Overcast Hot Normal Weak Yes
Rain Mild High Strong No"""


def test_play_tennis():
    m = CategoricalNB(alpha=0.0)
    names = ("outlook", "temperature", "humidity", "wind")
    for line in PLAY_TENNIS.splitlines():
        *values, label = line.split()
        m.learn_one(dict(zip(names, values, strict=True)), label)
    x = dict(zip(names, ("Sunny", "Cool", "High", "Strong"), strict=True))
    j = joint(m, x)
    assert j["Yes"] == pytest.approx(9 / 14 * 2 / 9 * 3 / 9 * 3 / 9 * 3 / 9, rel=1e-12)
    assert j["No"] == pytest.approx(5 / 14 * 3 / 5 * 1 / 5 * 4 / 5 * 3 / 5, rel=1e-12)
    assert (round(j["Yes"], 3), round(j["No"], 3)) == (0.005, 0.021)
    assert m.predict_one(x) == "No"


# -- Mitchell Table 6.2: P(w_k | v_j) = (n_k + 1) / (n + |Vocabulary|) ------------------------

def test_mitchell_text_rule_and_m_estimate():
    docs = [("this is an example document", "like"), ("an example of a dull document", "dislike"),
            ("dull dull text", "dislike")]
    vocabulary = {w for d, _ in docs for w in d.split()}
    laplace, m_est = MultinomialNB(alpha=1.0), MultinomialNB(m=float(len(vocabulary)))
    for text, label in docs:
        laplace.learn_one({"text": text}, label)
        m_est.learn_one({"text": text}, label)
    text_j = " ".join(d for d, label in docs if label == "dislike").split()
    n, n_k = len(text_j), text_j.count("dull")
    expected = (n_k + 1) / (n + len(vocabulary))
    for model in (laplace, m_est):
        assert conditional(model, "text", "dull")["dislike"] == pytest.approx(expected, rel=1e-12)
    assert laplace.predict_one({"text": "dull example"}) == "dislike"
