"""The River faces (``streambayes.models.river_compat``) are River estimators: River's own check
suite passes for every one, and they run in River pipelines, bagging and on numpy scalars."""

import pickle

import numpy as np
import pytest

river = pytest.importorskip("river")
from river import checks, compose, ensemble, evaluate, feature_extraction, metrics  # noqa: E402

from streambayes.models import river_compat as rc  # noqa: E402

MESSAGES = [
    ("text me now to claim your free prize", "spam"),
    ("free entry: text WIN to 80082", "spam"),
    ("are we still on for lunch today", "ham"),
    ("I will text you when I get home", "ham"),
    ("urgent! your mobile won a cash prize, text CLAIM", "spam"),
    ("see you at the station at six", "ham"),
] * 8


@pytest.mark.parametrize("name", sorted(rc.CLASSIFIERS))
def test_river_check_estimator_passes(name):
    model = rc.CLASSIFIERS[name]()
    assert isinstance(model, river.base.MiniBatchClassifier)
    assert model._unit_test_skips() == set()
    checks.check_estimator(model)


def test_every_learner_but_the_network_has_a_river_face():
    from streambayes.models import MODELS

    assert set(rc.CLASSIFIERS) == set(MODELS) - {"bn"}  # bn needs a network file to exist at all
    for name, cls in rc.CLASSIFIERS.items():
        assert issubclass(cls, MODELS[name])


@pytest.mark.parametrize("name", ["mnb", "bnb", "cnb", "nb"])
def test_bag_of_words_with_the_word_text_is_learned(name):
    model = compose.Pipeline(feature_extraction.BagOfWords(), rc.CLASSIFIERS[name]())
    metric = evaluate.progressive_val_score(MESSAGES, model, metrics.Accuracy())
    assert metric.get() > 0.9
    assert model.predict_one("text me to claim the free prize") == "spam"


def test_naive_bayes_reads_a_bag_of_words_as_counts():
    bow = feature_extraction.BagOfWords()
    nb, mnb = rc.NaiveBayes(), rc.MultinomialNB()
    for text, label in MESSAGES:
        nb.learn_one(bow.transform_one(text), label)
        mnb.learn_one(bow.transform_one(text), label)
    for text, _ in MESSAGES[:6]:
        x = bow.transform_one(text)
        a, b = nb.predict_proba_one(x), mnb.predict_proba_one(x)
        assert a == pytest.approx(b)
    gauss = rc.NaiveBayes(numeric="gaussian")
    gauss.learn_one({"n": 3}, "a")
    assert gauss.predict_proba_one({"n": 3}) == {"a": 1.0}


def test_plain_strings_are_text():
    model = rc.MultinomialNB()
    for text, label in MESSAGES:
        model.learn_one(text, label)
    assert model.predict_one("claim your free prize") == "spam"
    assert model.predict_one("lunch at the station") == "ham"


def test_numpy_scalars_are_the_python_values():
    a, b = rc.NaiveBayes(), rc.NaiveBayes()
    t, f = np.bool_(True), np.bool_(False)
    a.learn_one({"ok": t, "n": np.int64(2), "f": np.float32(0.5), "s": np.str_("x")}, t)
    a.learn_one({"ok": f, "n": np.int64(5), "f": np.float32(1.5), "s": np.str_("y")}, f)
    b.learn_one({"ok": True, "n": 2, "f": 0.5, "s": "x"}, True)
    b.learn_one({"ok": False, "n": 5, "f": 1.5, "s": "y"}, False)
    x = {"ok": np.bool_(True), "n": np.int64(3), "f": np.float32(1.0), "s": np.str_("x")}
    expected = b.predict_proba_one({"ok": True, "n": 3, "f": 1.0, "s": "x"})
    assert a.predict_proba_one(x) == pytest.approx(expected)
    assert all(type(c) is bool for c in a.classes)


def test_clone_with_new_params_and_get_params():
    model = rc.MultinomialNB(alpha=0.5)
    model.learn_one("free prize", "spam")
    assert model._get_params()["alpha"] == 0.5
    clone = model.clone({"alpha": 2.0})
    assert type(clone) is rc.MultinomialNB and clone.alpha == 2.0 and clone.n_events == 0
    assert clone._get_params() == {**model._get_params(), "alpha": 2.0}


@pytest.mark.parametrize("name", sorted(rc.CLASSIFIERS))
def test_an_empty_model_pickles_small(name):
    assert len(pickle.dumps(rc.CLASSIFIERS[name]())) < 8192


def test_tfidf_and_bagging_pipelines_run_on_a_bundled_data_set():
    model = compose.Pipeline(feature_extraction.TFIDF(), rc.MultinomialNB())
    assert evaluate.progressive_val_score(MESSAGES, model, metrics.Accuracy()).get() > 0.8
    bag = ensemble.BaggingClassifier(rc.GaussianNB(), n_models=3, seed=1)
    data = river.datasets.Phishing().take(300)
    assert evaluate.progressive_val_score(data, bag, metrics.Accuracy()).get() > 0.75


def test_per_event_counts_equal_the_batch_path():
    """The per-event path of MultinomialNB (whole counts, ids reused by the equal dict of the
    pipeline's second transform) learns and predicts what ``learn_many`` does."""
    bow = feature_extraction.BagOfWords()
    xs = [bow.transform_one(text + " " + text.split()[0]) for text, _ in MESSAGES]
    ys = [label for _, label in MESSAGES]
    one, many = rc.MultinomialNB(), rc.MultinomialNB()
    for x, y in zip(xs, ys, strict=True):
        one.predict_proba_one(dict(x))  # an equal dict first, as a pipeline does
        one.learn_one(x, y)
        x["prize"] = 1000  # the caller's dict changes afterwards: the model never held it
    many.learn_many([bow.transform_one(text + " " + text.split()[0]) for text, _ in MESSAGES], ys)
    for x in xs[:6]:
        del x["prize"]
        assert one.predict_proba_one(x) == pytest.approx(many.predict_proba_one(x), rel=1e-9)
    assert one._class_counts.tolist() == many._class_counts.tolist()


def test_bernoulli_reads_numbers_as_presence_like_river():
    model = rc.BernoulliNB()
    assert river.base.tags.POSITIVE_INPUT not in model._tags  # River's checks feed it negatives too
    model.learn_one({"a": -1.5, "b": 2.0}, "x")
    model.learn_one({"a": 3.0, "b": -2.0}, "y")
    assert model.predict_one({"a": 0.5, "b": -0.1}) == "y"
    assert model.predict_one({"a": -0.5, "b": 0.1}) == "x"
