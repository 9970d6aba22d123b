"""The bytes of one snapshot: a preamble line, a JSON header, an npz archive of arrays.

Layout (format version 1)::

    STREAMBAYES-SNAPSHOT 1 <header length in bytes>\\n
    <header: compact UTF-8 JSON object, keys in insertion order>
    <arrays: an .npz zip archive written by numpy without pickle, to the end of the file>

The header holds ``schema_version``, ``id``, ``model``, ``config``, ``positions`` (topic ->
{partition: NEXT offset}), ``events``, ``created_at`` (ISO 8601 UTC), ``writer``, ``arrays``
(``count`` and ``bytes`` of the archive), ``skeleton`` (see :mod:`.codec`) and ``checksum``: the
sha256 hex digest of the compact JSON of the header without ``checksum``, then the archive bytes.
Key order is kept (a learner may rely on dict order), so re-serializing a parsed header
reproduces its bytes exactly.

Reading verifies before it decodes: preamble, length, checksum, header field types, then the
archive's member list and each member's dtype (read from the .npy headers, no data); only then are
arrays loaded, with ``np.load(..., allow_pickle=False)``. Nothing here can unpickle or evaluate.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from streambayes import __version__
from streambayes.errors import CorruptSnapshot, SnapshotError
from streambayes.snapshot.codec import array_refs, check_plain_json, decode_state, encode_state

MAGIC = b"STREAMBAYES-SNAPSHOT"
FORMAT_VERSION = 1
_PREAMBLE_MAX = 64
_FIELDS: dict[str, type] = {
    "schema_version": int, "id": str, "model": str, "config": dict, "positions": dict,
    "events": int, "created_at": str, "writer": str, "arrays": dict, "checksum": str,
}  # fmt: skip


def pack(
    state: Mapping[str, Any],
    *,
    snapshot_id: str,
    model: str,
    config: Mapping[str, Any],
    positions: Mapping[str, Mapping[str | int, int]],
    events: int,
    created_at: str,
    compress: bool = False,
) -> tuple[bytes, dict[str, Any]]:
    """Encode one snapshot; returns its bytes and its header. Raises SnapshotError on bad input."""
    if not isinstance(model, str) or not model:
        raise SnapshotError(f"model must be a non-empty str, got {model!r}")
    if not isinstance(config, Mapping):
        raise SnapshotError(f"config must be a dict, got {type(config).__name__}")
    check_plain_json(config, "config")
    positions = normalize_positions(positions)
    if type(events) is not int or events < 0:
        raise SnapshotError(f"events must be an int >= 0, got {events!r}")
    skeleton, arrays = encode_state(state)
    archive = _archive_bytes(arrays, compress)
    header: dict[str, Any] = {
        "schema_version": FORMAT_VERSION, "id": snapshot_id, "model": model,
        "config": dict(config), "positions": positions, "events": events,
        "created_at": created_at, "writer": f"streambayes {__version__}",
        "arrays": {"count": len(arrays), "bytes": len(archive)}, "skeleton": skeleton,
    }  # fmt: skip
    header["checksum"] = _checksum(header, archive)
    body = compact_json(header)
    preamble = b"%s %d %d\n" % (MAGIC, FORMAT_VERSION, len(body))
    return preamble + body + archive, header


def read_header(data: bytes) -> dict[str, Any]:
    """The verified header of a snapshot's bytes, without loading any array."""
    header, archive = _split(data)
    _verify(header, archive)
    return header


def unpack(data: bytes) -> tuple[dict[str, Any], Any]:
    """Verify a snapshot's bytes, then decode them: returns ``(header, state)``."""
    header, archive = _split(data)
    _verify(header, archive)
    names = array_refs(header["skeleton"])
    try:
        with np.load(io.BytesIO(archive), allow_pickle=False) as npz:
            if not isinstance(npz, np.lib.npyio.NpzFile):
                raise CorruptSnapshot("arrays section is not an npz archive")
            arrays = {name: npz[name] for name in names}
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise CorruptSnapshot(f"cannot load arrays: {exc}") from exc
    return header, decode_state(header["skeleton"], arrays)


def normalize_positions(positions: Mapping[str, Mapping[str | int, int]]) -> dict:
    """Check ``{topic: {partition: next_offset}}`` and return a copy with str partition keys."""
    if not isinstance(positions, Mapping):
        raise SnapshotError(f"positions must be a dict topic -> {{partition: offset}}, got {positions!r}")
    out: dict[str, dict[str, int]] = {}
    for topic, parts in positions.items():
        if not isinstance(topic, str) or not isinstance(parts, Mapping):
            raise SnapshotError(f"positions[{topic!r}]: expected str topic -> dict, got {parts!r}")
        out[topic] = {}
        for partition, offset in parts.items():
            if type(partition) not in (str, int) or type(offset) is not int or offset < 0:
                raise SnapshotError(
                    f"positions[{topic!r}][{partition!r}]: expected partition str|int -> "
                    f"next offset int >= 0, got {offset!r}"
                )
            out[topic][str(partition)] = offset
    return out


def compact_json(value: Any) -> bytes:
    """Deterministic strict JSON bytes: keys in order, no spaces, UTF-8, NaN refused."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


def _archive_bytes(arrays: dict[str, np.ndarray], compress: bool) -> bytes:
    buffer = io.BytesIO()
    save = np.savez_compressed if compress else np.savez
    save(buffer, allow_pickle=False, **arrays)
    return buffer.getvalue()


def _checksum(header: Mapping[str, Any], archive: bytes) -> str:
    digest = hashlib.sha256(compact_json({k: v for k, v in header.items() if k != "checksum"}))
    digest.update(archive)
    return digest.hexdigest()


def _split(data: bytes) -> tuple[dict[str, Any], bytes]:
    """Preamble + header JSON; the rest is the archive. No verification yet."""
    end = data.find(b"\n", 0, _PREAMBLE_MAX)
    fields = data[:end].split(b" ") if end >= 0 else []
    if len(fields) != 3 or fields[0] != MAGIC or not (fields[1] + fields[2]).isdigit():
        got = data[: min(len(data), _PREAMBLE_MAX)]
        raise CorruptSnapshot(f"not a snapshot (or truncated): expected '{MAGIC.decode()} 1 N', got {got!r}")
    version, size = int(fields[1]), int(fields[2])
    if version != FORMAT_VERSION:
        raise SnapshotError(
            f"unsupported snapshot format version {version}; this build reads {FORMAT_VERSION}"
        )
    start = end + 1
    if start + size > len(data):
        raise CorruptSnapshot(f"truncated: header needs {size} bytes, {len(data) - start} present")
    try:
        header = json.loads(data[start : start + size].decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CorruptSnapshot(f"header is not valid JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise CorruptSnapshot(f"header must be a JSON object, got {type(header).__name__}")
    return header, data[start + size :]


def _verify(header: dict[str, Any], archive: bytes) -> None:
    declared = header.get("arrays", {}).get("bytes") if isinstance(header.get("arrays"), dict) else None
    if isinstance(declared, int) and len(archive) < declared:
        raise CorruptSnapshot(f"truncated: arrays need {declared} bytes, {len(archive)} present")
    expected, actual = header.get("checksum"), _checksum(header, archive)
    if not isinstance(expected, str) or not hmac.compare_digest(expected, actual):
        raise CorruptSnapshot(f"checksum mismatch: header says {expected!r}, content hashes to {actual!r}")
    for field, kind in _FIELDS.items():
        if not isinstance(header.get(field), kind) or isinstance(header.get(field), bool):
            raise CorruptSnapshot(
                f"header field {field!r}: expected {kind.__name__}, got {header.get(field)!r}"
            )
    if "skeleton" not in header:
        raise CorruptSnapshot("header field 'skeleton' is missing")
    try:
        normalize_positions(header["positions"])
    except SnapshotError as exc:
        raise CorruptSnapshot(str(exc)) from exc
    _check_archive(archive, array_refs(header["skeleton"]))


def _check_archive(archive: bytes, names: list[str]) -> None:
    """Member list must match the skeleton's references; no member may hold Python objects."""
    if not all(isinstance(name, str) for name in names) or len(set(names)) != len(names):
        raise CorruptSnapshot(f"skeleton array references are not unique names: {names!r}")
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as zf:
            members = zf.namelist()
            if sorted(members) != sorted(f"{name}.npy" for name in names):
                raise CorruptSnapshot(f"archive holds {sorted(members)}, skeleton references {sorted(names)}")
            for member in members:
                with zf.open(member) as fh:
                    dtype = _npy_dtype(fh)
                if dtype.hasobject:
                    raise CorruptSnapshot(
                        f"array {member[:-4]!r} has dtype {dtype} (Python objects); refusing "
                        "to load it, snapshots never unpickle"
                    )
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise CorruptSnapshot(f"arrays section is not a valid npz archive: {exc}") from exc


def _npy_dtype(fh: Any) -> np.dtype:
    """Read only the .npy header (a literal, parsed by numpy without evaluation)."""
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(fh)[2]
    if version in ((2, 0), (3, 0)):  # same layout; 3.0 only differs in the text encoding
        return np.lib.format.read_array_header_2_0(fh)[2]
    raise ValueError(f"unsupported .npy version {version}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")
