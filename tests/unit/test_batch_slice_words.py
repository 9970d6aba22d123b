"""A slice of a featurized batch makes the token strings of its own rows (and only those)."""

from __future__ import annotations

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
