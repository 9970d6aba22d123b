"""Words and their MurmurHash3 ids for a whole batch of ASCII texts in numpy, no object per word.

For ASCII text the ``\\w+`` words are the runs of ``[A-Za-z0-9_]``, so a batch's texts joined by a
newline (which no word holds) are one byte array: a lookup table marks word bytes, ``diff`` finds
where words start and end, and :func:`murmur3_32` hashes every word at once, four bytes per step
(words sorted by length, so each step works on a prefix). The ids are exactly
``stable_hash(word)`` (MurmurHash3_x86_32, seed 0, of the UTF-8 bytes, which for ASCII are the
characters); a test checks them against ``mmh3`` on real mail and on generated text. Words
longer than ``LONG_WORD`` bytes (base64 lines, long digit runs) are hashed one by one with ``mmh3``,
so a single huge word cannot make the block loop long. A batch of at most ``SMALL_CHARS``
characters (a predictor's few events) skips the passes: each text is tokenized and its words
hashed one by one through the hasher's cache, which costs less than the passes' fixed cost there;
the tests run every case both ways.

>>> indptr, ids = ascii_word_ids(["Hello world", "", "hello"], lowercase=True, mask=2**32 - 1)
>>> indptr.tolist(), ids.tolist() == [stable_hash("hello"), stable_hash("world"), stable_hash("hello")]
([0, 2, 2, 3], True)
"""

from __future__ import annotations

import re

import mmh3
import numpy as np

from streambayes.features.hashing import SEED, FeatureHasher, stable_hash
from streambayes.features.text import Tokenizer

LONG_WORD = 64  # bytes; longer words are hashed by mmh3 one at a time
# a batch of at most this many words is hashed by mmh3 one word at a time (the predictor's small
# batches): 4 against 50 us for one SMS; the block loop wins from some 450 words on
FEW_WORDS = 256
# a batch of at most this many characters is tokenized text by text and hashed word by word (the
# hasher's cache): the numpy passes' fixed cost is most of a few texts' time (4 SMS, 374 chars:
# 50 against 118 us with the places; 16 SMS, 1,434 chars: 132 against 324 us)
SMALL_CHARS = 2048
# characters per numpy pass: the pass's arrays take some 30 bytes per character, so a big batch of
# long texts is hashed in several passes (the same ids) and never holds them all at once
CHUNK_CHARS = 1 << 15
# every ASCII character but [A-Za-z0-9_] to a space (the tokenizer's own table)
_NON_WORD_TO_SPACE = str.maketrans({c: " " for c in map(chr, range(128)) if not (c.isalnum() or c == "_")})
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
_TAIL_MASK = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF], np.uint32)


def ascii_word_ids(texts: list[str], lowercase: bool, mask: int, min_length: int = 1,
                   places: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(indptr (len(texts) + 1,), ids (int64)) of the ``\\w+`` words of ASCII ``texts``, in order;
    ids are ``stable_hash(word) & mask``; words shorter than ``min_length`` are left out. With a
    ``places`` list, (the joined words' string, starts, ends) is appended to it: word ``i`` is
    ``string[starts[i]:ends[i]]``."""
    joined = " " + " ".join(texts) + " "
    if lowercase:
        joined = joined.lower()
    spaced = joined.translate(_NON_WORD_TO_SPACE)
    buf = np.frombuffer(spaced.encode("ascii"), np.uint8)
    word = buf != 32
    edges = np.flatnonzero(word[1:] != word[:-1]) + 1  # start, end, start, end, ...
    starts, ends = edges[0::2], edges[1::2]
    if min_length > 1:
        keep = ends - starts >= min_length
        starts, ends = starts[keep], ends[keep]
    text_starts = np.ones(len(texts) + 1, np.int64)
    np.cumsum([len(t) + 1 for t in texts], out=text_starts[1:])
    text_starts[1:] += 1
    indptr = np.searchsorted(starts, text_starts).astype(np.int64)
    if places is not None:
        places.append((spaced, starts, ends))
    return indptr, murmur3_32(buf, starts, ends).astype(np.int64) & mask


def ascii_words(texts: list[str], lowercase: bool, min_length: int = 1) -> list[str]:
    """The words :func:`ascii_word_ids` hashes, as strings, in order: a few C calls for the whole
    batch (the clues of a batch name their words from these)."""
    joined = " ".join(texts)
    if lowercase:
        joined = joined.lower()
    words = joined.translate(_NON_WORD_TO_SPACE).split()
    return words if min_length <= 1 else [w for w in words if len(w) >= min_length]


_NON_ASCII_NON_WORD = re.compile(r"[^\x00-\x7f\w]")  # e.g. £ … ’ € \x92: never part of a word


def _spaced_symbols(texts: list[str]) -> list[str]:
    """``texts`` with each non-ASCII text whose non-ASCII characters are all non-word ones (£, ’,
    …: 342 of the 483 non-ASCII SMS) written with a space for each of those, so that it goes
    through the numpy passes; the others as they are. Such a character only ever separates words,
    lower-cased or not (checked for every code point), and one character for one keeps every
    word where it was: the same words, ids and places as tokenizing the text itself."""
    if all(map(str.isascii, texts)):
        return texts
    out = list(texts)
    for i, text in enumerate(out):
        if not text.isascii():
            spaced = _NON_ASCII_NON_WORD.sub(" ", text)
            if spaced.isascii():
                out[i] = spaced
    return out


def text_ids(texts: list[str], tokenizer: Tokenizer, hasher: FeatureHasher, places: bool = False,
             ) -> tuple[np.ndarray, np.ndarray, TokenPlaces | None]:
    """(indptr, ids, places) of ``texts``: ids are ``hasher.bucket(word)`` for every
    ``tokenizer(text)`` word, in order: ASCII texts in one numpy pass when the tokenizer takes
    plain ``\\w+`` words (:attr:`Tokenizer.plain_words`), the others word by word. With
    ``places``, a :class:`TokenPlaces` that names any of the words without tokenizing again."""
    mask = hasher.n_features - 1
    if sum(map(len, texts)) <= SMALL_CHARS:  # a few texts: word by word costs less
        words = [tokenizer(t) for t in texts]
        indptr = _indptr([len(w) for w in words])
        ids = hasher.bucket_array([w for row in words for w in row])
        return indptr, ids, TokenPlaces.of(indptr, indptr[:-1], [], words) if places else None
    if tokenizer.plain_words:
        texts = _spaced_symbols(texts)
    fast = [i for i, t in enumerate(texts) if t.isascii()] if tokenizer.plain_words else []
    spans: list | None = [] if places else None
    if len(fast) == len(texts):
        indptr, ids = _ascii_in_passes(texts, tokenizer.lowercase, mask,
                                       tokenizer.min_token_length, spans)
        return indptr, ids, None if spans is None else TokenPlaces.of(indptr, indptr[:-1], spans, [])
    slow = sorted(set(range(len(texts))).difference(fast))
    words = [tokenizer(texts[i]) for i in slow]
    parts = [(np.array(slow, np.int64), _indptr([len(w) for w in words]),
              hasher.bucket_array([t for w in words for t in w]))]
    if fast:
        parts.append((np.array(fast, np.int64), *_ascii_in_passes(
            [texts[i] for i in fast], tokenizer.lowercase, mask, tokenizer.min_token_length, spans)))
    counts = np.zeros(len(texts), np.int64)
    for at, sub, _ in parts:
        counts[at] = np.diff(sub)
    indptr = _indptr(counts)
    ids = np.empty(indptr[-1], np.int64)
    for at, sub, sub_ids in parts:  # each part's words to where its texts' words go
        ids[np.repeat(indptr[at] - sub[:-1], np.diff(sub)) + np.arange(len(sub_ids))] = sub_ids
    if spans is None:
        return indptr, ids, None
    # where each text's words start among the named words: the fast texts' (in the order of the
    # passes), then the slow texts'
    first = np.empty(len(texts), np.int64)
    n_fast = int(parts[1][1][-1]) if fast else 0
    first[parts[0][0]] = n_fast + parts[0][1][:-1]
    if fast:
        first[parts[1][0]] = parts[1][1][:-1]
    return indptr, ids, TokenPlaces.of(indptr, first, spans, words)


class TokenPlaces:
    """Where each word of a batch's texts is, so that a few can be named (the clues) without
    tokenizing every text again: word ``i`` (in naming order) is ``string[starts[i]:ends[i]]``,
    where ``string`` joins the numpy passes' strings of the ASCII texts and the tokenizer's words
    of the others. Positions count the words of all the texts in order (the batch's token order);
    ``offset`` shifts them (a slice of the batch)."""

    def __init__(self, indptr: np.ndarray, first: np.ndarray, string: str, starts: np.ndarray,
                 ends: np.ndarray, offset: int = 0) -> None:
        self.indptr = indptr  # token positions of each text
        self.first = first  # naming index of each text's first word
        self.string, self.starts, self.ends = string, starts, ends
        self.offset = offset
        self._utf8: tuple | None = None  # (bytes, first non-ASCII char, byte offsets after it)

    @classmethod
    def of(cls, indptr: np.ndarray, first: np.ndarray, spans: list, slow_words: list[list[str]],
           ) -> TokenPlaces:
        """From the passes' (string, starts, ends) and the other texts' words."""
        strings, starts, ends, at = [], [], [], 0
        for string, s, e in spans:
            strings.append(string)
            starts.append(s + at)
            ends.append(e + at)
            at += len(string)
        flat = [w for words in slow_words for w in words]
        if flat:
            lengths = np.fromiter(map(len, flat), np.int64, len(flat)) + 1  # each word and a space
            bounds = np.zeros(len(flat) + 1, np.int64)
            np.cumsum(lengths, out=bounds[1:])
            strings.append(" ".join(flat))
            starts.append(bounds[:-1] + at)
            ends.append(bounds[1:] - 1 + at)
        empty = np.zeros(0, np.int64)
        return cls(indptr, first, "".join(strings), np.concatenate(starts) if starts else empty,
                   np.concatenate(ends) if ends else empty)

    def shifted(self, by: int) -> TokenPlaces:
        """The same places for the words from position ``by`` on (a slice of the batch)."""
        out = TokenPlaces(self.indptr, self.first, self.string, self.starts, self.ends,
                          self.offset + by)
        out._utf8 = self._utf8
        return out

    def _words(self, positions: np.ndarray) -> np.ndarray:
        positions = np.asarray(positions, np.int64) + self.offset
        text = np.searchsorted(self.indptr, positions, side="right") - 1
        return self.first[text] + positions - self.indptr[text]

    def byte_spans(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(``string`` as UTF-8 bytes in a uint8 array, starts, ends): the words at ``positions``
        as byte spans of it, in that order, or None when ``string`` has no UTF-8 form (a lone
        surrogate). Made once per batch; the characters from the first non-ASCII one on (the
        words of the few texts the numpy passes do not take) map to bytes through their lengths."""
        if self._utf8 is None:
            try:
                raw = self.string.encode("utf-8")
            except UnicodeEncodeError:
                self._utf8 = (None, 0, None)
            else:
                buf = np.frombuffer(raw, np.uint8)
                if len(raw) == len(self.string):
                    self._utf8 = (buf, len(raw), None)
                else:  # the ASCII head's bytes are its characters
                    head = int(np.argmax(buf >= 0x80))
                    points = np.frombuffer(self.string[head:].encode("utf-32-le"), np.uint32)
                    at = np.full(len(points) + 1, head, np.int64)
                    np.cumsum(1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000),
                              out=at[1:])
                    at[1:] += head
                    self._utf8 = (buf, head, at)
        buf, head, at = self._utf8
        if buf is None:
            return None
        word = self._words(positions)
        starts, ends = self.starts[word], self.ends[word]
        if at is not None:
            starts = np.where(starts < head, starts, at[np.maximum(starts - head, 0)])
            ends = np.where(ends < head, ends, at[np.maximum(ends - head, 0)])
        return buf, starts, ends

    def names(self, positions: np.ndarray, prefix: str = "") -> list[str]:
        """The words at ``positions``, in that order, each after ``prefix``."""
        word = self._words(positions)
        string, spans = self.string, zip(self.starts[word].tolist(), self.ends[word].tolist(),
                                         strict=True)
        if prefix:  # in the same pass: one list, no second one for the prefix
            return [prefix + string[a:b] for a, b in spans]
        return [string[a:b] for a, b in spans]


def _ascii_in_passes(texts: list[str], lowercase: bool, mask: int, min_length: int,
                     places: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`ascii_word_ids` in passes of about ``CHUNK_CHARS`` characters (whole texts; a word
    never spans two texts, so the ids are the same as in one pass)."""
    passes, start, size = [], 0, 0
    for i, text in enumerate(texts):
        size += len(text) + 1
        if size >= CHUNK_CHARS:
            passes.append(ascii_word_ids(texts[start:i + 1], lowercase, mask, min_length, places))
            start, size = i + 1, 0
    if start < len(texts) or not passes:
        passes.append(ascii_word_ids(texts[start:], lowercase, mask, min_length, places))
    if len(passes) == 1:
        return passes[0]
    counts = np.concatenate([np.diff(indptr) for indptr, _ in passes])
    return _indptr(counts), np.concatenate([ids for _, ids in passes])


def _indptr(counts) -> np.ndarray:
    out = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def murmur3_32(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """MurmurHash3_x86_32 (seed 0) of every ``buf[starts[i]:ends[i]]``, as uint32."""
    if len(starts) <= FEW_WORDS:  # mmh3 per word: the block loop's fixed cost is some 50 us
        data = buf.tobytes()
        return np.fromiter((mmh3.hash(data[a:b], SEED, signed=False)
                            for a, b in zip(starts.tolist(), ends.tolist(), strict=True)),
                           np.uint32, len(starts))
    lengths = ends - starts
    out = np.zeros(len(starts), np.uint32)
    long = np.flatnonzero(lengths > LONG_WORD)
    for i in long.tolist():
        out[i] = mmh3.hash(buf[starts[i]:ends[i]].tobytes(), SEED, signed=False)
    if len(long):
        short = np.flatnonzero(lengths <= LONG_WORD)
        if len(short):
            out[short] = _murmur_short(buf, starts[short], lengths[short])
    elif len(starts):
        out = _murmur_short(buf, starts, lengths)
    return out


def _murmur_short(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The hashes of words of at most ``LONG_WORD`` bytes: one gather of four bytes per block."""
    padded = np.zeros(len(buf) + 3, np.uint8)
    padded[:len(buf)] = buf
    # the little-endian 4 bytes at every offset (an unaligned view: no copy)
    quad = np.ndarray((len(buf),), dtype="<u4", buffer=padded, strides=(1,))
    blocks = (lengths >> 2).astype(np.uint8)
    order = np.argsort(np.uint8(LONG_WORD // 4) - blocks, kind="stable")  # longest first (radix)
    starts, lengths, blocks = starts[order], lengths[order], blocks[order]
    h = np.zeros(len(starts), np.uint32)
    tmp = np.empty(len(starts), np.uint32)
    at = starts.copy()  # where each word's next block starts
    # with a k-th block: the first (number of words with more than k blocks) words
    having = np.searchsorted(-blocks.astype(np.int16), -np.arange(int(blocks[0])), side="left")
    for m in having.tolist():  # in place: this loop is most of the hashing
        k1 = quad[at[:m]]
        _scramble_inplace(k1, tmp[:m])
        hm = h[:m]
        hm ^= k1
        _rotl_inplace(hm, 13, tmp[:m])
        hm *= np.uint32(5)
        hm += np.uint32(0xE6546B64)
        at[:m] += 4
    tail = lengths & 3
    has = np.flatnonzero(tail)
    if len(has):
        k1 = quad[at[has]] & _TAIL_MASK[tail[has]]
        _scramble_inplace(k1, np.empty_like(k1))
        h[has] ^= k1
    h ^= lengths.astype(np.uint32)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    out = np.empty_like(h)
    out[order] = h
    return out


def _scramble_inplace(k1: np.ndarray, tmp: np.ndarray) -> None:
    k1 *= _C1
    _rotl_inplace(k1, 15, tmp)
    k1 *= _C2


def _rotl_inplace(x: np.ndarray, r: int, tmp: np.ndarray) -> None:
    np.right_shift(x, np.uint32(32 - r), out=tmp)
    x <<= np.uint32(r)
    x |= tmp


__all__ = ["LONG_WORD", "SMALL_CHARS", "TokenPlaces", "ascii_word_ids", "murmur3_32", "stable_hash",
           "text_ids"]
