"""streambayes: incremental Bayesian classifiers and networks on event streams."""

__version__ = "0.1.0"
