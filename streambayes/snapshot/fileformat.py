"""The bytes of one snapshot: a preamble line, a JSON header, the arrays.

Layout (format version 2; version 1 is still read)::

    STREAMBAYES-SNAPSHOT 2 <header length in bytes>\\n
    <header: compact UTF-8 JSON object, keys in insertion order>
    <arrays: a safetensors buffer (version 1: an .npz zip archive), to the end of the file>

The header holds ``schema_version``, ``id``, ``model``, ``config``, ``positions`` (topic ->
{partition: NEXT offset}), ``events``, ``created_at`` (ISO 8601 UTC), ``writer``, ``arrays``
(``count`` and ``bytes`` of the arrays section; version 2 adds ``format`` and ``items``: each
array's numpy ``dtype``, ``shape`` and ``nbytes``), ``skeleton`` (see :mod:`.codec`) and ``checksum``:
the sha256 hex digest of the compact JSON of the header without ``checksum`` (and ``signature``),
then the arrays bytes. With a key, the writer adds ``signature``: ``hmac-sha256:`` and the HMAC of
the same bytes; a reader given a key refuses a snapshot without it or with another one.
Key order is kept (a learner may rely on dict order), so re-serializing a parsed header
reproduces its bytes exactly.

Reading verifies before it decodes: preamble, length, signature (with a key), checksum, header
field types, then the arrays' manifest against :class:`~.payload.ReadLimits` (names, dtypes,
shapes, sizes, total; see :mod:`.payload`); only then are arrays loaded, never more bytes than were
checked. Nothing here can unpickle or evaluate.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from streambayes import __version__
from streambayes.errors import CorruptSnapshot, SnapshotError
from streambayes.snapshot.codec import array_refs, check_plain_json, decode_state, encode_state
from streambayes.snapshot.payload import (
    ReadLimits,
    check_items,
    check_npz,
    read_npz,
    read_safetensors,
    write_safetensors,
)

MAGIC = b"STREAMBAYES-SNAPSHOT"
FORMAT_VERSION = 2
READ_VERSIONS = (1, 2)
_SIGNATURE = "hmac-sha256:"
_UNSIGNED = ("checksum", "signature")
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
    key: bytes | None = None,
    version: int = FORMAT_VERSION,
    compress: bool = False,
) -> tuple[bytes, dict[str, Any]]:
    """Encode one snapshot; returns its bytes and its header. Raises SnapshotError on bad input.

    ``key`` signs it (HMAC-SHA256). ``version=1`` (an npz, ``compress`` to deflate it) exists
    only to make old-format snapshots, e.g. for tests; version 2 is never compressed.
    """
    if not isinstance(model, str) or not model:
        raise SnapshotError(f"model must be a non-empty str, got {model!r}")
    if not isinstance(config, Mapping):
        raise SnapshotError(f"config must be a dict, got {type(config).__name__}")
    if version not in READ_VERSIONS or (compress and version != 1):
        raise SnapshotError(f"cannot write format version {version!r} (compress={compress})")
    check_plain_json(config, "config")
    positions = normalize_positions(positions)
    if type(events) is not int or events < 0:
        raise SnapshotError(f"events must be an int >= 0, got {events!r}")
    skeleton, arrays = encode_state(state)
    if version == 1:
        archive, manifest = _archive_bytes(arrays, compress), {}
    else:
        archive, items = write_safetensors(arrays)
        manifest = {"format": "safetensors", "items": items}
    header: dict[str, Any] = {
        "schema_version": version, "id": snapshot_id, "model": model,
        "config": dict(config), "positions": positions, "events": events,
        "created_at": created_at, "writer": f"streambayes {__version__}",
        "arrays": {"count": len(arrays), "bytes": len(archive), **manifest}, "skeleton": skeleton,
    }  # fmt: skip
    header["checksum"] = _checksum(header, archive)
    if key is not None:
        header["signature"] = _signature(header, archive, key)
    body = compact_json(header)
    preamble = b"%s %d %d\n" % (MAGIC, version, len(body))
    return preamble + body + archive, header


def read_header(data: bytes, *, limits: ReadLimits | None = None, key: bytes | None = None) -> dict[str, Any]:
    """The verified header of a snapshot's bytes, without loading any array."""
    return _verified(data, limits or ReadLimits(), key)[0]


def unpack(
    data: bytes, *, limits: ReadLimits | None = None, key: bytes | None = None
) -> tuple[dict[str, Any], Any]:
    """Verify a snapshot's bytes, then decode them: returns ``(header, state)``.

    Any failure to decode (a bad manifest, a short buffer, even ``MemoryError``) is a
    CorruptSnapshot: the caller falls back to an older snapshot.
    """
    limits = limits or ReadLimits()
    header, archive = _verified(data, limits, key)
    try:
        names = array_refs(header["skeleton"])
        if header["schema_version"] == 1:
            arrays = read_npz(archive, names, limits)
        else:
            arrays = read_safetensors(archive, header["arrays"].get("items"), names, limits)
        return header, decode_state(header["skeleton"], arrays)
    except SnapshotError:
        raise
    except (MemoryError, ValueError, TypeError, KeyError, RecursionError) as exc:
        raise CorruptSnapshot(f"cannot load arrays: {type(exc).__name__}: {exc}") from exc


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


def _signed_bytes(header: Mapping[str, Any]) -> bytes:
    return compact_json({k: v for k, v in header.items() if k not in _UNSIGNED})


def _checksum(header: Mapping[str, Any], archive: bytes) -> str:
    digest = hashlib.sha256(_signed_bytes(header))
    digest.update(archive)
    return digest.hexdigest()


def _signature(header: Mapping[str, Any], archive: bytes, key: bytes) -> str:
    mac = hmac.new(key, _signed_bytes(header), hashlib.sha256)
    mac.update(archive)
    return _SIGNATURE + mac.hexdigest()


def _verified(data: bytes, limits: ReadLimits, key: bytes | None) -> tuple[dict[str, Any], bytes]:
    header, archive = _split(data)
    try:
        _verify(header, archive, limits, key)
    except (RecursionError, MemoryError) as exc:  # a skeleton nested too deep, say
        raise CorruptSnapshot(f"header cannot be checked: {type(exc).__name__}: {exc}") from exc
    return header, archive


def _split(data: bytes) -> tuple[dict[str, Any], bytes]:
    """Preamble + header JSON; the rest is the archive. No verification yet."""
    end = data.find(b"\n", 0, _PREAMBLE_MAX)
    fields = data[:end].split(b" ") if end >= 0 else []
    if len(fields) != 3 or fields[0] != MAGIC or not (fields[1] + fields[2]).isdigit():
        got = data[: min(len(data), _PREAMBLE_MAX)]
        raise CorruptSnapshot(f"not a snapshot (or truncated): expected '{MAGIC.decode()} 2 N', got {got!r}")
    version, size = int(fields[1]), int(fields[2])
    if version not in READ_VERSIONS:
        raise SnapshotError(
            f"unsupported snapshot format version {version}; this build reads {READ_VERSIONS}"
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
    if header.get("schema_version") != version:
        raise CorruptSnapshot(f"preamble says format {version}, header says {header.get('schema_version')!r}")
    return header, data[start + size :]


def _verify(header: dict[str, Any], archive: bytes, limits: ReadLimits, key: bytes | None) -> None:
    declared = header.get("arrays", {}).get("bytes") if isinstance(header.get("arrays"), dict) else None
    if isinstance(declared, int) and len(archive) < declared:
        raise CorruptSnapshot(f"truncated: arrays need {declared} bytes, {len(archive)} present")
    if key is not None:
        _verify_signature(header, archive, key)
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
    names = array_refs(header["skeleton"])
    if not all(isinstance(name, str) for name in names) or len(set(names)) != len(names):
        raise CorruptSnapshot(f"skeleton array references are not unique names: {names!r}")
    if header["schema_version"] == 1:
        check_npz(archive, names, limits)
    else:
        if header["arrays"].get("format") != "safetensors":
            raise CorruptSnapshot(f"arrays format {header['arrays'].get('format')!r}, expected 'safetensors'")
        check_items(header["arrays"].get("items"), names, len(archive), limits)


def _verify_signature(header: dict[str, Any], archive: bytes, key: bytes) -> None:
    signature = header.get("signature")
    if not isinstance(signature, str):
        raise CorruptSnapshot("unsigned snapshot refused: a key is set (STREAMBAYES_SNAPSHOT_KEY)")
    if not hmac.compare_digest(signature, _signature(header, archive, key)):
        raise CorruptSnapshot("bad signature: the snapshot was altered, or signed with another key")


def _no_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")
