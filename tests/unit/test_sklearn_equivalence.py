"""predict_proba equals scikit-learn's on the same data (to 1e-9).

scikit-learn smooths over a fixed feature space; ours over the vocabulary seen so far.
The two coincide once every feature has been seen, which the data below guarantees.
"""

import numpy as np
import pytest
from sklearn import naive_bayes as sk

from streambayes.features import FeatureHasher
from streambayes.models import (
    BernoulliNB,
    CategoricalNB,
    ComplementNB,
    GaussianNB,
    MultinomialNB,
)

N_FEATURES = 12


@pytest.fixture(scope="module")
def counts():
    rng = np.random.default_rng(7)
    y = rng.choice(["a", "b", "c"], size=300)
    rates = {"a": rng.gamma(1.0, 1.0, N_FEATURES), "b": rng.gamma(1.0, 1.0, N_FEATURES),
             "c": rng.gamma(1.0, 1.0, N_FEATURES)}
    X = np.array([rng.poisson(rates[label]) for label in y], dtype=np.float64)
    assert (X[:200] > 0).any(axis=0).all()  # every feature seen in training
    return X, y


def names(n):
    keys = [f"f{j}" for j in range(n)]
    assert len({FeatureHasher().bucket(k) for k in keys}) == n  # no collision
    return keys


def as_dicts(X):
    keys = names(X.shape[1])
    return [dict(zip(keys, row.tolist(), strict=True)) for row in X]


def check(ours, theirs, X, y, chunk=64):
    train, test = slice(0, 200), slice(200, 300)
    xs = as_dicts(X)
    for start in range(0, 200, chunk):  # online, in mini-batches
        stop = min(start + chunk, 200)
        ours.learn_many(xs[start:stop], y[start:stop].tolist())
    theirs.fit(X[train], y[train])
    assert sorted(ours.classes) == theirs.classes_.tolist()  # ours: order of first appearance
    got = ours.predict_proba_many(xs[test])[:, [ours.classes.index(c) for c in theirs.classes_]]
    np.testing.assert_allclose(got, theirs.predict_proba(X[test]), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("alpha", [1.0, 0.3])
def test_multinomial(counts, alpha):
    X, y = counts
    check(MultinomialNB(alpha=alpha), sk.MultinomialNB(alpha=alpha), X, y)


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_bernoulli(counts, alpha):
    X, y = counts
    check(BernoulliNB(alpha=alpha), sk.BernoulliNB(alpha=alpha), X, y)


@pytest.mark.parametrize("norm", [False, True])
def test_complement(counts, norm):
    X, y = counts
    check(ComplementNB(alpha=1.0, norm=norm), sk.ComplementNB(norm=norm), X, y)  # sklearn's alpha=1


def test_categorical(counts):
    X, y = counts
    codes = np.minimum(X, 3)  # categories 0..3, all seen in training
    assert all(len(np.unique(codes[:200, j])) == 4 for j in range(N_FEATURES))
    check(CategoricalNB(), sk.CategoricalNB(), codes, y)


def test_gaussian():
    rng = np.random.default_rng(3)
    y = rng.choice(["a", "b"], size=300)
    X = rng.normal(size=(300, 5)) + (y == "b")[:, None] * np.array([0.5, -1, 0, 2, 0.1])
    check(GaussianNB(), sk.GaussianNB(), X, y)


def test_multinomial_fixed_vocabulary_matches_sklearn_with_unseen_features(counts):
    X, y = counts
    X = X.copy()
    X[:200, 0] = 0  # feature 0 never seen in training
    check(MultinomialNB(alpha=1.0, vocab_size=N_FEATURES), sk.MultinomialNB(), X, y)
