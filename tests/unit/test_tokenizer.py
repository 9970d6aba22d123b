"""The tokenizer: its ASCII fast path gives exactly the words of the ``\\w+`` regex."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from streambayes.features import Tokenizer


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=200))
def test_ascii_fast_path_equals_the_regex(text):
    assert Tokenizer()(text) == re.findall(r"\w+", text.lower())
    assert Tokenizer(lowercase=False)(text) == re.findall(r"\w+", text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=100))
def test_any_text_gives_the_regex_words(text):
    assert Tokenizer()(text) == re.findall(r"\w+", text.lower())


def test_non_ascii_text_keeps_unicode_words():
    assert Tokenizer()("Café £5 naïve—x_y") == ["café", "5", "naïve", "x_y"]
