"""Event dicts → a columnar :class:`Batch` that every learner consumes.

The ``x`` convention (River's): a flat dict of feature name → value. String values of keys named in
``text_fields`` (default ``"text"``) are tokenized and hashed; other ``str``/``bool`` (numpy's too)
values are categorical; ``int``/``float`` values (numpy's too) are numeric — a number under a text
key as well (a bag of words counting the word "text" is data, not a clash); ``None`` is missing.
An ``x`` that is a plain string is the event's text. A numeric
value must be finite with ``|x| <= MAX_ABS_VALUE`` (1e100), else :class:`FeatureError` names the field.

>>> f = Featurizer(n_features=2**10)
>>> b = f.featurize([{"text": "Free prize", "domain": "x.biz", "n_links": 3}, {"text": "hi"}])
>>> b.n, b.tokens.indptr.tolist(), b.categorical["domain"].tolist(), b.numeric["n_links"].tolist()
(2, [0, 2, 3], ['x.biz', None], [3.0, nan])
"""

from __future__ import annotations

import math
import numbers
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from streambayes.errors import FeatureError
from streambayes.features.ascii_words import TokenPlaces, ascii_words, text_ids
from streambayes.features.hashing import FeatureHasher
from streambayes.features.text import Tokenizer

MAX_ABS_VALUE = 1e100  # |x| of a numeric value: its square (1e200) times any realistic total
#                        weight stays far below float64's 1.8e308 in the Gaussian summaries


@dataclass(frozen=True)
class SparseRows:
    """Rows of (bucket, value) pairs in CSR form; a bucket may repeat within a row."""

    indptr: np.ndarray  # int64, n + 1
    indices: np.ndarray  # int64 bucket ids
    values: np.ndarray  # float64

    @property
    def n(self) -> int:
        return len(self.indptr) - 1

    def row_ids(self) -> np.ndarray:
        """The row of every stored entry."""
        return np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.indptr))

    @staticmethod
    def empty(n: int) -> SparseRows:
        return SparseRows(np.zeros(n + 1, np.int64), np.zeros(0, np.int64), np.zeros(0))


@dataclass
class Batch:
    """A featurized mini-batch: hashed text tokens plus categorical and numeric columns."""

    n: int
    tokens: SparseRows
    categorical: dict[str, np.ndarray]  # object arrays, None = missing
    numeric: dict[str, np.ndarray]  # float64, NaN = missing
    words: list[list[str]] | None = None  # token strings per row, kept for clues
    flat_words: list[str] | None = None  # every token string, in ``tokens`` order (for clues)
    word_source: _WordSource | None = None  # the texts, to make the token strings on demand
    places: TokenPlaces | None = None  # where each token's word is (clues name a few of them)

    def token_strings(self) -> list[str] | None:
        """Every token string in ``tokens`` order: kept, else made again from the batch's texts
        by the tokenizer (the hashed fast path keeps none; clues need only a few)."""
        if self.flat_words is None and self.word_source is not None:
            self.flat_words = self.word_source.words()
        if self.flat_words is None and self.words is not None:
            self.flat_words = [w for row in self.words for w in row]
        return self.flat_words

    def token_names(self, positions: np.ndarray, prefix: str = "") -> list[str]:
        """The word strings of the tokens at ``positions`` (in ``tokens`` order), each after
        ``prefix``: sliced from where the featurizer found them when it kept their places, else
        from :meth:`token_strings`."""
        if self.flat_words is None and self.places is not None:
            return self.places.names(positions, prefix)
        words = self.token_strings() or []
        if prefix:
            return [prefix + words[i] for i in np.asarray(positions).tolist()]
        return list(map(words.__getitem__, np.asarray(positions).tolist()))

    def token_byte_spans(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The words of the tokens at ``positions`` as byte spans (buffer, starts, ends) of one
        UTF-8 buffer, when the featurizer kept their places (:meth:`TokenPlaces.byte_spans`), else
        None: ``token_names`` without a string per word."""
        if self.flat_words is None and self.places is not None:
            return self.places.byte_spans(positions)
        return None

    def slice(self, start: int, stop: int) -> Batch:
        """Rows ``start … stop-1`` as a batch of their own."""
        lo, hi = self.tokens.indptr[start], self.tokens.indptr[stop]
        tokens = SparseRows(self.tokens.indptr[start:stop + 1] - lo, self.tokens.indices[lo:hi],
                            self.tokens.values[lo:hi])
        return Batch(stop - start, tokens, {k: c[start:stop] for k, c in self.categorical.items()},
                     {k: c[start:stop] for k, c in self.numeric.items()},
                     None if self.words is None else self.words[start:stop],
                     None if self.flat_words is None else self.flat_words[lo:hi],
                     None if self.word_source is None else self.word_source.rows(start, stop),
                     None if self.places is None else self.places.shifted(int(lo)))


class TextEvents(list):
    """Events ``{"text": t}`` (the list of those dicts) that also carry their texts as one list,
    so that featurizing them skips the walk over every event's dict (the learner's plain batches,
    :mod:`~streambayes.runtime.records.plain_batch`: about 0.7 us an event of 7 on SMS).

    >>> xs = TextEvents(["hi there", "ok"]); xs[1], xs.texts
    ({'text': 'ok'}, ['hi there', 'ok'])
    """

    __slots__ = ("texts",)

    def __init__(self, texts: list[str]) -> None:
        super().__init__([{"text": t} for t in texts])
        self.texts = texts


class _WordSource:
    """The texts of a batch (row of each), tokenized again only when token strings are asked for."""

    def __init__(self, texts: list[str], rows: Sequence[int], tokenizer) -> None:
        self.texts, self.text_rows, self.tokenizer = texts, rows, tokenizer

    def words(self) -> list[str]:
        """``tokenizer(text)`` for every text, in order: runs of ASCII texts in a few C calls
        (:func:`ascii_words`, the words the numpy hasher found) when the tokenizer takes plain words."""
        tokenizer = self.tokenizer
        if not tokenizer.plain_words:
            return [w for text in self.texts for w in tokenizer(text)]
        out: list[str] = []
        run: list[str] = []
        for text in self.texts:
            if text.isascii():
                run.append(text)
                continue
            if run:
                out += ascii_words(run, tokenizer.lowercase, tokenizer.min_token_length)
                run = []
            out += tokenizer(text)
        if run:
            out += ascii_words(run, tokenizer.lowercase, tokenizer.min_token_length)
        return out

    def rows(self, start: int, stop: int) -> _WordSource:
        """The texts of rows ``start`` to ``stop``: ``text_rows`` ascends (texts are gathered row by
        row), so two bisections find them, not a pass over the whole batch per slice."""
        lo, hi = bisect_left(self.text_rows, start), bisect_left(self.text_rows, stop)
        return _WordSource(self.texts[lo:hi], [r - start for r in self.text_rows[lo:hi]], self.tokenizer)


class Featurizer:
    """Turn ``x`` dicts into a :class:`Batch`; the same dicts give the same batch in any process."""

    def __init__(
        self,
        n_features: int = 2**20,
        text_fields: Sequence[str] = ("text",),
        lowercase: bool = True,
        bigrams: bool = False,
        **token_options,
    ) -> None:
        self.hasher = FeatureHasher(n_features)
        self.tokenizer = Tokenizer(lowercase=lowercase, bigrams=bigrams, **token_options)
        self.text_fields = frozenset(text_fields)

    @property
    def n_features(self) -> int:
        return self.hasher.n_features

    def params(self) -> dict:
        return {"n_features": self.n_features, "text_fields": sorted(self.text_fields),
                **self.tokenizer.params()}

    def featurize(self, xs: Sequence[Mapping], keep_words: bool = False,
                  keep_places: bool = False) -> Batch:
        """The batch of ``xs``. ``keep_words``: every token's string, per row (one event's clues);
        ``keep_places``: where each token's word is, so that a few can be named later (a batch's
        clues) without tokenizing the texts again; neither: the words are made again on demand."""
        n = len(xs)
        texts: list[str] = []  # every text of the batch, tokenized and hashed together at the end
        text_rows: list[int] = []
        rows: Sequence[int] = text_rows
        cat: dict[str, list] = {}
        num: dict[str, np.ndarray] = {}
        only = getattr(xs, "texts", None) if type(xs) is TextEvents else None
        if only is not None and "text" in self.text_fields:  # one text an event, nothing else
            texts, rows, xs = only, range(n), ()
        for i, x in enumerate(xs):
            if isinstance(x, str):  # a plain string: the event's text
                texts.append(x)
                text_rows.append(i)
                continue
            for key, value in x.items():  # (x: a Mapping)
                if value is None:
                    continue
                if key in self.text_fields and isinstance(value, str):
                    texts.append(value)
                    text_rows.append(i)
                elif isinstance(value, (str, bool, np.bool_)):
                    col = cat.get(key)
                    if col is None:
                        col = cat[key] = [None] * n
                    col[i] = str(value) if isinstance(value, str) else ("true" if value else "false")
                else:
                    col = num.get(key)
                    if col is None:
                        col = num[key] = np.full(n, np.nan)
                    col[i] = _number(key, value)
        indptr, buckets, words, places = self._text(texts, rows, n, keep_words, keep_places)
        tokens = SparseRows(indptr, buckets, np.ones(len(buckets)))
        categorical = {k: np.array(v, dtype=object) for k, v in cat.items()}
        flat = None if words is None else [w for row in words for w in row]
        return Batch(n, tokens, categorical, num, words, flat,
                     None if keep_words else _WordSource(texts, rows, self.tokenizer), places)

    def _text(self, texts: list[str], rows: Sequence[int], n: int, keep_words: bool, keep_places: bool,
              ) -> tuple[np.ndarray, np.ndarray, list[list[str]] | None, TokenPlaces | None]:
        """(indptr over the n rows, bucket of every word, the words per row if kept, the words'
        places if kept)."""
        if keep_words:
            per_row: list[list[str]] = [[] for _ in range(n)]
            for i, text in zip(rows, texts, strict=True):
                per_row[i] += self.tokenizer(text)
            flat = [w for row in per_row for w in row]
            indptr = np.zeros(n + 1, np.int64)
            np.cumsum([len(row) for row in per_row], out=indptr[1:])
            return indptr, self.hasher.bucket_array(flat), per_row, None
        text_indptr, buckets, places = text_ids(texts, self.tokenizer, self.hasher, keep_places)
        if rows == range(n):  # the text of row i is texts[i]
            return np.asarray(text_indptr, np.int64), buckets, None, places
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(np.array(rows, np.int64), np.diff(text_indptr), minlength=n).astype(np.int64),
                  out=indptr[1:])
        return indptr, buckets, None, places


def _number(key: str, value: object) -> float:
    if not isinstance(value, numbers.Real):
        raise FeatureError(
            f"field {key!r}: expected str, bool, int, float or null, got {type(value).__name__}")
    try:
        v = float(value)
    except (OverflowError, ValueError) as exc:  # an int of 309+ digits, an odd Real
        raise FeatureError(f"field {key!r}: not a float64 number ({exc})") from None
    if not math.isfinite(v):
        raise FeatureError(f"field {key!r}: value must be finite, got {v}")
    if abs(v) > MAX_ABS_VALUE:
        raise FeatureError(f"field {key!r}: |value| may be at most {MAX_ABS_VALUE:g}, got {v:g}")
    return v


def fold_fields(batch: Batch, hasher: FeatureHasher) -> SparseRows:
    """Text tokens plus categorical fields as ``field=value`` tokens and numeric fields as
    counts of the token ``field`` (River's bag-of-words dicts): the multinomial view of an event.

    >>> f = Featurizer(n_features=2**8)
    >>> rows = fold_fields(f.featurize([{"text": "a b", "lang": "en", "b": 2}]), f.hasher)
    >>> rows.values.tolist()
    [1.0, 1.0, 1.0, 2.0]
    """
    if not batch.categorical and not batch.numeric:
        return batch.tokens
    rows = [batch.tokens.row_ids()]
    cols = [batch.tokens.indices]
    vals = [batch.tokens.values]
    for field, column in batch.categorical.items():
        present = np.flatnonzero(column != None)  # noqa: E711  (object array: elementwise)
        rows.append(present)
        cols.append(np.array([hasher.bucket(f"{field}={column[i]}") for i in present], np.int64))
        vals.append(np.ones(len(present)))
    for field, column in batch.numeric.items():
        present = np.flatnonzero(~np.isnan(column))
        if np.any(column[present] < 0):
            raise FeatureError(f"field {field!r}: a count feature cannot be negative")
        rows.append(present)
        cols.append(np.full(len(present), hasher.bucket(field), np.int64))
        vals.append(column[present])
    return _csr(batch.n, np.concatenate(rows), np.concatenate(cols), np.concatenate(vals))


def _csr(n: int, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> SparseRows:
    order = np.argsort(rows, kind="stable")
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return SparseRows(indptr, cols[order].astype(np.int64), vals[order].astype(np.float64))
