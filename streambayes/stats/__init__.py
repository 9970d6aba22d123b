"""PURE numpy sufficient statistics: value indexes, Gaussian summaries, smoothing, forgetting."""

from streambayes.stats.decay import Forgetting
from streambayes.stats.gaussian import GaussianSummaries
from streambayes.stats.index import ValueIndex
from streambayes.stats.pairs import PairCounts
from streambayes.stats.smoothing import class_prior_log, lidstone_log, log_normalize, m_estimate_log
from streambayes.stats.sparse_counts import IdIndex, SparseCounts
from streambayes.stats.weights import event_weights

__all__ = ["Forgetting", "GaussianSummaries", "IdIndex", "PairCounts", "SparseCounts", "ValueIndex",
           "class_prior_log", "event_weights", "lidstone_log", "log_normalize", "m_estimate_log"]
