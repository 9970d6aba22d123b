"""Child stores: one namespace per state shard, same kind and settings as the parent."""

import numpy as np
import pytest

from streambayes.snapshot.store import MemorySnapshotStore, SnapshotStore

STATE = {"counts": np.arange(4, dtype=np.float64)}


@pytest.fixture(params=["dir", "memory"])
def store(request, tmp_path):
    if request.param == "dir":
        return SnapshotStore(tmp_path / "state", keep=2, key=b"k")
    return MemorySnapshotStore(keep=2, key=b"k")


def test_children_are_independent_stores_with_the_parents_settings(store):
    assert store.children() == []
    a, b = store.child("partition-events-0"), store.child("partition-events-1")
    assert (a.keep, a.key, b.keep, b.key) == (2, b"k", 2, b"k")
    for _ in range(3):
        a.write(STATE, model="nb", positions={"events": {0: 7}}, events=7)
    b.write(STATE, model="nb", positions={"events": {1: 3}}, events=3)
    assert store.children() == ["partition-events-0", "partition-events-1"]
    assert store.ids() == []  # the parent holds none of them
    assert a.ids() == ["000002", "000003"] and b.ids() == ["000001"]
    again = store.child("partition-events-0")
    assert again.latest().positions == {"events": {"0": 7}}
    np.testing.assert_array_equal(again.latest().state["counts"], STATE["counts"])


def test_an_unused_child_is_not_listed(store):
    store.child("partition-events-9")
    assert store.children() == []


@pytest.mark.parametrize("name", ["", "../up", "a/b", ".hidden", "x" * 201, "sp ace"])
def test_child_names_cannot_escape_the_store(store, name):
    with pytest.raises(ValueError, match="child store name"):
        store.child(name)
