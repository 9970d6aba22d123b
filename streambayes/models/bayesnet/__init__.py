"""PURE Bayesian networks: structure and BIF, CPT learning, inference, sampling, EM, search."""

from streambayes.models.bayesnet.bif import parse_bif, read_bif, write_bif
from streambayes.models.bayesnet.counts import FamilyCounts, cpts_from_counts, dirichlet
from streambayes.models.bayesnet.model import BayesNet
from streambayes.models.bayesnet.network import Network

__all__ = ["BayesNet", "FamilyCounts", "Network", "cpts_from_counts", "dirichlet", "parse_bif", "read_bif",
           "write_bif"]
