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

import mmh3
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streambayes.errors import FeatureError
from streambayes.features import Featurizer, ascii_words, stable_hash
from streambayes.features.ascii_words import murmur3_32
from streambayes.features.hashing import FeatureHasher

N_FEATURES = 2**20


pytestmark = pytest.mark.usefixtures("both_text_paths")  # (conftest)


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
    """The cache of the word-by-word path (non-ASCII text, token options) stays within its bound."""
    words = [w for t in enron_sample(200) for w in re.findall(r"\w+", t.lower())]
    hasher = FeatureHasher(N_FEATURES, cache_size=500)  # far fewer than the words
    sizes, ids = [], []
    lo, sizes_cycle = 0, [200, 200, 2000]  # chunks under the bound and past it
    while lo < len(words):
        size = sizes_cycle[len(sizes) % 3]
        ids += hasher.bucket_array(words[lo:lo + size]).tolist()
        sizes.append(len(hasher._cache))
        lo += size
    assert ids == [stable_hash(w) & (N_FEATURES - 1) for w in words]
    assert max(sizes) <= 500 and 0 in sizes and max(sizes) > 0  # a chunk past it hashes uncached


@pytest.mark.parametrize("few_words", [0, 256, 10_000])  # the block loop, then word by word
def test_murmur_in_numpy_equals_mmh3_on_every_length(monkeypatch, few_words):
    monkeypatch.setattr(ascii_words, "FEW_WORDS", few_words)
    data = bytes(range(256)) * 3
    starts = np.array([i for n in range(0, 80) for i in (0, 7, 300 - n)], np.int64)
    ends = starts + np.repeat(np.arange(0, 80), 3)
    got = murmur3_32(np.frombuffer(data, np.uint8), starts, ends).tolist()
    assert got == [mmh3.hash(data[a:b], 0, signed=False) for a, b in zip(starts, ends, strict=True)]


words = st.text(alphabet=st.sampled_from("aZ_9 .-\n\té€ß\u0301"), max_size=12) | \
    st.text(alphabet="ab", min_size=60, max_size=140)  # words past LONG_WORD too
x_dict = st.fixed_dictionaries({"text": st.lists(words, max_size=8).map(" ".join)},
                               optional={"title": st.text(max_size=20), "n": st.integers(0, 5),
                                         "lang": st.sampled_from(["en", "fr"])})


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(x_dict, max_size=10), st.booleans(), st.integers(1, 3), st.booleans(),
       st.booleans())
def test_featurize_equals_word_by_word_hashing(xs, lowercase, min_length, keep_words, block):
    """Rows mixing ASCII and non-ASCII texts, two text fields and other fields: the ids of
    hashing each tokenizer word alone, in the row's field order (``block``: the numpy block loop
    even for these few words)."""
    f = Featurizer(n_features=2**18, text_fields=("text", "title"), lowercase=lowercase,
                   min_token_length=min_length)
    few = ascii_words.FEW_WORDS
    ascii_words.FEW_WORDS = 0 if block else few
    try:
        b = f.featurize(xs, keep_words=keep_words)
    finally:
        ascii_words.FEW_WORDS = few
    want_rows = [[w for k, v in x.items() if k in ("text", "title") for w in f.tokenizer(v)] for x in xs]
    want = [stable_hash(w) & (2**18 - 1) for row in want_rows for w in row]
    assert b.tokens.indices.tolist() == want and b.tokens.indices.dtype == np.int64
    assert np.diff(b.tokens.indptr).tolist() == [len(row) for row in want_rows]
    assert b.words == (want_rows if keep_words else None)
    assert sorted(b.numeric) == (["n"] if any("n" in x for x in xs) else [])


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
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


@pytest.mark.parametrize("chunk", [1, 500, 5_000, 1 << 30])
def test_hashing_in_passes_gives_the_ids_of_one_pass(monkeypatch, chunk):
    """A big batch is hashed in passes of CHUNK_CHARS characters (bounded arrays): same ids."""
    from streambayes.features import ascii_words

    texts = enron_sample(300) + ["", "x", "   "]
    monkeypatch.setattr(ascii_words, "CHUNK_CHARS", chunk)
    assert featurized(Featurizer(n_features=N_FEATURES), texts, 1000) == reference(texts)


def test_texts_whose_only_non_ascii_characters_are_symbols_hash_as_tokenized():
    """Such texts go through the numpy passes with each symbol spaced out: the ids and the places
    of tokenizing them, for a spread of every non-word non-ASCII character (a lone surrogate
    included), upper and lower case, next to texts with non-ASCII words."""
    symbols = [chr(c) for c in range(128, 0x110000, 89) if re.fullmatch(r"[^\x00-\x7f\w]", chr(c))]
    symbols += ["£", "’", "…", "\x92", "\ud800", "\u0301"]
    texts = [f"Ab{s}cD x{s}{s}Y_1 {s}end" for s in symbols] + ["ünï ok £5", "plain Text"]
    f = Featurizer(n_features=N_FEATURES)
    batch = f.featurize([{"text": t} for t in texts], keep_places=True)
    assert (batch.tokens.indptr.tolist(), batch.tokens.indices.tolist()) == reference(texts)
    words = [w for t in texts for w in re.findall(r"\w+", t.lower())]
    assert batch.token_names(np.arange(len(words))) == words
