"""PURE learners built from stats/: the naive Bayes family (more families in later issues)."""

from __future__ import annotations

from collections.abc import Mapping

from streambayes.errors import ModelError
from streambayes.models.base import NaiveBayesBase
from streambayes.models.bayesnet.model import BayesNet
from streambayes.models.naive_bayes import (
    BernoulliNB,
    CategoricalNB,
    ComplementNB,
    GaussianNB,
    MultinomialNB,
    NaiveBayes,
)
from streambayes.models.seminaive import AODE, KDB, SPODE, TAN

MODELS: dict[str, type] = {
    cls.name: cls
    for cls in (NaiveBayes, MultinomialNB, BernoulliNB, ComplementNB, CategoricalNB, GaussianNB, AODE,
                SPODE, TAN, KDB, BayesNet)
}
MODEL_NAMES = tuple(MODELS)


def make_model(name: str, **params):
    """A fresh learner by its CLI name (``nb``, ``mnb``, ``bnb``, ``cnb``, ``catnb``, ``gnb``, ``aode``,
    ``spode``, ``tan``, ``kdb``, ``bn`` — a Bayesian network: ``network=`` a BIF path,
    ``class_variable=``)."""
    try:
        cls = MODELS[name]
    except KeyError:
        raise ModelError(f"unknown model {name!r}; choose from {', '.join(MODEL_NAMES)}") from None
    return cls(**params)


def model_from_state(state: Mapping):
    """Rebuild a learner from ``to_state()`` output (e.g. a decoded snapshot)."""
    name = state.get("model")
    if name == "perkey":
        from streambayes.models.perkey import PerKeyModel

        return PerKeyModel.from_state(state)
    if name not in MODELS:
        raise ModelError(f"state names unknown model {name!r}")
    return MODELS[name].from_state(state)


__all__ = ["AODE", "KDB", "BayesNet", "MODELS", "MODEL_NAMES", "SPODE", "TAN", "BernoulliNB", "CategoricalNB",
           "ComplementNB", "GaussianNB", "MultinomialNB", "NaiveBayes", "NaiveBayesBase", "make_model",
           "model_from_state"]
