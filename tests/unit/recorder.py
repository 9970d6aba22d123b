"""A tiny learner shared by the prequential tests: majority class, logs its calls."""

import math

import numpy as np

from streambayes.errors import FeatureError


class Recorder:
    """Majority-class learner that logs its calls and rejects x with a "poison" key."""

    def __init__(self, log=None):
        self.counts: dict = {}
        self.log = [] if log is None else log

    @property
    def classes(self):
        return sorted(self.counts)

    def featurize(self, xs):
        for x in xs:
            if "poison" in x:
                raise FeatureError(f"field 'poison': bad value {x['poison']!r}")
        return list(xs)

    def predict_log_proba_many(self, X):
        self.log.append(("predict", [x["i"] for x in X]))
        total = sum(self.counts.values())
        row = [math.log(self.counts[c] / total) for c in self.classes]
        return np.array([row] * len(X)).reshape(len(X), len(self.classes))

    def learn_many(self, X, y, w=None):
        self.log.append(("learn", [x["i"] for x in X]))
        for label, weight in zip(y, w or [1.0] * len(y), strict=True):
            self.counts[label] = self.counts.get(label, 0) + weight
