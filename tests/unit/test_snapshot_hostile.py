"""Crafted snapshots (issue 10): each one is refused without allocating 100 MB, and the previous
good snapshot is what the store, the learner and the predictor load.

Every crafted file carries a valid checksum (an attacker recomputes sha256 as easily as we do);
only a signing key (``STREAMBAYES_SNAPSHOT_KEY``) tells a tampered snapshot from a genuine one.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import logging
import tracemalloc
import zipfile
from collections.abc import Callable

import numpy as np
import pytest

from streambayes.models import make_model, model_from_state
from streambayes.runtime.loops.learn import LearnLoop
from streambayes.runtime.loops.predict import ModelWatcher
from streambayes.runtime.records.decode import Decoder
from streambayes.runtime.records.sources import MemorySource
from streambayes.snapshot import ReadLimits, SnapshotStore, encode_state, pack
from streambayes.snapshot.fileformat import compact_json

MB = 2**20
PEAK_LIMIT = 100 * MB
POSITIONS = {"t": {"0": 2}}
BOMB_BYTES = 200 * MB  # a deflated member of zeros: ~200 KB on disk


def _good_state() -> dict:
    model = make_model("nb")
    model.learn_many([{"text": "win a prize now"}, {"text": "see you at lunch"}], ["spam", "ham"])
    return model.to_state()


def _seal(header: dict, archive: bytes) -> bytes:
    """What an attacker does: a valid checksum over whatever header and arrays they chose."""
    header = {k: v for k, v in header.items() if k not in ("checksum", "signature")}
    header["checksum"] = hashlib.sha256(compact_json(header) + archive).hexdigest()
    body = compact_json(header)
    return b"STREAMBAYES-SNAPSHOT %d %d\n" % (header["schema_version"], len(body)) + body + archive


def _v1(members: dict[str, bytes], skeleton, compression: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return _v1_header(buffer.getvalue(), skeleton, len(members))


def _v1_header(archive: bytes, skeleton, count: int) -> bytes:
    header = {"schema_version": 1, "id": "000002", "model": "nb", "config": {}, "positions": POSITIONS,
              "events": 3, "created_at": "2026-01-01T00:00:00.000Z", "writer": "attacker",
              "arrays": {"count": count, "bytes": len(archive)}, "skeleton": skeleton}
    return _seal(header, archive)


def _npy(header: dict, payload: bytes = b"\0" * 16) -> bytes:
    fh = io.BytesIO()
    np.lib.format.write_array_header_1_0(fh, header)
    return fh.getvalue() + payload


def _split(data: bytes) -> tuple[dict, bytes]:
    preamble, rest = data.split(b"\n", 1)
    size = int(preamble.split()[2])
    return json.loads(rest[:size]), rest[size:]


def _v2(change: Callable[[dict], None], state: dict | None = None, archive: bytes | None = None) -> bytes:
    data, _ = pack(state or _good_state(), snapshot_id="000002", model="nb", config={},
                   positions=POSITIONS, events=3, created_at="2026-01-01T00:00:00.000Z")
    header, good_archive = _split(data)
    change(header)
    archive = good_archive if archive is None else archive
    header["arrays"]["bytes"] = len(archive)
    return _seal(header, archive)


def _bomb(size: int) -> bytes:
    """A format-1 snapshot whose one member inflates from ~size/1000 bytes to ``size``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        with zf.open("a0.npy", "w", force_zip64=True) as fh:
            header = {"descr": "|u1", "fortran_order": False, "shape": (size,)}
            np.lib.format.write_array_header_1_0(fh, header)
            chunk = bytes(4 * MB)
            for _ in range(size // len(chunk)):
                fh.write(chunk)
    return _v1_header(buffer.getvalue(), {"model": "nb", "w": {"__array__": "a0"}}, 1)


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return _bomb(BOMB_BYTES)


def _renamed(name: str) -> bytes:
    """A good nb state whose first array is stored under ``name`` (a path, not a plain name)."""
    skeleton, arrays = encode_state(_good_state())
    text = json.dumps(skeleton).replace('{"__array__": "a0"}', json.dumps({"__array__": name[:-4]}))
    members = {}
    for key, array in arrays.items():
        fh = io.BytesIO()
        np.lib.format.write_array(fh, array, allow_pickle=False)
        members[name if key == "a0" else f"{key}.npy"] = fh.getvalue()
    return _v1(members, json.loads(text))


def _bad_state(change: Callable[[dict], None]) -> Callable[[], dict]:
    def make() -> dict:
        state = copy.deepcopy(_good_state())
        change(state)
        return state

    return make


HUGE = {"descr": "<f8", "fortran_order": False, "shape": (100_000_000_000,)}  # 745 GiB
CRAFTED: dict[str, tuple[Callable[[], bytes], str]] = {
    "npy header claiming 745 GiB": (
        lambda: _v1({"a0.npy": _npy(HUGE)}, {"model": "nb", "w": {"__array__": "a0"}}), "declares <f8"),
    "npy header claiming a negative shape": (
        lambda: _v1({"a0.npy": _npy({**HUGE, "shape": (-2, -1)})}, {"w": {"__array__": "a0"}}),
        "bad shape"),
    "manifest claiming 745 GiB": (
        lambda: _v2(lambda h: h["arrays"]["items"]["a0"].update(shape=[10**11], nbytes=8 * 10**11)),
        "over the limit"),
    "manifest and buffer disagree": (
        lambda: _v2(lambda h: h["arrays"]["items"]["a2"].update(shape=[8, 2])), "header says <f8[8, 2]"),
    "safetensors header claiming 745 GiB": (
        lambda: _v2(lambda h: None, archive=_huge_safetensors()), "not a valid safetensors"),
    "an object dtype in the manifest": (
        lambda: _v2(lambda h: h["arrays"]["items"]["a0"].update(dtype="|O")), "not allowed"),
    "member name ../a0.npy": (lambda: _renamed("../a0.npy"), "not a plain array name"),
    "member name /tmp/a0.npy": (lambda: _renamed("/tmp/a0.npy"), "not a plain array name"),
    "member name C:/a0.npy": (lambda: _renamed("C:/a0.npy"), "not a plain array name"),
    "member name sub/../a0.npy": (lambda: _renamed("sub/../a0.npy"), "not a plain array name"),
    "member name ..\\a0.npy": (lambda: _renamed("..\\a0.npy"), "not a plain array name"),
    "array name ../a0 in a v2 manifest": (
        lambda: _v2(lambda h: h["arrays"]["items"].update({"../a0": h["arrays"]["items"]["a0"]})),
        "lists"),
}


def _huge_safetensors() -> bytes:
    meta = json.dumps({"a0": {"dtype": "F64", "shape": [10**11], "data_offsets": [0, 8 * 10**11]}}).encode()
    return len(meta).to_bytes(8, "little") + meta + b"\0" * 4096  # as long as the manifest needs


BAD_STATES = {
    "arrays of the wrong shape": _bad_state(
        lambda s: s["components"][0].__setitem__("counts", np.ones((3, 8)))),
    "a missing key": _bad_state(lambda s: s.pop("class_counts")),
    "an unknown model": _bad_state(lambda s: s.__setitem__("model", "nope")),
    "strings where counts belong": _bad_state(lambda s: s.__setitem__("class_counts", np.array(["a", "b"]))),
    "a wrong type": _bad_state(lambda s: s.__setitem__("params", [1, 2])),
}


def _store(tmp_path, **options) -> SnapshotStore:
    store = SnapshotStore(tmp_path / "snaps", **options)
    store.write(_good_state(), model="nb", positions=POSITIONS, events=2)
    return store


def _put(store: SnapshotStore, data: bytes, number: int = 2) -> None:
    store._path(number).write_bytes(data)


def _quietly(action: Callable[[], object]) -> object:
    """Run ``action`` and assert it allocated less than 100 MB at its peak."""
    tracemalloc.start()
    try:
        result = action()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < PEAK_LIMIT, f"peak allocation {peak / MB:.0f} MB"
    return result


def _refused_for_the_previous(store: SnapshotStore, caplog, reason: str) -> None:
    caplog.set_level(logging.WARNING)
    snap = _quietly(lambda: store.latest(model_from_state))
    assert snap is not None and snap.id == "000001" and snap.learner is not None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "000002" in warnings[0] and reason in warnings[0], warnings


@pytest.mark.parametrize("name", list(CRAFTED))
def test_crafted_snapshot_is_refused_for_the_previous_one(tmp_path, caplog, name):
    make, reason = CRAFTED[name]
    store = _store(tmp_path)
    _put(store, make())
    _refused_for_the_previous(store, caplog, reason)


def test_zip_bomb_is_refused_at_the_default_limits(tmp_path, caplog, bomb):
    store = _store(tmp_path)
    _put(store, bomb)
    _refused_for_the_previous(store, caplog, "zip bomb")


def test_zip_bomb_is_refused_by_the_size_cap_whatever_the_ratio(tmp_path, caplog, bomb):
    store = _store(tmp_path, limits=ReadLimits(max_bytes=64 * MB, max_ratio=1e9))
    _put(store, bomb)
    _refused_for_the_previous(store, caplog, "over the limit of 67108864")


def test_zip_bomb_past_the_default_cap_is_refused(tmp_path, caplog):
    """A bomb inflating past 4 GiB, its directory saying so: refused before inflating a byte."""
    huge = 5 * 2**30
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a0.npy", _npy({"descr": "|u1", "fortran_order": False, "shape": (64,)}, bytes(64)))
    archive = bytearray(buffer.getvalue())
    # the central directory's uncompressed size (offset 24 of the entry) now claims 5 GiB
    at = archive.rindex(b"PK\x01\x02")
    archive[at + 24 : at + 28] = (huge % 2**32).to_bytes(4, "little")
    store = _store(tmp_path)
    _put(store, _v1_header(bytes(archive), {"w": {"__array__": "a0"}}, 1))
    _refused_for_the_previous(store, caplog, "inflates")


def test_a_file_over_the_cap_is_not_even_read(tmp_path, caplog):
    store = _store(tmp_path, limits=ReadLimits(max_bytes=2 * MB))
    _put(store, b"STREAMBAYES-SNAPSHOT 2 10\n" + bytes(3 * MB))
    _refused_for_the_previous(store, caplog, "over the limit of 2097152")


@pytest.mark.parametrize("name", list(BAD_STATES))
def test_a_state_that_does_not_rebuild_is_skipped_by_the_store(tmp_path, caplog, name):
    store = _store(tmp_path)
    store.write(BAD_STATES[name](), model="nb", positions=POSITIONS, events=3)  # valid checksum
    _refused_for_the_previous(store, caplog, "does not rebuild a model")


@pytest.mark.parametrize("name", ["arrays of the wrong shape", "a missing key"])
def test_the_learner_restores_the_previous_snapshot(tmp_path, caplog, name):
    store = _store(tmp_path)
    store.write(BAD_STATES[name](), model="nb", positions={"t": {"0": 5}}, events=5)
    loop = LearnLoop(MemorySource({"t": []}), Decoder("jsonl"), store, lambda: make_model("nb"), None)
    _quietly(loop.restore)
    assert loop.stats.restored == "000001" and loop.events_total == 2
    assert loop.model.predict_proba_one({"text": "win a prize"})


@pytest.mark.parametrize("name", ["arrays of the wrong shape", "a missing key"])
def test_the_predictor_serves_the_previous_snapshot(tmp_path, name):
    store = _store(tmp_path)
    store.write(BAD_STATES[name](), model="nb", positions=POSITIONS, events=3)
    watcher = ModelWatcher([store])
    assert _quietly(watcher.check) and watcher.current.label == "000001"


def test_the_predictor_keeps_serving_when_a_newer_snapshot_is_crafted(tmp_path, bomb):
    store = _store(tmp_path)
    watcher = ModelWatcher([store])
    assert watcher.check() and watcher.current.label == "000001"
    _put(store, bomb)
    _put(store, _renamed("../a0.npy"), 3)
    assert _quietly(watcher.check) is False and watcher.current.label == "000001"


def test_snapshot_show_and_ls_skip_a_state_that_does_not_rebuild(tmp_path, capsys):
    from streambayes.cli import main

    store = _store(tmp_path)
    store.write(BAD_STATES["a missing key"](), model="nb", positions=POSITIONS, events=3)
    assert main(["snapshot", "show", str(store.directory)]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "000001"
    assert main(["snapshot", "ls", str(store.directory)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert " ok" in lines[0] and "CORRUPT" in lines[1] and "class_counts" in lines[1]


# -- signing ---------------------------------------------------------------------------------------

KEY = b"the right key"


def _tampered(data: bytes) -> bytes:
    header, archive = _split(data)
    header["events"] = 10**9
    signature = header["signature"]
    sealed = _seal(header, archive)
    header2, archive2 = _split(sealed)
    header2["signature"] = signature  # the old signature, a fresh checksum
    body = compact_json(header2)
    return b"STREAMBAYES-SNAPSHOT 2 %d\n" % len(body) + body + archive2


def _signed_by(key: bytes | None, tmp_path) -> bytes:
    other = SnapshotStore(tmp_path / "other", key=key)
    other.write(_good_state(), model="nb", positions=POSITIONS, events=3)
    other.write(_good_state(), model="nb", positions=POSITIONS, events=3)
    return other._path(2).read_bytes()


@pytest.mark.parametrize(("case", "reason"), [
    ("tampered", "bad signature"), ("another key", "bad signature"), ("unsigned", "unsigned snapshot"),
])
def test_a_key_refuses_tampered_foreign_and_unsigned_snapshots(tmp_path, caplog, case, reason):
    store = _store(tmp_path, key=KEY)
    data = {"tampered": lambda: _tampered(_signed_by(KEY, tmp_path)),
            "another key": lambda: _signed_by(b"another key", tmp_path),
            "unsigned": lambda: _signed_by(None, tmp_path)}[case]()
    _put(store, data)
    _refused_for_the_previous(store, caplog, reason)


def test_signed_snapshots_load_with_the_key_and_without_one(tmp_path):
    store = _store(tmp_path, key=KEY)
    assert _split(store._path(1).read_bytes())[0]["signature"].startswith("hmac-sha256:")
    assert store.latest(model_from_state).id == "000001"
    assert SnapshotStore(store.directory).latest(model_from_state).id == "000001"  # no key: as before


def test_the_key_comes_from_the_settings(tmp_path, monkeypatch, caplog):
    from streambayes.config import Settings
    from streambayes.runtime.loops.shards import open_stores

    monkeypatch.setenv("STREAMBAYES_SNAPSHOT_KEY", KEY.decode())
    monkeypatch.setenv("STREAMBAYES_SNAPSHOT_MAX_BYTES", str(64 * MB))
    settings = Settings()
    assert KEY.decode() not in repr(settings)
    (store,) = open_stores([tmp_path / "snaps"], settings)
    assert store.key == KEY and store.limits.max_bytes == 64 * MB
    store.write(_good_state(), model="nb", positions=POSITIONS, events=2)
    _put(store, _signed_by(None, tmp_path))
    _refused_for_the_previous(store, caplog, "unsigned snapshot")
