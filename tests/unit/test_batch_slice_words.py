"""A slice of a featurized batch makes the token strings of its own rows (and only those)."""

from __future__ import annotations

import pytest

from streambayes.features.batch import Featurizer


def test_slices_make_the_token_strings_of_their_rows():
    f = Featurizer(text_fields=("text", "subject"))
    xs = [{"text": "free prize"}, {"n": 3}, {"subject": "re lunch", "text": "at noon"}, "plain string",
          {"text": None, "c": "x"}, {"text": "call me now"}, {"subject": "last"}]
    batch = f.featurize(xs)
    for start in range(len(xs) + 1):
        for stop in range(start, len(xs) + 1):
            part = batch.slice(start, stop)
            want = f.featurize(xs[start:stop], keep_words=True).token_strings()
            assert part.token_strings() == want, (start, stop)
            assert len(want) == len(part.tokens.indices)


@pytest.mark.parametrize("options", [{}, {"lowercase": False}, {"min_token_length": 3},
                                     {"stop_words": "english"}, {"bigrams": True}])
def test_the_token_strings_of_a_batch_are_the_tokenizers_words(options):
    """The clues' word names come from whole runs of ASCII texts at once (C calls): the same
    words, in the same order, as the tokenizer text by text, with non-ASCII texts between."""

    texts = ["Hello, World! it's a re-test_1 of 3.5 cases", "naïve café £10 off", "",
             "  spaced\tout\nlines  ", "Ünïcödé and ASCII", "x y zz", "ALL CAPS SHOUT"]
    featurizer = Featurizer(**options)
    batch = featurizer.featurize([{"text": t} for t in texts])
    want = [w for t in texts for w in featurizer.tokenizer(t)]
    assert batch.token_strings() == want
    assert len(want) == len(batch.tokens.indices)
