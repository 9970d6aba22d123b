"""stats.sparse_counts: the seen-id index and its growable counts, against plain references."""

import numpy as np
import pytest

from streambayes.stats import IdIndex, SparseCounts


def id_batches(seed=0, n=60, hi=2**20):
    """Batches of ids drawn from a Zipf-like vocabulary: repeats, small and large batches."""
    rng = np.random.default_rng(seed)
    vocab = rng.choice(hi, size=3000, replace=False)
    for i in range(n):
        size = int(rng.integers(0, 40)) if i % 7 else int(rng.integers(200, 900))
        yield vocab[np.minimum(rng.zipf(1.3, size), len(vocab)) - 1].astype(np.int64)


def test_index_agrees_with_a_dict_of_first_appearance():
    ix, ref = IdIndex(), {}
    for ids in id_batches():
        before = {i: ref.get(i, -1) for i in ids.tolist()}
        assert ix.lookup(ids).tolist() == [before[i] for i in ids.tolist()]
        cols = ix.add(ids)
        for i in sorted(set(ids.tolist()) - set(ref)):  # a batch's new ids: ascending
            ref[i] = len(ref)
        assert cols.tolist() == [ref[i] for i in ids.tolist()]
        assert ix.ids.tolist() == sorted(ref) and len(ix) == len(ref)
        assert ix.columns.tolist() == [ref[i] for i in sorted(ref)]
    at, hit, every = ix.find(np.array([sorted(ref)[0], 2**20 + 5], np.int64))
    assert hit.tolist() == [True, False] and not every
    assert ix.known((at, hit, every)).tolist() == [ref[sorted(ref)[0]]]


def test_index_refuses_ids_outside_32_bits():
    with pytest.raises(ValueError, match="2\\^32"):
        IdIndex().add(np.array([3, 2**32], np.int64))
    with pytest.raises(ValueError, match="2\\^32"):
        IdIndex().add(np.arange(2**32 - 20, 2**32 + 20))  # many new ids at once
    with pytest.raises(ValueError, match="ascending"):
        IdIndex.from_sorted(np.array([5, 5]))


def test_counts_agree_with_a_dense_table_and_grow_geometrically():
    rng = np.random.default_rng(1)
    dense = np.zeros((3, 2**20))
    c = SparseCounts(n_classes=3)
    capacities = set()
    for ids in id_batches(seed=2):
        rows = rng.integers(0, 3, len(ids))
        vals = rng.random(len(ids))
        c.add(rows, ids, vals)
        np.add.at(dense, (rows, ids), vals)
        capacities.add(c._table.shape[1])
    seen = np.flatnonzero(dense.any(axis=0))
    assert c.index.ids.tolist() == seen.tolist()
    np.testing.assert_array_equal(c.sorted_counts(), dense[:, seen])
    probe = np.concatenate([seen[:50], np.array([7, 11, 2**20 - 1])])
    np.testing.assert_array_equal(c.gather(probe), dense[:, probe])
    assert all(b >= a + a // 4 for a, b in zip(sorted(capacities), sorted(capacities)[1:], strict=False))
    assert c._table.shape[1] <= 1.25 * len(c) + 64  # grows by a quarter at least, never the hash space


def test_add_row_and_scale():
    c = SparseCounts(n_classes=2)
    c.add_row(1, c.columns(np.array([9, 4, 9])), 0.5)
    c.scale(4.0)
    assert c.gather(np.array([4, 9, 5])).tolist() == [[0.0, 0.0, 0.0], [2.0, 4.0, 0.0]]


def test_merge_by_id_equals_adding_both():
    rng = np.random.default_rng(3)
    batches = list(id_batches(seed=4, n=30))
    both, a, b = SparseCounts(2), SparseCounts(2), SparseCounts(3)
    for i, ids in enumerate(batches):
        rows = rng.integers(0, 2, len(ids))
        vals = rng.random(len(ids)).round(2)
        both.add(rows, ids, vals)
        if i % 2:  # b numbers its classes differently: its class 2 is our class 0, its 0 our 1
            b.add(np.where(rows == 0, 2, 0), ids, vals)
        else:
            a.add(rows, ids, vals)
    a.merge(b, class_map=np.array([1, 5, 0]), factor=1.0)
    assert a.index.ids.tolist() == both.index.ids.tolist()  # the union of the two indexes
    np.testing.assert_allclose(a.sorted_counts()[:2], both.sorted_counts(), rtol=1e-12)
    assert a.n_classes == 6 and not a.sorted_counts()[2:].any()


def test_from_sorted_round_trip_keeps_counts_and_accepts_new_ids():
    c = SparseCounts(2)
    c.add(np.array([0, 1, 1]), np.array([50, 3, 50]), np.array([1.0, 2.0, 3.0]))
    back = SparseCounts.from_sorted(c.index.ids, c.sorted_counts())
    np.testing.assert_array_equal(back.sorted_counts(), c.sorted_counts())
    back.add(np.array([0]), np.array([7]), np.array([5.0]))
    assert back.gather(np.array([3, 7, 50])).tolist() == [[0.0, 5.0, 1.0], [2.0, 0.0, 3.0]]


@pytest.mark.parametrize("spread", [4, 40])  # 4: the direct map serves; 40: too sparse for it
def test_a_large_dense_index_finds_as_the_sorted_search(spread):
    """From 65,536 seen ids spread over at most 16 times as many values, lookups go through a
    direct map from id to place (made again after new ids, counted in nbytes): the same columns,
    hits and known columns as a search of the sorted ids, for seen ids, unseen ones and ids past
    the largest; a sparser index never makes one."""
    from streambayes.stats import sparse_counts

    rng = np.random.default_rng(3)
    n = sparse_counts._DENSE_MIN + 500
    universe = rng.choice(n * spread, size=n + 4000, replace=False).astype(np.int64)
    ix = IdIndex()
    ref: dict[int, int] = {}
    for part in np.array_split(universe[:n], 5):
        ix.add(part)
        for i in sorted(set(part.tolist()) - set(ref)):
            ref[i] = len(ref)
    queries = np.concatenate([rng.choice(universe, 30000), [n * spread + 7, 2**32 - 1, 0]])
    for turn in range(2):  # the second time after new ids (a new map)
        at, hit, every = ix.find(queries)
        want = [ref.get(q, -1) for q in queries.tolist()]
        assert hit.tolist() == [w >= 0 for w in want] and not every
        assert ix.lookup(queries).tolist() == want
        assert ix.known((at, hit, every)).tolist() == [w for w in want if w >= 0]
        dense = ix._dense is not None
        assert dense == (spread == 4)
        assert ix.nbytes == ix._ids.nbytes + ix._cols.nbytes + (ix._dense[1].nbytes if dense else 0)
        fresh = universe[n + 2000 * turn:n + 2000 * (turn + 1)]
        assert ix.add(fresh).tolist() == [len(ref) + j for j in np.argsort(np.argsort(fresh)).tolist()]
        for i in sorted(fresh.tolist()):
            ref[i] = len(ref)
        assert ix._dense is None  # the old map is let go with the old ids


def test_a_dense_index_takes_narrow_integer_ids():
    from streambayes.stats import sparse_counts

    ix = IdIndex.from_sorted(np.arange(0, 2 * sparse_counts._DENSE_MIN + 8, 2))
    q = np.arange(3000, dtype=np.int16)
    assert ix.lookup(q).tolist() == [i // 2 if i % 2 == 0 else -1 for i in range(3000)]
    assert ix._dense is not None and ix._coarse is None
