"""Sinks (DESIGN §4): ``send(topic, key, value)`` and ``flush()``; a JSONL file and memory.

Values may be bytes, str, a mapping (written as compact UTF-8 JSON) or a pydantic model.

>>> sink = MemorySink()
>>> sink.send("posteriors", "user-42", {"id": "m-1", "posterior": {"spam": 0.9}})
>>> rec = sink.topics["posteriors"][0]
>>> rec.key, rec.value, rec.offset
(b'user-42', b'{"id":"m-1","posterior":{"spam":0.9}}', 0)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from streambayes.runtime.sources import Record


class Sink(Protocol):
    """What the loops write posteriors and dead letters to."""

    def send(self, topic: str, key: str | bytes | None, value: Any) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


def to_bytes(value: Any) -> bytes:
    """Serialize a sink value: bytes as is, str as UTF-8, models and mappings as compact JSON.

    >>> to_bytes({"a": "£"}), to_bytes("x")
    (b'{"a":"\\xc2\\xa3"}', b'x')
    """
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, BaseModel):
        return value.model_dump_json().encode("utf-8")
    if isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    raise TypeError(f"cannot send a {type(value).__name__}: expected bytes, str, dict or model")


def key_bytes(key: str | bytes | None) -> bytes | None:
    return key.encode("utf-8") if isinstance(key, str) else key


class FileSink:
    """One JSON value per line in a file; the topic is not written (one file, one stream).

    The file is created at the first ``send`` (``mode="w"`` truncates it then, ``"a"`` appends),
    so a run with nothing to write leaves no file behind. ``count`` is the lines sent.
    """

    def __init__(self, path: str | Path, mode: Literal["w", "a"] = "a") -> None:
        self.path = Path(path)
        self.mode = mode
        self.count = 0
        self._file: Any = None

    def send(self, topic: str, key: str | bytes | None, value: Any) -> None:
        data = to_bytes(value)
        if b"\n" in data:
            raise ValueError(f"{self.path}: a JSONL line cannot contain a newline")
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, self.mode + "b")  # noqa: SIM115  (closed by close())
        self._file.write(data + b"\n")
        self.count += 1

    def flush(self) -> None:
        """Push written lines to the operating system and to disk."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self.flush()
            self._file.close()
            self._file = None

    def __enter__(self) -> FileSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MemorySink:
    """Keeps sent values as :class:`Record` lists per topic, readable by a ``MemorySource``.

    Share the dict to read back what was sent: ``MemorySource(sink.topics)``.
    """

    def __init__(self, topics: dict[str, list[Record]] | None = None) -> None:
        self.topics: dict[str, list[Record]] = topics if topics is not None else {}
        self.flushes = 0

    def send(self, topic: str, key: str | bytes | None, value: Any) -> None:
        records = self.topics.setdefault(topic, [])
        stamp = int(time.time() * 1000)
        records.append(Record(to_bytes(value), key_bytes(key), topic, 0, len(records), stamp))

    def values(self, topic: str) -> list[bytes]:
        """The values sent to ``topic``, in order."""
        return [r.value for r in self.topics.get(topic, [])]

    def flush(self) -> None:
        self.flushes += 1

    def close(self) -> None:
        """Nothing to release."""
