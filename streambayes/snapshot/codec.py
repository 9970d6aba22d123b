"""Learner state <-> (JSON skeleton, named numpy arrays), the file-agnostic half of a snapshot.

A learner's ``to_state()`` is a tree of dicts (str keys), lists, JSON scalars and numpy arrays.
:func:`encode_state` walks it and swaps every array for a reference ``{"__array__": "a0"}``;
:func:`decode_state` swaps them back. Three one-key tags exist, and only these:

- ``{"__array__": "a3"}``: the array stored under the name ``a3``;
- ``{"__float__": "nan" | "inf" | "-inf"}``: a non-finite float, which strict JSON cannot hold
  (so NaN and infinities in the JSON parts round-trip rather than being refused);
- ``{"__dict__": {...}}``: a user dict whose single key happens to be one of the three tags,
  escaped so it is never mistaken for a tag.

Anything else (tuples, sets, numpy scalars other than float64, object arrays, non-str keys) is
refused with a :class:`~streambayes.errors.SnapshotError` naming its path, e.g.
``state["tables"][2]``: snapshots round-trip exactly or not at all. Arrays are not copied, and an
array that appears twice in the state is stored twice (aliasing is not preserved).

>>> import numpy as np
>>> skeleton, arrays = encode_state({"counts": np.zeros(2), "alpha": 1.0, "prior": float("inf")})
>>> skeleton
{'counts': {'__array__': 'a0'}, 'alpha': 1.0, 'prior': {'__float__': 'inf'}}
>>> decode_state(skeleton, arrays)["prior"]
inf
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from streambayes.errors import CorruptSnapshot, SnapshotError

ARRAY_TAG = "__array__"
FLOAT_TAG = "__float__"
DICT_TAG = "__dict__"
TAGS = frozenset({ARRAY_TAG, FLOAT_TAG, DICT_TAG})
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def encode_state(state: Any) -> tuple[Any, dict[str, np.ndarray]]:
    """Split ``state`` into a strict-JSON skeleton and the arrays it references by name."""
    arrays: dict[str, np.ndarray] = {}
    return _encode(state, "state", arrays), arrays


def decode_state(skeleton: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    """Rebuild what :func:`encode_state` split; unknown references raise CorruptSnapshot."""
    return _decode(skeleton, arrays, "state")


def check_plain_json(value: Any, path: str) -> None:
    """Raise SnapshotError unless ``value`` is strict JSON (finite floats, str keys, no arrays)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_key(key, path)
            check_plain_json(item, _child(path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_plain_json(item, f"{path}[{index}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise SnapshotError(f"{path}: {value!r} is not allowed here (strict JSON only)")
    elif not (value is None or isinstance(value, (bool, int, float, str))):
        raise SnapshotError(f"{path}: {type(value).__name__} is not allowed here (plain JSON only)")


def array_refs(skeleton: Any) -> list[str]:
    """The array names a skeleton references, in walk order."""
    refs: list[str] = []
    _collect_refs(skeleton, refs)
    return refs


def _encode(value: Any, path: str, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(value, np.ndarray):
        return _encode_array(value, path, arrays)
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            _check_key(key, path)
            out[key] = _encode(item, _child(path, key), arrays)
        return {DICT_TAG: out} if len(out) == 1 and next(iter(out)) in TAGS else out
    if isinstance(value, list):
        return [_encode(item, f"{path}[{index}]", arrays) for index, item in enumerate(value)]
    if isinstance(value, float):  # also np.float64, a float subclass
        return float(value) if math.isfinite(value) else {FLOAT_TAG: repr(float(value))}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    raise SnapshotError(
        f"{path}: {type(value).__name__} cannot be stored in a snapshot; expected dict, list, "
        "str, int, float, bool, None or a numpy array"
    )


def _encode_array(value: np.ndarray, path: str, arrays: dict[str, np.ndarray]) -> dict:
    if type(value) is not np.ndarray:
        raise SnapshotError(f"{path}: {type(value).__name__} is an ndarray subclass; use np.asarray")
    if value.dtype.hasobject:
        raise SnapshotError(
            f"{path}: array dtype {value.dtype} holds Python objects; snapshots store "
            "numeric arrays only (never pickle)"
        )
    name = f"a{len(arrays)}"
    arrays[name] = value
    return {ARRAY_TAG: name}


def _decode(node: Any, arrays: Mapping[str, np.ndarray], path: str) -> Any:
    if isinstance(node, list):
        return [_decode(item, arrays, f"{path}[{index}]") for index, item in enumerate(node)]
    if not isinstance(node, dict):
        return node
    if len(node) == 1 and next(iter(node)) in TAGS:
        ((tag, inner),) = node.items()
        if tag == ARRAY_TAG:
            if not isinstance(inner, str) or inner not in arrays:
                raise CorruptSnapshot(f"{path}: array reference {inner!r} is not in the archive")
            return arrays[inner]
        if tag == FLOAT_TAG:
            if inner not in _NON_FINITE:
                raise CorruptSnapshot(f"{path}: bad {FLOAT_TAG} value {inner!r}")
            return _NON_FINITE[inner]
        if not isinstance(inner, dict):
            raise CorruptSnapshot(f"{path}: {DICT_TAG} must wrap an object, got {inner!r}")
        node = inner
    return {key: _decode(item, arrays, _child(path, key)) for key, item in node.items()}


def _collect_refs(node: Any, refs: list[str]) -> None:
    if isinstance(node, list):
        for item in node:
            _collect_refs(item, refs)
    elif isinstance(node, dict):
        if len(node) == 1 and ARRAY_TAG in node:
            refs.append(node[ARRAY_TAG])
            return
        inner = node[DICT_TAG] if len(node) == 1 and isinstance(node.get(DICT_TAG), dict) else node
        for item in inner.values():
            _collect_refs(item, refs)


def _check_key(key: Any, path: str) -> None:
    if not isinstance(key, str):
        raise SnapshotError(f"{path}: dict key {key!r} is {type(key).__name__}, expected str")


def _child(path: str, key: str) -> str:
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"
