"""Tokenizer: lower-case Unicode words; the token options users know from River and scikit-learn.

>>> Tokenizer()("WINNER!! Claim your £1000 prize, café-owner")
['winner', 'claim', 'your', '1000', 'prize', 'café', 'owner']
>>> Tokenizer(bigrams=True)("free prize now")
['free', 'prize', 'now', 'free prize', 'prize now']
>>> Tokenizer(min_token_length=2, stop_words="english", ngram_range=(1, 3))("I won a free prize now")
['won', 'free', 'prize', 'won free', 'free prize', 'won free prize']
>>> Tokenizer(token_pattern=ADDRESS_TOKEN_PATTERN)("Mail JDoe@cs.cmu.edu: v3.5 isn't out.")
['mail', 'jdoe@cs.cmu.edu', 'v3.5', "isn't", 'out']

Options (all stored in the model's parameters, so snapshots and ``clone`` keep them):

- ``min_token_length``: drop shorter words (scikit-learn's and River's ``\\w\\w+`` is 2; default 1)
- ``token_pattern``: a regular expression whose matches are the words (with one group, the group),
  as scikit-learn's ``token_pattern``; default ``None`` = ``\\w+`` (with an exact ASCII fast path);
  :data:`ADDRESS_TOKEN_PATTERN` keeps words joined by ``.``, ``@``, ``'`` or ``-`` as one token:
  e-mail addresses, host names, version numbers, contractions and hyphenated words
- ``stop_words``: ``"english"`` (a small built-in list, :data:`ENGLISH_STOP_WORDS`) or a list of
  words, dropped after lower-casing and before n-grams are formed (as scikit-learn does)
- ``ngram_range``: ``(lo, hi)`` word n-grams, joined by a single space (which no ``\\w`` word
  contains, so an n-gram cannot collide with a unigram); ``bigrams=True`` is ``(1, 2)``
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from streambayes.errors import FeatureError

_WORD = re.compile(r"\w+")
# ASCII text: \w is [A-Za-z0-9_], so mapping every other ASCII character to a space and splitting
# gives exactly the regex's words, about three times faster on long texts
_ASCII_NON_WORD = str.maketrans({c: " " for c in map(chr, range(128)) if not (c.isalnum() or c == "_")})

# A small frozen list of very common English function words (a subset of the Glasgow list that
# scikit-learn's ENGLISH_STOP_WORDS also holds); frozen so that a model keeps its meaning.
ENGLISH_STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she should
so some such than that the their theirs them themselves then there these they this those through to
too under until up very was we were what when where which while who whom why will with would you
your yours yourself yourselves
""".split())


# Words joined by ".", "@", "'" or "-" (no space) stay one token: "jdoe@cs.cmu.edu", "comp.graphics",
# "3.5", "don't", "e-mail"; a separator that no word character follows is not kept ("end." -> "end").
# On 20 Newsgroups (headers as handed over) it raised the streaming bigram TWCNB's 5-fold CV accuracy
# on the train split from 0.9228 to 0.9309 (bench/newsgroups.py): posters' addresses and hosts carry
# the group.
ADDRESS_TOKEN_PATTERN = r"\w+(?:[.@'-]\w+)*"


class Tokenizer:
    """Split text into words (``\\w+``, Unicode-aware, or ``token_pattern``), lower-cased by default."""

    def __init__(self, lowercase: bool = True, bigrams: bool = False, min_token_length: int = 1,
                 token_pattern: str | None = None, stop_words: str | Sequence[str] | None = None,
                 ngram_range: Sequence[int] | None = None) -> None:
        self.lowercase = lowercase
        self.bigrams = bigrams
        self.min_token_length = _positive_int("min_token_length", min_token_length)
        self.token_pattern = token_pattern
        try:
            self._pattern = None if token_pattern is None else re.compile(token_pattern)
        except (re.error, TypeError) as exc:
            raise FeatureError(f"token_pattern {token_pattern!r}: not a regular expression ({exc})") from None
        if self._pattern is not None and self._pattern.groups > 1:
            raise FeatureError("token_pattern may have at most one group (its match is the word)")
        self.stop_words = _stop_words(stop_words)
        self._stop = ENGLISH_STOP_WORDS if self.stop_words == "english" else frozenset(self.stop_words or ())
        lo, hi = (1, 2 if bigrams else 1) if ngram_range is None else _ngram_range(ngram_range)
        self.ngram_range = None if ngram_range is None else [lo, hi]
        self._lo, self._hi = lo, hi

    @property
    def plain_words(self) -> bool:
        """The words are the ``\\w+`` matches (lower-cased or not) of at least
        ``min_token_length`` characters, nothing dropped or joined: what a batch can find in numpy."""
        return self._pattern is None and not self._stop and self._hi == 1

    def __call__(self, text: str) -> list[str]:
        if self.lowercase:
            text = text.lower()
        if self._pattern is not None:
            words = self._pattern.findall(text)
        else:
            words = text.translate(_ASCII_NON_WORD).split() if text.isascii() else _WORD.findall(text)
        if self.min_token_length > 1:
            n = self.min_token_length
            words = [w for w in words if len(w) >= n]
        if self._stop:
            stop = self._stop
            words = [w for w in words if w not in stop]
        if self._hi > 1:
            return self._ngrams(words)
        return words

    def _ngrams(self, words: list[str]) -> list[str]:
        out = list(words) if self._lo == 1 else []
        for n in range(max(self._lo, 2), self._hi + 1):
            if len(words) < n:
                break
            out.extend(" ".join(words[i:i + n]) for i in range(len(words) - n + 1))
        return out

    def params(self) -> dict:
        out = {"lowercase": self.lowercase, "bigrams": self.bigrams}
        extra = {"min_token_length": self.min_token_length, "token_pattern": self.token_pattern,
                 "stop_words": self.stop_words, "ngram_range": self.ngram_range}
        defaults = {"min_token_length": 1, "token_pattern": None, "stop_words": None, "ngram_range": None}
        return out | {k: v for k, v in extra.items() if v != defaults[k]}


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FeatureError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _stop_words(value: str | Sequence[str] | None) -> str | list[str] | None:
    if value is None or value == "english":
        return value
    if isinstance(value, str) or not all(isinstance(w, str) for w in value):
        raise FeatureError(f"stop_words must be 'english', a list of words or None, got {value!r}")
    return sorted(set(value))


def _ngram_range(value: Sequence[int]) -> tuple[int, int]:
    try:
        lo, hi = (_positive_int("ngram_range", v) for v in value)
    except (TypeError, ValueError):
        raise FeatureError(f"ngram_range must be (lo, hi) with 1 <= lo <= hi, got {value!r}") from None
    if lo > hi:
        raise FeatureError(f"ngram_range must be (lo, hi) with 1 <= lo <= hi, got {value!r}")
    return lo, hi
