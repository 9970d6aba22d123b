"""PURE event → arrays: tokenizer, stable feature hashing, categorical and numeric columns."""

from streambayes.features.batch import Batch, Featurizer, SparseRows, fold_fields
from streambayes.features.hashing import FeatureHasher, stable_hash
from streambayes.features.text import ADDRESS_TOKEN_PATTERN, Tokenizer

__all__ = ["ADDRESS_TOKEN_PATTERN", "Batch", "FeatureHasher", "Featurizer", "SparseRows", "Tokenizer",
           "fold_fields", "stable_hash"]
