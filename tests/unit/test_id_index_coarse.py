"""A batch's lookups through the coarse table find exactly what ``searchsorted`` finds."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streambayes.stats import sparse_counts
from streambayes.stats.sparse_counts import IdIndex, _bucket_search, _coarse_table


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([2**8, 2**20, 2**32]), st.integers(1, 6000),
       st.booleans())
def test_bucket_search_equals_searchsorted(seed, space, n_ids, clustered):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, space, n_ids)
    if clustered:  # many ids in one bucket: more halvings
        ids = np.concatenate([ids, rng.integers(0, 64, n_ids)])
    ids = np.unique(np.concatenate([ids, [0, space - 1]]))
    queries = np.concatenate([rng.choice(ids, 500), rng.integers(0, 2**32, 500), ids[:3] + 1,
                              [0, space - 1, space, 2**32 - 1]]).astype(np.int64)
    with_sentinel = np.append(ids, 2**62)
    shift, bounds = _coarse_table(ids)
    assert len(bounds) <= max(4, len(ids)) + 2  # sized by the ids, not by the id space
    got = _bucket_search(with_sentinel, queries, shift, bounds)
    assert np.array_equal(got, with_sentinel.searchsorted(queries))


class PlainIndex(IdIndex):
    """The reference: every lookup one binary search over all seen ids."""

    def _positions(self, ids: np.ndarray) -> np.ndarray:
        return self._ids.searchsorted(ids)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_growing_index_finds_and_adds_as_before(seed):
    """Batches of 2,000 ids into a growing index: find, lookup and add give what a plain
    searchsorted index gives (the coarse table is rebuilt after each id added)."""
    rng = np.random.default_rng(seed)
    ix, plain = IdIndex(), PlainIndex()
    for _ in range(6):
        batch = rng.integers(0, 2**20, 2000)
        at, hit, every = ix.find(batch)
        want = plain.find(batch)
        assert np.array_equal(at, want[0]) and np.array_equal(hit, want[1]) and every == want[2]
        assert np.array_equal(ix.add(batch, (at, hit, every)), plain.add(batch))
        assert np.array_equal(ix.lookup(batch[::-1]), plain.lookup(batch[::-1]))
    assert len(ix) >= sparse_counts._COARSE_MIN and ix._coarse is not None  # the table was used
