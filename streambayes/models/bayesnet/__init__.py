"""PURE Bayesian networks: structure and BIF, CPT learning, inference, sampling, EM, search."""

from streambayes.models.bayesnet.bif import parse_bif, read_bif, write_bif
from streambayes.models.bayesnet.network import Network

__all__ = ["Network", "parse_bif", "read_bif", "write_bif"]
