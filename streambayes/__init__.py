"""streambayes: incremental Bayesian classifiers and networks on event streams."""

__version__ = "0.1.0"


def __getattr__(name: str):
    """Lazy top-level names (``from streambayes import BayesNet``) so ``import streambayes`` stays cheap."""
    if name == "BayesNet":
        from streambayes.models.bayesnet.model import BayesNet

        return BayesNet
    raise AttributeError(f"module 'streambayes' has no attribute {name!r}")
