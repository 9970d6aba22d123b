"""PURE semi-naive Bayes learners: SPODE, AODE, TAN and kDB over categorical attributes and
discretized numeric ones, sharing one class × value × value count table."""

from streambayes.models.seminaive.learners import AODE, KDB, SPODE, TAN

__all__ = ["AODE", "KDB", "SPODE", "TAN"]
