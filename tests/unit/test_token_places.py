"""A batch's token places name its words exactly as tokenizing the texts again does: ASCII and
other texts mixed, several text fields per event, several numpy passes, a minimum word length,
and slices of the batch."""

import numpy as np
import pytest

from streambayes.features import ascii_words
from streambayes.features.batch import Featurizer

pytestmark = pytest.mark.usefixtures("both_text_paths")  # (conftest)

TEXTS = ["Free PRIZE!! call 0800 now", "", "naïve café — déjà vu", "a b cc ddd", "£100 cash_back",
         "x" * 70 + " long_word", "Ünïcode and ascii", "one", "   ", "tab\tand\nnew line",
         "it\x92s £5…ok", "don’t—stop ‘now’ €3"]  # (the last two: symbols only, numpy passes)


def _events(n, rng):
    xs = []
    for i in range(n):
        x = {"text": TEXTS[rng.integers(len(TEXTS))]}
        if i % 3 == 0:
            x["subject"] = TEXTS[rng.integers(len(TEXTS))]
        if i % 4 == 0:
            x["lang"] = "en"
        xs.append(x)
    return xs


@pytest.mark.parametrize("min_length", [1, 2])
@pytest.mark.parametrize("chunk", [16, 1 << 15])
def test_places_name_every_token_as_the_words_made_again(monkeypatch, min_length, chunk):
    monkeypatch.setattr(ascii_words, "CHUNK_CHARS", chunk)
    rng = np.random.default_rng(7)
    xs = _events(300, rng)
    f = Featurizer(n_features=2**12, text_fields=("text", "subject"), min_token_length=min_length)
    kept, plain = f.featurize(xs, keep_places=True), f.featurize(xs)
    assert kept.places is not None and plain.places is None
    np.testing.assert_array_equal(kept.tokens.indices, plain.tokens.indices)
    words = plain.token_strings()
    everything = np.arange(len(words))
    assert kept.token_names(everything) == words
    picked = rng.permutation(len(words))[:200]
    assert kept.token_names(picked) == [words[i] for i in picked]
    for a, b in [(0, 1), (5, 40), (120, 300), (299, 300)]:
        part, whole = kept.slice(a, b), plain.slice(a, b)
        assert part.token_names(np.arange(part.tokens.indptr[-1])) == whole.token_strings()


@pytest.mark.parametrize("bigrams", [False, True])  # bigrams: every text by the tokenizer
def test_all_ascii_and_no_ascii_batches_have_places(bigrams):
    f = Featurizer(n_features=2**10, bigrams=bigrams)
    for texts in (["hello world", "again hello"], ["déjà vu", "naïve"], []):
        batch = f.featurize([{"text": t} for t in texts], keep_places=True)
        assert batch.token_names(np.arange(batch.tokens.indptr[-1])) == \
            [w for t in texts for w in f.tokenizer(t)]
