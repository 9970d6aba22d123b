"""PURE event → arrays: tokenizer, stable feature hashing, categorical and numeric columns."""

from streambayes.features.batch import Batch, Featurizer, SparseRows, fold_fields
from streambayes.features.hashing import FeatureHasher, stable_hash
from streambayes.features.text import Tokenizer

__all__ = ["Batch", "FeatureHasher", "Featurizer", "SparseRows", "Tokenizer", "fold_fields",
           "stable_hash"]
