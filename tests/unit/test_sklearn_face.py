"""``streambayes.sklearn``: scikit-learn's estimator checks pass for every estimator in ESTIMATORS,
and they work with arrays, sparse matrices, DataFrames, Pipeline, clone, cross_val_score and
GridSearchCV, giving the pure learners' probabilities."""

import numpy as np
import pytest

pytest.importorskip("sklearn")
import scipy.sparse as sp  # noqa: E402
from sklearn import naive_bayes as skn  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.feature_extraction.text import CountVectorizer  # noqa: E402
from sklearn.model_selection import GridSearchCV, cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.utils.estimator_checks import check_estimator  # noqa: E402

from streambayes import sklearn as sbs  # noqa: E402

TEXTS = ["free prize text now", "claim your free cash", "lunch at noon", "see you at lunch",
         "win cash now", "meeting at noon"] * 5
LABELS = ["spam", "spam", "ham", "ham", "spam", "ham"] * 5


@pytest.mark.parametrize("name", sorted(sbs.ESTIMATORS))
def test_sklearn_check_estimator_passes(name):
    results = check_estimator(sbs.ESTIMATORS[name](), on_fail=None)
    failed = [(r["check_name"], repr(r["exception"])) for r in results if r["status"] == "failed"]
    assert not failed


@pytest.mark.parametrize("name", ["mnb", "cnb", "bnb"])
def test_probabilities_match_scikit_learn_and_the_pure_learner(name):
    X = CountVectorizer().fit_transform(TEXTS)
    ours = sbs.ESTIMATORS[name]().fit(X, LABELS)
    peer = {"mnb": skn.MultinomialNB, "cnb": skn.ComplementNB, "bnb": skn.BernoulliNB}[name]
    theirs = peer().fit(X, LABELS)
    assert (ours.predict(X) == theirs.predict(X)).all()
    if name == "mnb":  # every column seen: the same smoothing as scikit-learn's
        np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), rtol=1e-9)
    pure = ours.model_.predict_proba_many(ours._batch(X))  # the sparse product = the pure batch path
    order = ours.model_._classes.codes(ours.classes_.tolist())
    np.testing.assert_allclose(ours.predict_proba(X), pure[:, order], rtol=1e-9, atol=1e-12)


def test_arrays_sparse_and_frames_agree_and_partial_fit_streams():
    pd = pytest.importorskip("pandas")
    X = CountVectorizer().fit_transform(TEXTS)
    dense, frame = X.toarray(), pd.DataFrame(X.toarray())
    a = sbs.MultinomialNB().fit(X, LABELS)
    b = sbs.MultinomialNB().fit(dense, LABELS)
    c = sbs.MultinomialNB().fit(frame, LABELS)
    d = sbs.MultinomialNB()
    for start in range(0, len(LABELS), 7):
        d.partial_fit(X[start:start + 7], LABELS[start:start + 7], classes=["ham", "spam"])
    for other, data in ((b, dense), (c, frame), (d, sp.csc_matrix(X))):
        np.testing.assert_allclose(other.predict_log_proba(data), a.predict_log_proba(X))


def test_pipeline_clone_cross_val_score_and_grid_search():
    pipe = make_pipeline(CountVectorizer(), sbs.MultinomialNB())
    assert cross_val_score(pipe, TEXTS, LABELS, cv=3).mean() > 0.9
    copy = clone(pipe)
    assert copy.get_params()["multinomialnb__alpha"] == 1.0
    grid = GridSearchCV(pipe, {"multinomialnb__alpha": [0.1, 1.0]}, cv=3).fit(TEXTS, LABELS)
    assert grid.best_params_["multinomialnb__alpha"] in (0.1, 1.0)
    assert grid.predict(["free cash prize"]).tolist() == ["spam"]
    est = sbs.ComplementNB().set_params(alpha=0.5, norm=True)
    assert est.get_params() == {"alpha": 0.5, "norm": True}


def test_gaussian_and_categorical_match_scikit_learn():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    np.testing.assert_allclose(sbs.GaussianNB().fit(X, y).predict_proba(X),
                               skn.GaussianNB().fit(X, y).predict_proba(X), atol=1e-12)
    Xc = np.random.default_rng(0).integers(0, 4, (200, 5))
    yc = (Xc[:, 0] + Xc[:, 1] > 3).astype(int)
    np.testing.assert_allclose(sbs.CategoricalNB().fit(Xc, yc).predict_proba(Xc),
                               skn.CategoricalNB().fit(Xc, yc).predict_proba(Xc), atol=1e-12)


@pytest.mark.parametrize("name", ["aode", "spode", "tan", "kdb"])
def test_semi_naive_learners_learn_iris(name):
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    assert cross_val_score(sbs.ESTIMATORS[name](), X, y, cv=3).mean() > 0.85
