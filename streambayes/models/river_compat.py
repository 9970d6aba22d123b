"""River compatibility: every streambayes learner is a ``river.base.Classifier``.

The learners already speak River's protocol (``learn_one(x, y, w)``, ``predict_proba_one``,
``predict_one``); registering them as virtual subclasses lets River's metrics, pipelines and
``evaluate.progressive_val_score`` accept them, without the pure learners importing River.

>>> from river import evaluate, metrics
>>> from streambayes.models import MultinomialNB
>>> stream = [({"text": "free prize"}, "spam"), ({"text": "lunch at noon"}, "ham")] * 5
>>> evaluate.progressive_val_score(stream, MultinomialNB(), metrics.Accuracy())
Accuracy: 88.89%
"""

from __future__ import annotations

from river import base

from streambayes.models import MODELS

for _cls in MODELS.values():
    base.Classifier.register(_cls)


def is_river_classifier(model: object) -> bool:
    """Whether River treats ``model`` as a classifier."""
    return isinstance(model, base.Classifier)
