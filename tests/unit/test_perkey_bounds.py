"""PerKeyModel bounds (issue 10): live learners by count and bytes, spilled least recently used
first and brought back on demand, a cap on keys, and snapshots of spilled keys (in memory and
in versioned spill files next to the snapshots)."""

import numpy as np
import pytest

from streambayes.errors import FeatureError, LimitError, ModelError
from streambayes.models.perkey import MODEL_OVERHEAD, PerKeyModel
from streambayes.models.perkey_spill import MemorySpillStore
from streambayes.runtime.loops.spill import DiskSpillStore, SpillCollector, manifest_names, restore_model
from streambayes.snapshot import SnapshotStore
from streambayes.snapshot.codec import decode_state, encode_state

WORDS = "goal league striker match stocks market rates bonds orbit rocket launch moon".split()


def events(n, n_keys, seed=0):
    """``n`` text events with labels over ``n_keys`` keys (each key likes one word)."""
    rng = np.random.default_rng(seed)
    xs, ys, keys = [], [], []
    for _ in range(n):
        k = int(rng.integers(n_keys))
        words = rng.choice(WORDS, 4)
        xs.append({"text": " ".join(words)})
        ys.append("interesting" if WORDS[k % len(WORDS)] in words else "not")
        keys.append(f"user-{k}")
    return xs, ys, keys


def feed(model, xs, ys, keys, batch=20):
    for lo in range(0, len(xs), batch):
        model.learn_many(xs[lo:lo + batch], ys[lo:lo + batch], keys=keys[lo:lo + batch])


def mnb(**kw):
    # alpha pinned: a merge refits alpha="auto" on the merged counts, learning at fixed event counts
    return PerKeyModel("mnb", {"n_features": 2**10, "alpha": 1.0}, backoff=2, **kw)


def predictions(model, n_keys):
    probes = [{"text": " ".join(WORDS[i:i + 3])} for i in range(0, len(WORDS), 2)]
    return np.stack([model.predict_log_proba_many(probes, f"user-{k}") for k in range(n_keys)])


def test_least_recently_used_learners_spill_first_and_come_back_on_demand():
    m = mnb(max_resident=2)
    for key in ("a", "b", "c"):
        m.learn_one({"text": "goal"}, "interesting", key=key)
    assert m.resident_keys == ["b", "c"] and m.spill_store.keys() == ["a"]
    m.predict_proba_one({"text": "goal"}, key="a")  # a comes back; b is now least recent
    assert m.resident_keys == ["c", "a"] and set(m.spill_store.keys()) >= {"b"}
    m.learn_one({"text": "goal"}, "not", key="c")
    m.learn_one({"text": "goal"}, "not", key="b")
    assert m.resident_keys == ["c", "b"] and m.n_labels("b") == 2


@pytest.mark.parametrize("spill", ["memory", "disk"])
def test_spilled_learners_predict_exactly_as_never_spilled_ones(tmp_path, spill):
    xs, ys, keys = events(600, 15)
    store = DiskSpillStore(tmp_path / "spill") if spill == "disk" else None
    bounded, unbounded = mnb(max_resident=3, spill=store), mnb()
    feed(bounded, xs, ys, keys)
    feed(unbounded, xs, ys, keys)
    assert len(bounded.resident_keys) <= 3 and len(bounded.spill_store.keys()) >= 12
    assert np.array_equal(predictions(bounded, 15), predictions(unbounded, 15))
    assert [bounded.n_labels(f"user-{k}") for k in range(15)] == \
        [unbounded.n_labels(f"user-{k}") for k in range(15)]


def test_the_bytes_bound_holds_live_learners_and_spilled_states_in_memory():
    one = mnb()
    one.learn_one({"text": "goal"}, "interesting", key="x")
    size = one.resident_bytes  # one learner of two classes over 2^10 buckets, with its overhead
    assert size == one.user_model("x").memory_bytes() + MODEL_OVERHEAD
    cap = int(3.5 * size)
    m = mnb(max_resident_bytes=cap)
    xs, ys, keys = events(400, 12)
    for lo in range(0, 400, 10):
        m.learn_many(xs[lo:lo + 10], ys[lo:lo + 10], keys=keys[lo:lo + 10])
        assert m.resident_bytes + m.spill_store.memory_bytes() <= cap
        assert len(m.resident_keys) <= 3
    assert len(m.keys) == 12


def test_a_new_key_that_cannot_fit_next_to_the_spilled_states_in_memory_is_refused():
    m = mnb(max_resident_bytes=20 * (MODEL_OVERHEAD + 16_384))  # about 20 live learners
    m.learn_one({"text": "goal"}, "interesting", key="a")
    one = m.resident_bytes
    refused = 0
    for i in range(2000):
        try:
            m.learn_one({"text": f"goal market {i}"}, "not", key=f"k{i}")
        except LimitError as exc:
            assert "max_resident_bytes" in str(exc)
            refused += 1
        assert m.resident_bytes + m.spill_store.memory_bytes() <= m.max_resident_bytes + one
    assert refused > 0 and len(m.keys) < 2000
    m.learn_one({"text": "rates"}, "not", key="a")  # a known key still learns


def state_arrays(model):
    skeleton, arrays = encode_state(model.to_state())
    return skeleton, {name: a.copy() for name, a in arrays.items()}


def test_max_keys_refuses_a_new_key_before_anything_changes():
    m = mnb(max_keys=3, max_resident=1)
    xs, ys, keys = events(60, 3)
    feed(m, xs, ys, keys)
    before_skeleton, before = state_arrays(m)
    with pytest.raises(LimitError, match="max_keys is 3") as err:
        m.learn_many([{"text": "goal"}, {"text": "rates"}], ["interesting", "not"],
                     keys=["user-0", "newcomer"])
    assert isinstance(err.value, FeatureError)  # the stream runtime dead-letters it
    after_skeleton, after = state_arrays(m)
    assert after_skeleton == before_skeleton and before.keys() == after.keys()
    assert all(np.array_equal(before[k], after[k]) for k in before)
    m.learn_many([{"text": "goal"}], ["interesting"], keys=["user-0"])  # known keys still learn
    assert m.n_labels("user-0") == keys.count("user-0") + 1 and "newcomer" not in m.keys


def test_bounds_are_checked_and_do_not_block_a_merge():
    with pytest.raises(ModelError, match="max_keys"):
        mnb(max_keys=0)
    with pytest.raises(ModelError, match="max_resident_bytes"):
        mnb(max_resident_bytes=-5)
    a, b, both = mnb(max_resident=2, max_resident_bytes=10**6), mnb(max_resident=1), mnb()
    xa, ya, ka = events(200, 8, seed=1)
    xb, yb, kb = events(200, 8, seed=2)
    feed(a, xa, ya, ka)
    feed(b, xb, yb, kb)
    feed(both, xa + xb, ya + yb, ka + kb)
    a.merge(b)
    assert len(a.resident_keys) <= 2
    assert np.allclose(predictions(a, 8), predictions(both, 8), rtol=0, atol=1e-12)
    small = mnb(max_keys=4)
    with pytest.raises(LimitError):
        small.merge(b)
    assert small.keys == []


def test_a_snapshot_of_spilled_keys_in_memory_round_trips():
    m = mnb(max_resident=2)
    xs, ys, keys = events(300, 9)
    feed(m, xs, ys, keys)
    skeleton, arrays = encode_state(m.to_state())
    back = PerKeyModel.from_state(decode_state(skeleton, arrays))
    assert back.keys == m.keys and back.resident_keys == m.resident_keys
    assert np.array_equal(predictions(back, 9), predictions(m, 9))


def checkpoint(model, store, collector=None):
    """What the learn loop does: the state (spilling changed learners), the snapshot, the GC."""
    state = model.to_state()
    info = store.write(state, model="perkey", positions={}, events=model.n_events)
    if collector is not None:
        collector.remember(info.id, state)
        collector.collect()
    return info


def test_a_snapshot_holds_the_manifest_and_restores_only_it(tmp_path):
    store, spill_dir = SnapshotStore(tmp_path), tmp_path / "spill"
    m = mnb(max_resident=3, spill=DiskSpillStore(spill_dir))
    xs, ys, keys = events(400, 10)
    feed(m, xs, ys, keys)
    checkpoint(m, store)
    snap = store.latest()
    assert "users" not in snap.state and len(snap.state["keys"]) == 10
    back = restore_model(snap, writable=True)  # spill files found next to the snapshot
    assert back.resident_keys == [] and back.keys == m.keys  # nothing loaded yet
    assert np.array_equal(predictions(back, 10), predictions(m, 10))
    with pytest.raises(ModelError, match="spill store"):
        PerKeyModel.from_state(snap.state)


def test_a_crash_between_spills_restores_the_last_snapshot_exactly(tmp_path):
    store, spill_dir = SnapshotStore(tmp_path, keep=2), tmp_path / "spill"
    m = mnb(max_resident=2, spill=DiskSpillStore(spill_dir))
    collector = SpillCollector(spill_dir, store)
    xs, ys, keys = events(900, 8)
    feed(m, xs[:300], ys[:300], keys[:300])
    checkpoint(m, store, collector)
    reference = mnb()  # what the last snapshot reflects
    feed(reference, xs[:300], ys[:300], keys[:300])
    feed(m, xs[300:600], ys[300:600], keys[300:600])  # spills new generations, then "kill -9"
    m.to_state()  # even a checkpoint cut short after its spills and flush, before the write
    del m
    back = restore_model(store.latest(), writable=True)
    assert np.array_equal(predictions(back, 8), predictions(reference, 8))
    # the restored learner goes on; the files of the crashed run are collected, kept ones stay
    for lo in (300, 500, 700):
        feed(back, xs[lo:lo + 200], ys[lo:lo + 200], keys[lo:lo + 200])
        feed(reference, xs[lo:lo + 200], ys[lo:lo + 200], keys[lo:lo + 200])
        checkpoint(back, store, collector)
    names = {p.name for p in spill_dir.iterdir()}
    kept = set()
    for snapshot_id in store.ids():
        state = store.load(snapshot_id).state
        kept |= manifest_names(state)
    assert names == kept and len(kept) > 8  # more than one snapshot's generations are kept
    again = restore_model(store.latest(), writable=True)
    assert np.array_equal(predictions(again, 8), predictions(reference, 8))


def test_spill_files_are_never_overwritten_and_name_their_key(tmp_path):
    spill = DiskSpillStore(tmp_path)
    spill.put("ann", {"a": np.arange(2)})
    spill.put("ann", {"a": np.arange(3)})  # not flushed yet: no snapshot can name it, rewritten
    assert len(spill.files()) == 1 and spill.get("ann")["a"].tolist() == [0, 1, 2]
    spill.flush()
    first = spill.manifest()["ann"]
    spill.put("ann", {"a": np.arange(4)})
    assert spill.manifest()["ann"] > first and spill.path("ann", first).exists()
    assert DiskSpillStore(tmp_path)._next > spill.manifest()["ann"]  # a new process goes on past
    spill.path("ann", first).rename(spill.path("bob", first))
    spill.load_manifest({"bob": first})
    with pytest.raises(ModelError, match="holds key 'ann'"):
        spill.get("bob")


def test_a_read_only_store_never_writes(tmp_path):
    writer = DiskSpillStore(tmp_path)
    writer.put("ann", {"a": np.arange(3)})
    reader = DiskSpillStore(tmp_path, writable=False)
    reader.load_manifest(writer.manifest())
    reader.put("ann", {"a": np.arange(5)})
    assert reader.get("ann")["a"].tolist() == list(range(5)) and len(list(tmp_path.iterdir())) == 1
    assert not reader.durable and reader.memory_bytes() > 0


def test_memory_store_holds_states_compactly():
    store = MemorySpillStore()
    state = {"counts": np.zeros((2, 2**16)), "n": 3, "names": ["a", "b"]}
    store.put("k", state)
    got = store.get("k")
    assert store.memory_bytes() < state["counts"].nbytes / 100
    assert got["n"] == 3 and got["names"] == ["a", "b"] and np.array_equal(got["counts"], state["counts"])
    got["counts"][0, 0] = 1  # a writable copy
    store.delete("k")
    assert store.memory_bytes() == 0 and store.get("k") is None
