"""Stable feature hashing: MurmurHash3 (32-bit, seed 0) into 2^k buckets.

Never Python's built-in ``hash``, which is salted per process: learners trained in
different processes are merged and snapshots are restored elsewhere, so the same
token must land in the same bucket everywhere.

>>> h = FeatureHasher(n_features=2**20)
>>> h.bucket("prize") == FeatureHasher(n_features=2**20).bucket("prize")
True
>>> 0 <= h.bucket("prize") < 2**20
True
"""

from __future__ import annotations

import operator

import mmh3
import numpy as np

from streambayes.errors import FeatureError

SEED = 0
_CACHE_LIMIT = 1 << 19


def stable_hash(token: str) -> int:
    """Unsigned 32-bit MurmurHash3 of the UTF-8 bytes of ``token``.

    Lone surrogates (which no UTF-8 text holds, but a Python str can) are encoded as
    ``surrogatepass`` bytes: mmh3 would crash the process on them.

    >>> stable_hash("\\ud800x") == stable_hash("\\ud800x"), stable_hash("é") == stable_hash("é")
    (True, True)
    """
    if token.isascii():
        return mmh3.hash(token, SEED, signed=False)
    return mmh3.hash(token.encode("utf-8", "surrogatepass"), SEED, signed=False)


class FeatureHasher:
    """Map strings to bucket indices in ``[0, n_features)``; ``n_features`` is a power of two.

    A token→bucket cache makes repeated tokens cheap: :meth:`buckets` hashes each distinct
    token of a batch once (set operations and ``map`` in C; the Python-level loop runs only over
    the batch's tokens not yet cached). The cache holds at most ``cache_size`` tokens (default
    2^19, about 60 MiB of short words): when a batch's new tokens would pass the bound it is
    cleared first, so memory stays bounded on unbounded vocabularies; a single batch with more
    distinct tokens than the bound is hashed through a dict of its own, dropped afterwards. The
    cache cannot change results.
    """

    def __init__(self, n_features: int = 2**20, cache_size: int = _CACHE_LIMIT) -> None:
        if n_features < 2 or n_features & (n_features - 1) or n_features > 2**32:
            raise FeatureError(f"n_features must be a power of two in [2, 2^32], got {n_features}")
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise FeatureError(f"cache_size must be an integer >= 0, got {cache_size!r}")
        self.n_features = n_features
        self.cache_size = cache_size
        self._mask = n_features - 1
        self._cache: dict[str, int] = {}

    def bucket(self, token: str) -> int:
        b = self._cache.get(token)
        if b is None:
            b = stable_hash(token) & self._mask
            if len(self._cache) >= self.cache_size:
                self._cache.clear()
            if self.cache_size:
                self._cache[token] = b
        return b

    def buckets(self, tokens: list[str]) -> list[int]:
        """The bucket of every token of one event's few tokens (see :meth:`bucket_array`)."""
        out = list(map(self._cache.get, tokens))
        if None in out:
            out = [b if b is not None else self.bucket(t) for t, b in zip(tokens, out, strict=True)]
        return out

    def bucket_ids(self, tokens: list[str]) -> np.ndarray:
        """:meth:`buckets` as an int64 array, for one event's few tokens: read straight from the
        cache when every token is in it (no list, no scan for misses), else through :meth:`buckets`."""
        try:
            return np.fromiter(map(self._cache.__getitem__, tokens), np.int64, len(tokens))
        except KeyError:
            buckets = self.buckets(tokens)
            return np.fromiter(buckets, np.int64, len(buckets))

    def bucket_array(self, tokens: list[str]) -> np.ndarray:
        """The bucket of every token (int64), each distinct uncached token hashed once."""
        cache = self._cache
        distinct = set(tokens)
        new = distinct.difference(cache)
        if new:
            if len(cache) + len(new) > self.cache_size:
                cache.clear()  # every distinct token of the batch is new again
                new = distinct
                if len(new) > self.cache_size:  # this batch alone passes the bound
                    cache = {}
            mask = self._mask
            cache.update((t, stable_hash(t) & mask) for t in new)
        if len(tokens) < 2:  # itemgetter of one key returns the value itself, not a tuple
            return np.fromiter(map(cache.__getitem__, tokens), np.int64, len(tokens))
        return np.array(operator.itemgetter(*tokens)(cache), np.int64)
