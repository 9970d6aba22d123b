"""The arrays section of a snapshot: safetensors (format 2, written) and npz (format 1, read only).

Format 2 stores the arrays as one `safetensors <https://github.com/huggingface/safetensors>`_
buffer: no code, no compression, a bounded header, and every tensor's offsets checked against the
buffer before anything is read. The snapshot header's ``arrays.items`` records each array's numpy
dtype, shape and byte size; the reader checks them (and their total against
:attr:`ReadLimits.max_bytes`) before it asks safetensors for a byte. Dtypes safetensors lacks
(complex128, big-endian, strings, datetimes) travel as raw ``U8`` bytes, their true dtype being
the one in the header, so every numeric numpy dtype still round-trips exactly.

Format 1 (an ``.npz`` zip) is still read, for snapshots already on disk, with the same bounds
checked from the zip directory and each ``.npy`` header before any array is allocated: plain
member names only (``a0.npy``), stored or deflated members only, declared shape x itemsize equal to
the member's size, a total under ``max_bytes``, and no member inflating more than
``max_ratio`` times its compressed size (beyond :data:`RATIO_FLOOR` bytes: a zip bomb).
"""

from __future__ import annotations

import io
import math
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import safetensors
import safetensors.numpy

from streambayes.errors import CorruptSnapshot, SnapshotError

DEFAULT_MAX_BYTES = 4 * 2**30
DEFAULT_MAX_RATIO = 100.0
RATIO_FLOOR = 2**20  # members up to 1 MiB are never refused for their compression ratio
_MAX_NDIM = 32
_PLAIN = re.compile(r"a\d{1,9}")
_KINDS = frozenset("biufcSUmM")  # numeric, bool, bytes, unicode, timedelta, datetime
# numpy dtype str -> safetensors dtype, for the dtypes stored as themselves
_NATIVE = {"|b1": "BOOL", "|i1": "I8", "|u1": "U8", "<i2": "I16", "<u2": "U16", "<i4": "I32",
           "<u4": "U32", "<i8": "I64", "<u8": "U64", "<f2": "F16", "<f4": "F32", "<f8": "F64",
           "<c8": "C64"}  # fmt: skip


@dataclass(frozen=True)
class ReadLimits:
    """Bounds a reader enforces before it allocates an array.

    ``max_bytes``: the largest snapshot file and the largest total of its arrays (uncompressed);
    a snapshot past it is refused as corrupt (the store falls back to the previous one).
    ``max_ratio``: a format-1 member inflating more than this many times its compressed size (and
    to more than :data:`RATIO_FLOOR` bytes) is refused as a zip bomb.
    """

    max_bytes: int = DEFAULT_MAX_BYTES
    max_ratio: float = DEFAULT_MAX_RATIO

    def __post_init__(self) -> None:
        if type(self.max_bytes) is not int or self.max_bytes < 1 or not self.max_ratio >= 1:
            raise ValueError(f"bad snapshot read limits: {self!r}")


def write_safetensors(arrays: Mapping[str, np.ndarray]) -> tuple[bytes, dict[str, dict]]:
    """The safetensors bytes of ``arrays`` and the ``items`` manifest for the snapshot header."""
    items: dict[str, dict] = {}
    tensors: dict[str, np.ndarray] = {}
    for name, array in arrays.items():
        if array.dtype.kind not in _KINDS or array.dtype.itemsize == 0:
            raise SnapshotError(f"array {name}: dtype {array.dtype} cannot be stored (numeric, bool, "
                                "string and datetime arrays only)")
        array = array if array.flags.c_contiguous else array.copy(order="C")  # keeps 0-d arrays 0-d
        items[name] = {"dtype": array.dtype.str, "shape": list(array.shape), "nbytes": array.nbytes}
        tensors[name] = array if array.dtype.str in _NATIVE else np.frombuffer(array.tobytes(), np.uint8)
    return safetensors.numpy.save(tensors), items


def read_safetensors(archive: bytes, items: Any, names: list[str], limits: ReadLimits) -> dict:
    """Check the manifest (names, dtypes, shapes, sizes, total), then load the arrays."""
    specs = check_items(items, names, len(archive), limits)
    try:
        views = safetensors.deserialize(archive)
    except Exception as exc:  # SafetensorError and anything the parser may raise
        raise CorruptSnapshot(f"arrays section is not a valid safetensors buffer: {exc}") from exc
    arrays = {}
    for name, view in views:
        if name not in specs:
            raise CorruptSnapshot(f"arrays section holds {name!r}, which the header does not list")
        dtype, shape = specs.pop(name)
        carrier = (_NATIVE[dtype.str], shape) if dtype.str in _NATIVE else ("U8", [_nbytes(dtype, shape)])
        if (view["dtype"], list(view["shape"])) != (carrier[0], list(carrier[1])):
            raise CorruptSnapshot(f"array {name}: stored as {view['dtype']}{view['shape']}, header "
                                  f"says {dtype.str}{shape}")
        arrays[name] = np.frombuffer(view["data"], dtype=dtype).reshape(tuple(shape))
    if specs:
        raise CorruptSnapshot(f"arrays section lacks {sorted(specs)}")
    return arrays


def read_npz(archive: bytes, names: list[str], limits: ReadLimits) -> dict:
    """Format 1: check the zip directory and the .npy headers against the limits, then load."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as zf:
            members = _checked_members(zf, names, limits)
            arrays = {}
            for info in members:
                with zf.open(info) as fh:
                    arrays[info.filename[:-4]] = np.lib.format.read_array(fh, allow_pickle=False)
            return arrays
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, NotImplementedError) as exc:
        raise CorruptSnapshot(f"arrays section is not a valid npz archive: {exc}") from exc


def check_npz(archive: bytes, names: list[str], limits: ReadLimits) -> None:
    """Format 1 manifest check only (member names, sizes, dtypes), no array data read."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as zf:
            _checked_members(zf, names, limits)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, NotImplementedError) as exc:
        raise CorruptSnapshot(f"arrays section is not a valid npz archive: {exc}") from exc


def check_items(items: Any, names: list[str], size: int, limits: ReadLimits) -> dict:
    """Format 2 manifest check: names, dtypes, shapes, byte sizes and their total; name -> (dtype, shape)."""
    if not isinstance(items, dict) or sorted(items) != sorted(names):
        got = sorted(items) if isinstance(items, dict) else items
        raise CorruptSnapshot(f"header arrays.items lists {got!r}, the skeleton references {sorted(names)}")
    specs, total = {}, 0
    for name, spec in items.items():
        if not _PLAIN.fullmatch(name):
            raise CorruptSnapshot(f"array name {name!r} is not a plain name like 'a0'")
        if not isinstance(spec, dict) or not isinstance(spec.get("dtype"), str):
            raise CorruptSnapshot(f"array {name}: bad manifest entry {spec!r}")
        dtype, shape = _dtype(spec["dtype"], name), _shape(spec.get("shape"), name)
        nbytes = _nbytes(dtype, shape)
        if spec.get("nbytes") != nbytes:
            raise CorruptSnapshot(f"array {name}: {dtype.str}{shape} is {nbytes} bytes, header says "
                                  f"{spec.get('nbytes')!r}")
        total += nbytes
        specs[name] = (dtype, shape)
    if total > limits.max_bytes:
        raise CorruptSnapshot(f"arrays total {total} bytes, over the limit of {limits.max_bytes} "
                              "(STREAMBAYES_SNAPSHOT_MAX_BYTES)")
    if total > size:
        raise CorruptSnapshot(f"arrays declare {total} bytes, the arrays section holds {size}")
    return specs


def _checked_members(zf: zipfile.ZipFile, names: list[str], limits: ReadLimits) -> list:
    infos = zf.infolist()
    members = [info.filename for info in infos]
    for member in members:
        if not (member.endswith(".npy") and _PLAIN.fullmatch(member[:-4])):
            raise CorruptSnapshot(f"archive member {member!r} is not a plain array name like 'a0.npy'")
    if sorted(members) != sorted(f"{name}.npy" for name in names):
        raise CorruptSnapshot(f"archive holds {sorted(members)}, skeleton references {sorted(names)}")
    total = 0
    for info in infos:
        total += _check_member_size(info, limits)
        if total > limits.max_bytes:
            raise CorruptSnapshot(f"arrays inflate to more than {limits.max_bytes} bytes, the limit "
                                  "(STREAMBAYES_SNAPSHOT_MAX_BYTES)")
    for info in infos:
        with zf.open(info) as fh:
            dtype, shape, start = _npy_header(fh)
        if dtype.hasobject or dtype.kind not in _KINDS:
            raise CorruptSnapshot(f"array {info.filename[:-4]!r} has dtype {dtype} (Python objects); "
                                  "refusing to load it, snapshots never unpickle")
        if len(shape) > _MAX_NDIM or any(n < 0 for n in shape):
            raise CorruptSnapshot(f"array {info.filename[:-4]!r}: bad shape {shape!r}")
        if start + _nbytes(dtype, shape) != info.file_size:
            raise CorruptSnapshot(f"array {info.filename[:-4]!r} declares {dtype.str}{list(shape)} "
                                  f"= {_nbytes(dtype, shape)} bytes; its member holds "
                                  f"{info.file_size - start}")
    return infos


def _check_member_size(info: zipfile.ZipInfo, limits: ReadLimits) -> int:
    name, size, packed = info.filename, info.file_size, info.compress_size
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) or info.flag_bits & 0x1:
        raise CorruptSnapshot(f"archive member {name!r}: compression {info.compress_type} is not allowed")
    if info.compress_type == zipfile.ZIP_STORED and size != packed:
        raise CorruptSnapshot(f"archive member {name!r}: stored {packed} bytes, declares {size}")
    if size > RATIO_FLOOR and size > limits.max_ratio * packed:
        raise CorruptSnapshot(f"archive member {name!r} inflates {packed} bytes to {size} (over "
                              f"{limits.max_ratio:g}x): refused as a zip bomb")
    if size > limits.max_bytes:
        raise CorruptSnapshot(f"archive member {name!r} inflates to {size} bytes, over the limit of "
                              f"{limits.max_bytes} (STREAMBAYES_SNAPSHOT_MAX_BYTES)")
    return size


def _npy_header(fh: Any) -> tuple[np.dtype, tuple[int, ...], int]:
    """Read only the .npy header (a literal, parsed by numpy without evaluation): dtype, shape, size."""
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
    elif version in ((2, 0), (3, 0)):  # same layout; 3.0 only differs in the text encoding
        shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
    else:
        raise ValueError(f"unsupported .npy version {version}")
    return dtype, tuple(shape), fh.tell()


def _dtype(text: str, name: str) -> np.dtype:
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError, SyntaxError) as exc:
        raise CorruptSnapshot(f"array {name}: bad dtype {text!r}") from exc
    if dtype.hasobject or dtype.kind not in _KINDS or dtype.str != text:
        raise CorruptSnapshot(f"array {name}: dtype {text!r} is not allowed in a snapshot")
    return dtype


def _shape(shape: Any, name: str) -> list[int]:
    if (not isinstance(shape, list) or len(shape) > _MAX_NDIM
            or not all(type(n) is int and n >= 0 for n in shape)):
        raise CorruptSnapshot(f"array {name}: bad shape {shape!r}")
    return shape


def _nbytes(dtype: np.dtype, shape: Any) -> int:
    return math.prod(int(n) for n in shape) * dtype.itemsize  # Python ints: no overflow
