"""PURE prequential evaluation over iterables of mini-batches, and report figures."""

from streambayes.evaluate.prequential import Curve, ModelScore, Prequential, Rejection, prequential

__all__ = ["Curve", "ModelScore", "Prequential", "Rejection", "prequential"]
