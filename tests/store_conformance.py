"""One conformance suite for every snapshot store (directory, memory, Kafka topic, S3).

A test module subclasses :class:`StoreConformance` and gives a ``backend`` fixture: a
:class:`Backend` that opens stores at one fresh location (each ``open`` is a new store object,
as a fresh process would make) and can damage a stored snapshot in place.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from streambayes.errors import SnapshotError
from streambayes.snapshot.payload import ReadLimits
from streambayes.snapshot.store import BaseSnapshotStore, MemorySnapshotStore, SnapshotStore, parse_id

STATE = {"counts": np.arange(5000, dtype=np.float64), "labels": np.array([3, 1, 2], dtype=np.int64)}
_names = itertools.count()


@dataclass
class Backend:
    """``open(keep, key=None, limits=None)``: a store object at this backend's location;
    ``damage(store, id)``: corrupt one stored snapshot's bytes where they are stored."""

    name: str
    open: Callable[..., BaseSnapshotStore]
    damage: Callable[[BaseSnapshotStore, str], None]


def flipped(data: bytes) -> bytes:
    """``data`` with one byte in the middle changed."""
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:]


def dir_backend(root) -> Backend:
    def damage(store, snapshot_id):
        path = store._path(parse_id(snapshot_id))
        path.write_bytes(flipped(path.read_bytes()))

    return Backend("dir", lambda keep=5, **kw: SnapshotStore(root / "state", keep, **kw), damage)


def memory_backend() -> Backend:
    stores: dict = {}

    def open_(keep=5, **kw):  # one location: later opens share the first store's bytes
        store = MemorySnapshotStore(keep, **kw)
        if "first" in stores:
            store.blobs, store._kids = stores["first"].blobs, stores["first"]._kids
        stores.setdefault("first", store)
        return store

    def damage(store, snapshot_id):
        store.blobs[snapshot_id] = flipped(store.blobs[snapshot_id])

    return Backend("memory", open_, damage)


def s3_backend(client) -> Backend:
    from streambayes.runtime.stores.s3 import S3SnapshotStore

    bucket = f"conformance-{next(_names)}"
    client.create_bucket(Bucket=bucket)

    def damage(store, snapshot_id):
        name = store._object(parse_id(snapshot_id))
        data = client.get_object(Bucket=bucket, Key=name)["Body"].read()
        client.put_object(Bucket=bucket, Key=name, Body=flipped(data))

    return Backend("s3", lambda keep=5, **kw: S3SnapshotStore(bucket, "models/sms", keep,
                                                              client=client, **kw), damage)


@pytest.fixture(scope="session")
def s3_client():
    """A boto3 client of a local moto S3 server (moto's server mode, on loopback)."""
    from moto.server import ThreadedMotoServer

    from streambayes.runtime.stores.s3 import s3_client as make

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    with pytest.MonkeyPatch.context() as mp:
        for name, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"),
                            ("AWS_DEFAULT_REGION", "us-east-1")):
            mp.setenv(name, value)
        client = make(f"http://{host}:{port}")
        client.endpoint = f"http://{host}:{port}"
        yield client
    server.stop()


def _write(store, n: int, events: int | None = None):
    state = {**STATE, "counts": STATE["counts"] + n}
    return store.write(state, model="mnb", positions={"events": {"0": n}},
                       events=n if events is None else events, config={"n": n})


class StoreConformance:
    """What every store must do the same way."""

    def test_an_empty_store(self, backend):
        store = backend.open()
        assert (store.ids(), store.latest(), store.latest_header(), store.children()) == ([], None, None, [])

    def test_a_fresh_store_object_reads_what_was_written(self, backend):
        writer = backend.open()
        for n in (1, 2):
            info = _write(writer, n)
        assert info.id == "000002" and info.ok and info.events == 2
        reader = backend.open()
        snap = reader.latest()
        assert (snap.id, snap.model, snap.positions, snap.events, snap.config) == (
            "000002", "mnb", {"events": {"0": 2}}, 2, {"n": 2})
        np.testing.assert_array_equal(snap.state["counts"], STATE["counts"] + 2)
        np.testing.assert_array_equal(snap.state["labels"], STATE["labels"])
        assert reader.load("000001").positions == {"events": {"0": 1}}
        assert [i.id for i in reader.list()] == ["000001", "000002"]

    def test_keep_k_prunes_and_never_reuses_an_id(self, backend):
        store = backend.open(keep=2)
        for n in range(1, 6):
            _write(store, n)
        assert store.ids() == ["000004", "000005"]
        again = backend.open(keep=2)
        assert _write(again, 6).id == "000006"
        assert again.ids() == ["000005", "000006"]
        with pytest.raises(SnapshotError):
            again.load("000003")

    def test_a_corrupt_newest_snapshot_falls_back_to_the_one_before(self, backend, caplog):
        store = backend.open()
        for n in (1, 2, 3):
            _write(store, n)
        backend.damage(store, "000003")
        reader = backend.open()
        with caplog.at_level(logging.WARNING):
            snap = reader.latest()
        assert snap.id == "000002" and "skipping snapshot 000003" in caplog.text
        assert reader.latest_header()["id"] == "000002"
        assert [(i.id, i.ok) for i in reader.list()] == [("000001", True), ("000002", True),
                                                         ("000003", False)]
        assert _write(reader, 4).id == "000004"  # the corrupt id is not reused
        assert backend.open().latest().id == "000004"

    def test_when_every_snapshot_is_corrupt_latest_raises(self, backend):
        store = backend.open()
        _write(store, 1)
        backend.damage(store, "000001")
        with pytest.raises(SnapshotError, match="no good snapshot"):
            backend.open().latest()

    def test_keep_k_prunes_corrupt_snapshots_too(self, backend):
        store = backend.open(keep=2)
        _write(store, 1)
        _write(store, 2)
        backend.damage(store, "000001")
        _write(store, 3)
        assert [(i.id, i.ok) for i in backend.open().list()] == [("000002", True), ("000003", True)]

    def test_a_wrong_key_or_a_small_limit_refuses_the_snapshot(self, backend):
        _write(backend.open(key=b"right"), 1)
        with pytest.raises(SnapshotError):
            backend.open(key=b"wrong").latest()
        assert backend.open(key=b"right").latest().id == "000001"
        with pytest.raises(SnapshotError):
            backend.open(key=b"right", limits=ReadLimits(max_bytes=1000)).latest()

    def test_children_are_namespaces_with_the_parents_settings(self, backend):
        store = backend.open(keep=2, key=b"k")
        a, b = store.child("partition-events-0"), store.child("partition-events-1")
        assert (a.keep, a.key, b.keep, b.key) == (2, b"k", 2, b"k")
        store.child("partition-events-9")  # never written: not listed
        for n in (1, 2, 3):
            _write(a, n)
        _write(b, 7)
        _write(store, 1)
        again = backend.open(keep=2, key=b"k")
        assert again.children() == ["partition-events-0", "partition-events-1"]
        assert again.ids() == ["000001"]
        kid = again.child("partition-events-0")
        assert kid.ids() == ["000002", "000003"] and kid.latest().positions == {"events": {"0": 3}}
        assert again.child("partition-events-1").latest().events == 7
        assert kid.children() == []

    def test_a_corrupt_child_snapshot_falls_back_like_the_parent(self, backend):
        kid = backend.open().child("partition-events-2")
        _write(kid, 1)
        _write(kid, 2)
        backend.damage(kid, "000002")
        assert backend.open().child("partition-events-2").latest().id == "000001"
