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

import mmh3

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

    A bounded token→bucket cache makes repeated tokens cheap; it is cleared when full,
    so memory stays bounded on unbounded vocabularies. The cache cannot change results.
    """

    def __init__(self, n_features: int = 2**20) -> None:
        if n_features < 2 or n_features & (n_features - 1) or n_features > 2**32:
            raise FeatureError(f"n_features must be a power of two in [2, 2^32], got {n_features}")
        self.n_features = n_features
        self._mask = n_features - 1
        self._cache: dict[str, int] = {}

    def bucket(self, token: str) -> int:
        b = self._cache.get(token)
        if b is None:
            b = stable_hash(token) & self._mask
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[token] = b
        return b

    def buckets(self, tokens: list[str]) -> list[int]:
        out = list(map(self._cache.get, tokens))
        if None in out:
            out = [b if b is not None else self.bucket(t) for t, b in zip(tokens, out, strict=True)]
        return out
