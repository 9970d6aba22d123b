"""Snapshot codec, file format and stores (file and memory backends run the same tests)."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from streambayes.errors import CorruptSnapshot, SnapshotError, StreambayesError
from streambayes.snapshot import (
    FORMAT_VERSION,
    MemorySnapshotStore,
    SnapshotStore,
    decode_state,
    encode_state,
    load_snapshot_file,
    pack,
    payload,
    read_snapshot_header,
    summarize,
    unpack,
)
from streambayes.snapshot.fileformat import compact_json
from streambayes.snapshot.store import STALE_TEMPORARY_SECONDS

POSITIONS = {"learn": {"0": 17, "1": 4}}


def _nested_state() -> dict:
    return {
        "counts": np.arange(12, dtype=np.float64).reshape(3, 4) / 7,
        "totals": np.array([3, -2, 2**40], dtype=np.int64),
        "seen": np.array([True, False, True]),
        "codes": np.array([0, 255, 7], dtype=np.uint8),
        "empty": np.zeros(0),
        "empty_2d": np.zeros((0, 3), dtype=np.int32),
        "scalar": np.array(2.5),
        "big_endian": np.array([1, 2], dtype=">i4"),
        "fortran": np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
        "tables": [{"name": "tok", "cpt": np.ones((2, 2))}, {"name": "größe ✓ 日本", "cpt": None}],
        "classes": ["ham", "spam", "ünïcode"],
        "params": {"alpha": 1.0, "fit_prior": True, "n": 2**70, "nested": [[1, [2, None]], []]},
        "special": {"nan": math.nan, "inf": math.inf, "ninf": -math.inf, "negzero": -0.0},
        "tricky": {"__array__": "a0"},  # a user dict that looks like a reference
        "tricky2": {"__dict__": {"__float__": "nan"}},
        "empty_dict": {},
    }


def assert_same(got, want, path: str = "state") -> None:
    """Arrays: same type, dtype, shape, values; JSON parts: equal (NaN equal to NaN, -0.0 kept)."""
    if isinstance(want, np.ndarray):
        assert type(got) is np.ndarray, path
        assert got.dtype == want.dtype and got.shape == want.shape, path
        assert np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"), path
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), path
        for key in want:
            assert_same(got[key], want[key], f"{path}[{key!r}]")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for index, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{path}[{index}]")
    elif isinstance(want, float) and math.isnan(want):
        assert isinstance(got, float) and math.isnan(got), path
    else:
        assert type(got) is type(want) and got == want, path
        if isinstance(want, float):
            assert math.copysign(1, got) == math.copysign(1, want), path


@pytest.fixture(params=["file", "memory"])
def store_factory(request, tmp_path) -> Callable[..., SnapshotStore | MemorySnapshotStore]:
    def make(keep: int = 5, **kwargs):
        if request.param == "file":
            return SnapshotStore(tmp_path / "snaps", keep=keep, **kwargs)
        return MemorySnapshotStore(keep=keep, **kwargs)

    return make


def write(store, n: int = 1, **overrides):
    kwargs = {"model": "mnb", "config": {"alpha": 1.0}, "positions": POSITIONS, "events": n}
    kwargs.update(overrides)
    return store.write({"counts": np.full(3, n), "n": n}, **kwargs)


def put_blob(store, snapshot_id: str, data: bytes) -> None:
    if isinstance(store, MemorySnapshotStore):
        store.blobs[snapshot_id] = data
    else:
        store.directory.mkdir(exist_ok=True)
        store._path(int(snapshot_id)).write_bytes(data)


def damage(store, snapshot_id: str, change: Callable[[bytes], bytes]) -> None:
    if isinstance(store, MemorySnapshotStore):
        store.blobs[snapshot_id] = change(store.blobs[snapshot_id])
    else:
        path = store._path(int(snapshot_id))
        path.write_bytes(change(path.read_bytes()))


def flip_bit(position: float) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        index = min(int(len(data) * position), len(data) - 1)
        return data[:index] + bytes([data[index] ^ 0x10]) + data[index + 1 :]

    return change


# -- round trip -------------------------------------------------------------------------------


def test_round_trip_nested_state(store_factory):
    store = store_factory()
    state = _nested_state()
    info = store.write(state, model="nb", config={"k": [1, 2]}, positions=POSITIONS, events=9)
    snap = store.latest()
    assert snap is not None and snap.id == info.id == "000001"
    assert_same(snap.state, state)
    assert_same(store.load("000001").state, state)


def test_dtypes_safetensors_lacks_round_trip_as_bytes_with_their_dtype_in_the_header(store_factory):
    store = store_factory()
    state = {"words": np.array(["a", "größe"]), "raw": np.array([b"x", b"yz"]),
             "when": np.array([1, 2], "M8[s]"), "z": np.array([1 + 2j], np.complex128),
             "big": np.array([[1, 2], [3, 4]], ">i4").T, "flags": np.array([True])}
    store.write(state, model="nb", positions={}, events=1)
    assert_same(store.latest().state, state)
    items = store.header("000001")["arrays"]["items"]
    assert [items[f"a{i}"]["dtype"] for i in range(6)] == ["<U5", "|S2", "<M8[s]", "<c16", ">i4", "|b1"]
    with pytest.raises(SnapshotError, match="cannot be stored"):
        store.write({"v": np.zeros(2, [("x", "<i4")])}, model="nb", positions={}, events=1)


def test_format_1_snapshots_still_load_compressed_or_not(store_factory):
    """Old (npz) snapshots on users' disks: read, also deflated, with the same checks."""
    store = store_factory()
    state = {"big": np.zeros((200, 50)), "meta": ["x"], "scalar": np.array(2.5)}
    write(store, 1)  # a format-2 snapshot, then two format-1 ones as older builds wrote them
    for number, compress in ((2, False), (3, True)):
        data, _ = pack(state, snapshot_id=f"00000{number}", model="gnb", config={}, positions={},
                       events=1, created_at="2026-01-01T00:00:00.000Z", version=1, compress=compress)
        assert data.startswith(b"STREAMBAYES-SNAPSHOT 1 ")
        assert (len(data) < 200 * 50 * 8 // 10) == compress
        put_blob(store, f"00000{number}", data)
    assert_same(store.latest().state, state)
    assert_same(store.load("000002").state, state)
    assert [info.ok for info in store.list()] == [True, True, True]


def test_marker_like_keys_are_escaped_not_confused():
    state = _nested_state()
    skeleton, arrays = encode_state(state)
    assert skeleton["tricky"] == {"__dict__": {"__array__": "a0"}}
    assert_same(decode_state(skeleton, arrays)["tricky"], {"__array__": "a0"})
    assert_same(decode_state(skeleton, arrays), state)


def test_non_finite_floats_round_trip_and_header_is_strict_json():
    data, header = pack(
        {"x": math.inf, "y": [math.nan]}, snapshot_id="000001", model="nb", config={},
        positions={}, events=0, created_at="2026-01-01T00:00:00.000Z",
    )  # fmt: skip
    assert header["skeleton"] == {"x": {"__float__": "inf"}, "y": [{"__float__": "nan"}]}
    body = data.split(b"\n", 1)[1][: len(compact_json(header))]
    json.loads(body, parse_constant=lambda name: pytest.fail(f"non-strict JSON {name}"))
    assert_same(unpack(data)[1], {"x": math.inf, "y": [math.nan]})


json_leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
numeric_dtypes = st.sampled_from(["f8", "f4", "i8", "i4", "u1", "u8", "?", "c16", ">f8", "<u2"])
arrays_strategy = hnp.arrays(numeric_dtypes, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0))
state_strategy = st.recursive(
    json_leaves | arrays_strategy,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(), state_strategy, min_size=1, max_size=4))
def test_any_state_round_trips_through_bytes(state):
    data, _ = pack(
        state, snapshot_id="000001", model="nb", config={}, positions={}, events=0,
        created_at="2026-01-01T00:00:00.000Z",
    )  # fmt: skip
    header, got = unpack(data)
    assert_same(got, state)


# -- header ---------------------------------------------------------------------------------


def test_header_holds_positions_events_model_config(store_factory):
    store = store_factory()
    store.write({"a": np.ones(2)}, model="catnb", config={"alpha": 0.5}, events=123,
                positions={"learn": {0: 10, "3": 0}, "other": {}})  # fmt: skip
    header = store.header("000001")
    assert header["model"] == "catnb" and header["events"] == 123
    assert header["positions"] == {"learn": {"0": 10, "3": 0}, "other": {}}
    assert header["config"] == {"alpha": 0.5}
    assert header["schema_version"] == FORMAT_VERSION and header["id"] == "000001"
    assert datetime.fromisoformat(header["created_at"]).utcoffset().total_seconds() == 0
    assert len(header["checksum"]) == 64 and int(header["checksum"], 16) >= 0
    snap = store.latest()
    assert snap.positions == header["positions"] and snap.events == 123 and snap.model == "catnb"
    snap.positions["learn"]["0"] = 999  # a copy: the snapshot stays immutable
    assert snap.positions["learn"]["0"] == 10
    assert store.latest_header() == header
    summary = summarize(header)
    assert "skeleton" not in summary and summary["checksum"] == header["checksum"]
    assert summary["arrays"] == {"count": 1, "bytes": header["arrays"]["bytes"], "format": "safetensors"}
    assert header["arrays"]["items"] == {"a0": {"dtype": "<f8", "shape": [2], "nbytes": 16}}
    json.dumps(summary, allow_nan=False)


def test_standalone_file_functions(tmp_path):
    store = SnapshotStore(tmp_path, keep=2)
    info = write(store, 5)
    assert read_snapshot_header(info.path)["events"] == 5
    snap = load_snapshot_file(info.path)
    assert snap.id == "000001" and snap.state["n"] == 5
    with pytest.raises(SnapshotError, match="cannot read"):
        load_snapshot_file(tmp_path / "missing.sbs")


def test_memory_bytes_are_the_file_format(tmp_path):
    memory = MemorySnapshotStore()
    write(memory, 3)
    path = tmp_path / "copy.sbs"
    path.write_bytes(memory.blobs["000001"])
    assert load_snapshot_file(path).state["n"] == 3


# -- ids, keep-K, temporaries, atomicity -----------------------------------------------------


def test_keep_k_prunes_oldest_and_ids_keep_counting(store_factory):
    store = store_factory(keep=3)
    infos = [write(store, n) for n in range(1, 6)]
    assert [i.id for i in infos] == ["000001", "000002", "000003", "000004", "000005"]
    assert [i.id for i in store.list()] == ["000003", "000004", "000005"]
    assert store.ids() == ["000003", "000004", "000005"]
    assert all(i.ok for i in store.list())
    damage(store, "000005", flip_bit(0.5))  # bad files count towards K and towards the next id
    assert write(store, 6).id == "000006"
    assert [i.id for i in store.list()] == ["000004", "000005", "000006"]


def test_keep_one_keeps_just_the_new_one(store_factory):
    store = store_factory(keep=1)
    write(store, 1)
    write(store, 2)
    assert store.ids() == ["000002"] and store.latest().state["n"] == 2
    with pytest.raises(ValueError, match="keep"):
        store_factory(keep=0)


def test_temp_leftovers_are_ignored_then_cleaned(tmp_path):
    store = SnapshotStore(tmp_path, keep=5)
    write(store, 1)
    leftover = tmp_path / ".snapshot-000002.sbs.4242-deadbeef.tmp"
    leftover.write_bytes(b"STREAMBAYES-SNAPSHOT 1 999\n{half")
    stale = time.time() - STALE_TEMPORARY_SECONDS - 1
    os.utime(leftover, (stale, stale))
    (tmp_path / "README").write_text("not a snapshot")
    (tmp_path / "snapshot-42.sbs").write_bytes(b"not a canonical name")
    assert store.ids() == ["000001"] and store.latest().state["n"] == 1
    assert write(store, 2).id == "000002"
    assert not leftover.exists()
    assert (tmp_path / "README").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "README", "snapshot-000001.sbs", "snapshot-000002.sbs", "snapshot-42.sbs",
    ]  # fmt: skip


def test_a_young_temporary_is_left_to_its_writer(tmp_path):
    store = SnapshotStore(tmp_path, keep=5)
    young = tmp_path / ".snapshot-000009.sbs.4242-deadbeef.tmp"
    young.write_bytes(b"being written")
    write(store, 1)
    assert young.exists() and store.ids() == ["000001"]
    assert SnapshotStore(tmp_path, stale_after=0).write({"n": np.array([2])}, model="m", positions={},
                                                        events=2).id == "000002"
    assert not young.exists()
    for bad in (-1, float("nan"), "5", None, True):
        with pytest.raises(ValueError, match="stale_after"):
            SnapshotStore(tmp_path, stale_after=bad)
    assert SnapshotStore(tmp_path, stale_after=5).child("part").stale_after == 5


def test_two_writers_of_one_store_do_not_remove_each_others_write(tmp_path, monkeypatch):
    # A learner that has just lost a state shard in a rebalance may checkpoint it once more while
    # the shard's new owner writes there: the other's write (which cleans leftovers) runs between
    # this one's temporary and its publishing. Before, it removed the temporary and the rename
    # failed; then the later rename replaced the other's snapshot of the same number. Now the
    # later writer takes the next number: both snapshots are kept.
    first, second = SnapshotStore(tmp_path, keep=5), SnapshotStore(tmp_path, keep=5)
    write(first, 1)
    link = os.link
    interleaved = []

    def other_writes_first(src, dst):
        if not interleaved:
            interleaved.append(None)
            interleaved[0] = write(second, 2).id
        link(src, dst)

    monkeypatch.setattr(os, "link", other_writes_first)
    info = write(first, 3)
    monkeypatch.undo()
    assert interleaved == ["000002"] and info.id == "000003"
    assert [(s.id, int(first.load(s.id).state["n"])) for s in first.list()] == \
        [("000001", 1), ("000002", 2), ("000003", 3)]
    assert first.latest().id == "000003" and not list(tmp_path.glob(".*.tmp"))


def test_a_writer_gives_up_when_others_keep_taking_the_next_number(tmp_path, monkeypatch):
    store = SnapshotStore(tmp_path, keep=5)
    write(store, 1)

    def taken(src, dst):
        raise FileExistsError(17, "File exists", str(dst))

    monkeypatch.setattr(os, "link", taken)
    with pytest.raises(SnapshotError, match="other writers took the next number 100 times"):
        write(store, 2)
    monkeypatch.undo()
    assert store.ids() == ["000001"] and not list(tmp_path.glob(".*.tmp"))


def test_a_link_whose_reply_was_lost_is_the_writers_own_snapshot(tmp_path, monkeypatch):
    # NFS: the link is made, its reply lost, the request sent again: "File exists", of our file
    store = SnapshotStore(tmp_path, keep=5)
    link = os.link

    def linked_then_exists(src, dst):
        link(src, dst)
        raise FileExistsError(17, "File exists", str(dst))

    monkeypatch.setattr(os, "link", linked_then_exists)
    info = write(store, 1)
    monkeypatch.undo()
    assert info.id == "000001" and store.ids() == ["000001"] and not list(tmp_path.glob(".*.tmp"))


def test_without_hard_links_a_snapshot_is_published_by_rename(tmp_path, monkeypatch):
    import errno

    store = SnapshotStore(tmp_path, keep=5)

    def no_links(src, dst):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    write(store, 1)
    write(store, 2)
    monkeypatch.undo()
    assert store.ids() == ["000001", "000002"] and int(store.latest().state["n"]) == 2
    assert not list(tmp_path.glob(".*.tmp"))


def test_failed_rename_leaves_previous_snapshot_and_no_temporary(tmp_path, monkeypatch):
    store = SnapshotStore(tmp_path, keep=5)
    write(store, 1)

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "link", crash)  # a link that fails so is tried as a rename
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(SnapshotError, match="cannot write snapshot .*000002.* disk full"):
        write(store, 2)
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["snapshot-000001.sbs"]
    assert store.latest().state["n"] == 1


# -- corruption -----------------------------------------------------------------------------


@pytest.mark.parametrize("keep_bytes", [0, 10, 40, 0.5, -1])
def test_truncated_newest_falls_back_to_previous(store_factory, keep_bytes, caplog):
    store = store_factory()
    write(store, 1)
    write(store, 2)
    cut = (lambda d: d[: int(len(d) * keep_bytes)]) if isinstance(keep_bytes, float) else None
    damage(store, "000002", cut or (lambda d: d[:keep_bytes]))
    with caplog.at_level(logging.WARNING, logger="streambayes.snapshot"):
        snap = store.latest()
    assert snap.id == "000001" and snap.state["n"] == 1
    assert "000002" in caplog.text
    with pytest.raises(CorruptSnapshot):
        store.load("000002")
    listed = {i.id: i for i in store.list()}
    assert listed["000001"].ok and not listed["000002"].ok and listed["000002"].error


@pytest.mark.parametrize("where", [0.01, 0.3, 0.6, 0.95, 1.0])
def test_bit_flipped_newest_falls_back_to_previous(store_factory, where):
    store = store_factory()
    write(store, 1)
    write(store, 2)
    damage(store, "000002", flip_bit(where))
    assert store.latest().id == "000001"
    assert store.latest_header()["id"] == "000001"
    with pytest.raises(SnapshotError):
        store.load("000002")


def test_all_corrupt_raises_and_empty_store_gives_none(store_factory):
    store = store_factory()
    assert store.latest() is None and store.latest_header() is None and store.list() == []
    write(store, 1)
    write(store, 2)
    damage(store, "000001", lambda d: d[:-1])
    damage(store, "000002", flip_bit(0.5))
    with pytest.raises(SnapshotError, match="no good snapshot") as excinfo:
        store.latest()
    assert "000001" in str(excinfo.value) and "000002" in str(excinfo.value)
    assert isinstance(excinfo.value, StreambayesError)


def test_unknown_format_version_is_skipped(store_factory):
    store = store_factory()
    write(store, 1)
    write(store, 2)
    damage(store, "000002", lambda d: d.replace(b"SNAPSHOT 2 ", b"SNAPSHOT 7 ", 1))
    with pytest.raises(SnapshotError, match="unsupported snapshot format version 7"):
        store.load("000002")
    assert store.latest().id == "000001"


def test_renamed_file_is_detected(tmp_path):
    store = SnapshotStore(tmp_path)
    write(store, 1)
    write(store, 2)
    os.replace(tmp_path / "snapshot-000001.sbs", tmp_path / "snapshot-000003.sbs")
    with pytest.raises(CorruptSnapshot, match="header says '000001'"):
        store.load(3)
    assert store.latest().id == "000002"
    with pytest.raises(SnapshotError, match="no snapshot 000001"):
        store.load("000001")


# -- no pickle, ever ------------------------------------------------------------------------


class _Payload:
    """Unpickling this touches a marker file: proof that code ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _crafted_snapshot(marker: Path) -> bytes:
    """A well-formed snapshot with a valid checksum whose npz holds a pickled object array."""
    evil = np.empty(1, dtype=object)
    evil[0] = _Payload(marker)
    buffer = io.BytesIO()
    np.savez(buffer, a0=evil, allow_pickle=True)
    archive = buffer.getvalue()
    header = {
        "schema_version": 1, "id": "000001", "model": "nb", "config": {}, "positions": {},
        "events": 1, "created_at": "2026-01-01T00:00:00.000Z", "writer": "attacker",
        "arrays": {"count": 1, "bytes": len(archive)}, "skeleton": {"w": {"__array__": "a0"}},
    }  # fmt: skip
    header["checksum"] = hashlib.sha256(compact_json(header) + archive).hexdigest()
    body = compact_json(header)
    return b"STREAMBAYES-SNAPSHOT 1 %d\n" % len(body) + body + archive


def test_crafted_payload_is_live(tmp_path):
    """Control: the payload really executes when numpy is allowed to unpickle it."""
    marker = tmp_path / "control"
    data = _crafted_snapshot(marker)
    archive = data[data.index(b"\n") + 1 + int(data.split(b"\n")[0].split()[2]) :]
    np.load(io.BytesIO(archive), allow_pickle=True)["a0"]
    assert marker.exists()


def test_pickled_object_array_is_refused_without_running_it(store_factory, tmp_path):
    marker = tmp_path / "pwned"
    data = _crafted_snapshot(marker)
    store = store_factory()
    if isinstance(store, MemorySnapshotStore):
        store.blobs["000001"] = data
    else:
        store.directory.mkdir()
        (store.directory / "snapshot-000001.sbs").write_bytes(data)
    with pytest.raises(CorruptSnapshot, match="Python objects"):
        store.load("000001")
    with pytest.raises(SnapshotError, match="no good snapshot"):
        store.latest()
    assert not store.list()[0].ok
    with pytest.raises(CorruptSnapshot):
        unpack(data)
    assert not marker.exists()


def test_np_load_refuses_pickle_even_if_the_dtype_check_is_bypassed(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    monkeypatch.setattr(payload, "_checked_members", lambda zf, names, limits: zf.infolist())
    with pytest.raises(CorruptSnapshot, match="Object arrays cannot be loaded"):
        unpack(_crafted_snapshot(marker))
    assert not marker.exists()


# -- refusing bad input on write ------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "match"),
    [
        (None, "empty snapshot"),
        ({}, "empty snapshot"),
        ({"w": np.array([1, "x"], dtype=object)}, r'state\["w"\]: array dtype object'),
        ({"t": [1, (2, 3)]}, r'state\["t"\]\[1\]: tuple'),
        ({"n": np.int64(3)}, r'state\["n"\]: int64'),
        ({"m": {1: 2}}, r'state\["m"\]: dict key 1 is int'),
        ({"s": {1, 2}}, "set cannot be stored"),
        ({"m": np.ma.masked_array([1])}, "ndarray subclass"),
    ],
)
def test_bad_state_is_refused_with_its_path(store_factory, state, match):
    store = store_factory()
    with pytest.raises(SnapshotError, match=match):
        store.write(state, model="nb", positions={}, events=0)
    assert store.ids() == []


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"model": ""}, "model must be"),
        ({"events": -1}, "events must be"),
        ({"events": True}, "events must be"),
        ({"config": {"x": math.nan}}, r"config\[\"x\"\]: nan"),
        ({"config": {"x": np.ones(1)}}, "ndarray is not allowed"),
        ({"positions": {"learn": {"0": -1}}}, r"positions\['learn'\]\['0'\]"),
        ({"positions": {"learn": {"0": 1.5}}}, "next offset int >= 0"),
        ({"positions": {"learn": 3}}, "expected str topic -> dict"),
    ],
)
def test_bad_metadata_is_refused(store_factory, overrides, match):
    store = store_factory()
    with pytest.raises(SnapshotError, match=match):
        write(store, **overrides)
    assert store.ids() == []


@pytest.mark.parametrize("bad_id", ["", "abc", "-1", 0, True, "٣"])
def test_bad_ids_are_refused(store_factory, bad_id):
    with pytest.raises(SnapshotError, match="snapshot id"):
        store_factory().load(bad_id)
