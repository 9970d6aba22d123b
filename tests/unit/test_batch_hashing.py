"""Batch featurizing hashes each distinct token once: the same ids as hashing every token alone.

The reference is the definition: every ``\\w+`` word of the lower-cased text, hashed with
MurmurHash3 (32-bit, seed 0) on its UTF-8 bytes and masked, with no cache at all.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streambayes.errors import FeatureError
from streambayes.features import Featurizer, stable_hash
from streambayes.features.hashing import FeatureHasher

N_FEATURES = 2**20


def reference(texts: list[str], n_features: int = N_FEATURES) -> tuple[list[int], list[int]]:
    """(indptr, ids) of the texts, every token hashed on its own."""
    indptr, ids = [0], []
    for text in texts:
        ids += [stable_hash(w) & (n_features - 1) for w in re.findall(r"\w+", text.lower())]
        indptr.append(len(ids))
    return indptr, ids


def featurized(f: Featurizer, texts: list[str], batch: int) -> tuple[list[int], list[int]]:
    indptr, ids = [0], []
    for lo in range(0, len(texts), batch):
        b = f.featurize([{"text": t} for t in texts[lo:lo + batch]])
        assert b.tokens.values.tolist() == [1.0] * len(b.tokens.indices)
        indptr += (b.tokens.indptr[1:] + indptr[-1]).tolist()
        ids += b.tokens.indices.tolist()
    return indptr, ids


def enron_sample(n: int = 600) -> list[str]:
    """Real mails: the first ``n`` of enron1-3 plus every non-ASCII one among the first 4,000."""
    data = Path(os.environ.get("STREAMBAYES_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")
    with gzip.open(data / "enron_spam_dev" / "enron1-3.jsonl.gz", "rt", encoding="utf-8") as fh:
        texts = [json.loads(line)["text"] for _, line in zip(range(4000), fh, strict=False)]
    return texts[:n] + [t for t in texts[n:] if not t.isascii()]


def test_real_mails_get_the_ids_of_hashing_every_token_alone():
    texts = enron_sample()
    assert sum(not t.isascii() for t in texts) >= 10  # the sample holds non-ASCII mails
    want = reference(texts)
    assert featurized(Featurizer(n_features=N_FEATURES), texts, 256) == want
    assert featurized(Featurizer(n_features=N_FEATURES), texts, 1) == want


def test_a_small_cache_bound_changes_nothing_and_holds():
    texts = enron_sample(200)
    f = Featurizer(n_features=N_FEATURES)
    f.hasher = FeatureHasher(N_FEATURES, cache_size=500)  # far fewer than one batch's words
    sizes = []
    indptr, ids = [0], []
    for lo in range(0, len(texts), 16):
        b = f.featurize([{"text": t} for t in texts[lo:lo + 16]])
        sizes.append(len(f.hasher._cache))
        indptr += (b.tokens.indptr[1:] + indptr[-1]).tolist()
        ids += b.tokens.indices.tolist()
    assert (indptr, ids) == reference(texts)
    assert max(sizes) <= 500 and min(sizes) == 0 < max(sizes)  # batches past it hash uncached


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=12), st.integers(0, 20), st.integers(1, 5),
       st.sampled_from([2**4, 2**20, 2**32]))
def test_any_texts_any_cache_bound_any_batching(texts, cache_size, batch, n_features):
    f = Featurizer(n_features=n_features)
    f.hasher = FeatureHasher(n_features, cache_size=cache_size)
    assert featurized(f, texts, batch) == reference(texts, n_features)
    assert len(f.hasher._cache) <= cache_size
    words = ["ab", "ab", "é"]
    assert f.hasher.buckets(words) == [stable_hash(w) & (n_features - 1) for w in words]


def test_lone_surrogates_hash_in_a_batch_as_alone():
    tokens = ["\ud800x", "a", "\ud800x"]
    got = FeatureHasher(N_FEATURES).bucket_array(tokens)
    assert got.dtype == np.int64
    assert got.tolist() == [stable_hash(t) & (N_FEATURES - 1) for t in tokens]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "8"])
def test_cache_size_must_be_a_count(bad):
    with pytest.raises(FeatureError, match="cache_size"):
        FeatureHasher(N_FEATURES, cache_size=bad)
