"""Where :class:`~streambayes.models.perkey.PerKeyModel` keeps the learners it does not hold live.

A spill store maps a key to the ``to_state()`` of that key's learner. The pure layer does no I/O,
so it only defines the protocol (:class:`SpillStore`) and an in-memory store that holds the states
*compactly* (:class:`MemorySpillStore`: every array's bytes zlib-compressed, so a learner whose
tables are mostly zeros costs a few KB). The disk-backed, versioned store used by
``learn --per-key`` and ``predict --per-key`` is :class:`streambayes.runtime.loops.spill.DiskSpillStore`.

A store is *durable* when its copies outlive the process and a snapshot may refer to them by a
manifest (key -> generation) instead of holding the states; a non-durable store's states are
written into the snapshot itself.

>>> import numpy as np
>>> store = MemorySpillStore()
>>> store.put("ann", {"counts": np.zeros(10_000), "alpha": 1.0})
>>> store.memory_bytes() < 1_000, store.get("ann")["counts"].shape, store.get("bob")
(True, (10000,), None)
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

#: Bytes counted for each key held, besides its compressed arrays (dict entry, small objects).
KEY_OVERHEAD = 200


@runtime_checkable
class SpillStore(Protocol):
    """Learner states by key, out of the live set. ``get`` does not remove (``delete`` does).

    A durable store also has ``flush()`` (make every ``put`` so far durable), ``manifest()``
    (key -> generation of its current copy) and ``load_manifest(manifest)`` (take a snapshot's
    manifest as the current copies)."""

    durable: bool

    def put(self, key: str, state: Mapping) -> None: ...

    def get(self, key: str) -> Mapping | None: ...

    def delete(self, key: str) -> None: ...

    def keys(self) -> Iterable[str]: ...

    def memory_bytes(self) -> int:
        """Bytes this store holds in memory (0 for the states a disk store keeps on disk)."""
        ...


@dataclass(frozen=True)
class _Packed:
    """One array as its zlib-compressed bytes, dtype and shape."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes


class MemorySpillStore:
    """States held in memory, each array's bytes zlib-compressed (level ``level``)."""

    durable = False

    def __init__(self, level: int = 1) -> None:
        self.level = level
        self._states: dict[str, tuple[Any, int]] = {}  # key -> (packed tree, its bytes)
        self._bytes = 0

    def put(self, key: str, state: Mapping) -> None:
        self.delete(key)
        sizes: list[int] = []
        packed = _pack(state, self.level, sizes)
        nbytes = sum(sizes) + KEY_OVERHEAD
        self._states[key] = (packed, nbytes)
        self._bytes += nbytes

    def get(self, key: str) -> Mapping | None:
        held = self._states.get(key)
        return None if held is None else _unpack(held[0])

    def delete(self, key: str) -> None:
        held = self._states.pop(key, None)
        if held is not None:
            self._bytes -= held[1]

    def keys(self) -> list[str]:
        return list(self._states)

    def memory_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._states)


def _pack(node: Any, level: int, sizes: list[int]) -> Any:
    if isinstance(node, np.ndarray):
        data = zlib.compress(np.ascontiguousarray(node).tobytes(), level)
        sizes.append(len(data))
        return _Packed(node.dtype.str, tuple(node.shape), data)
    if isinstance(node, Mapping):
        return {k: _pack(v, level, sizes) for k, v in node.items()}
    if isinstance(node, list):
        return [_pack(v, level, sizes) for v in node]
    return node  # JSON scalars: immutable


def _unpack(node: Any) -> Any:
    if isinstance(node, _Packed):
        flat = np.frombuffer(zlib.decompress(node.data), dtype=np.dtype(node.dtype))
        return flat.reshape(node.shape).copy()  # writable, owns its memory
    if isinstance(node, dict):
        return {k: _unpack(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_unpack(v) for v in node]
    return node
