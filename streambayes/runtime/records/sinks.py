"""Sinks (DESIGN §4): ``send(topic, key, value)`` and ``flush()``; a JSONL file and memory.

Values may be bytes, str, a mapping (written as compact UTF-8 JSON) or a pydantic model.

Every sink has a largest message it accepts (a file sink: ``max_line_bytes``; Kafka: the
producer's request size). A dead letter over it is truncated to fit by :func:`fit` (reason,
error, position and line kept; ``truncated``, the full payload's ``payload_bytes`` and
``payload_sha256`` added; as much of the payload's head as fits); any other value over it raises
:class:`MessageTooLarge` (the loops turn such a posterior into a dead letter).

>>> sink = MemorySink()
>>> sink.send("posteriors", "user-42", {"id": "m-1", "posterior": {"spam": 0.9}})
>>> rec = sink.topics["posteriors"][0]
>>> rec.key, rec.value, rec.offset
(b'user-42', b'{"id":"m-1","posterior":{"spam":0.9}}', 0)
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from streambayes.errors import BrokerError
from streambayes.runtime.records.events import DeadLetter, PosteriorJSON
from streambayes.runtime.records.sources import Record

DEFAULT_MAX_LINE_BYTES = 1_048_576


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
    if isinstance(value, bytes):  # a subclass (PosteriorJSON) as plain bytes: clients check type
        return value if type(value) is bytes else bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, BaseModel):
        return value.model_dump_json().encode("utf-8")
    if isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    raise TypeError(f"cannot send a {type(value).__name__}: expected bytes, str, dict or model")


def key_bytes(key: str | bytes | None) -> bytes | None:
    return key.encode("utf-8") if isinstance(key, str) else key


class MessageTooLarge(BrokerError):
    """A value (not a dead letter) is larger than its sink accepts; it was not sent."""


def original_payload(letter: DeadLetter) -> bytes:
    """The bytes of the record a dead letter is about (its payload decoded from base64 if so)."""
    if letter.payload_encoding == "base64":
        return base64.b64decode(letter.payload)
    return letter.payload.encode("utf-8")


def truncate_dead_letter(letter: DeadLetter, limit: int) -> bytes:
    """``letter`` as JSON of at most ``limit`` bytes: the payload's head only, with its full size,
    sha256 and ``truncated: true`` (an already truncated letter keeps its original size and hash).

    >>> from streambayes.runtime.records.events import SourcePosition
    >>> big = DeadLetter(reason="bad_json", error="e", payload="x" * 5000,
    ...                  source=SourcePosition(topic="t", partition=0, offset=7))
    >>> doc = json.loads(truncate_dead_letter(big, 1000))
    >>> doc["truncated"], doc["payload_bytes"], len(doc["payload"]) < 1000, doc["source"]["offset"]
    (True, 5000, True, 7)
    """
    if letter.truncated:
        size, digest = letter.payload_bytes, letter.payload_sha256
    else:
        raw = original_payload(letter)
        size, digest = len(raw), hashlib.sha256(raw).hexdigest()
    error = letter.error if len(letter.error) <= limit // 4 else letter.error[:limit // 4] + "..."
    shell = letter.model_copy(update={"payload": "", "error": error, "truncated": True,
                                      "payload_bytes": size, "payload_sha256": digest})
    if len(to_bytes(shell)) > limit:
        raise MessageTooLarge(f"a dead letter of {shell.source.topic}[{shell.source.partition}]@"
                              f"{shell.source.offset} does not fit in {limit} bytes even empty")
    step = 4 if letter.payload_encoding == "base64" else 1  # keep base64 decodable
    lo, hi = 0, len(letter.payload) // step  # the longest head (in steps) that fits: bisect
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(to_bytes(shell.model_copy(update={"payload": letter.payload[:mid * step]}))) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return to_bytes(shell.model_copy(update={"payload": letter.payload[:lo * step]}))


def fit(value: Any, limit: int | None, what: str = "the sink") -> bytes:
    """``value``'s bytes if they fit in ``limit``; a dead letter truncated to fit; else raise
    :class:`MessageTooLarge`."""
    data = to_bytes(value)
    if limit is None or len(data) <= limit:
        return data
    if isinstance(value, DeadLetter):
        return truncate_dead_letter(value, limit)
    kind = "Posterior" if isinstance(value, PosteriorJSON) else type(value).__name__
    raise MessageTooLarge(f"a {kind} of {len(data)} bytes is over the {limit} "
                          f"bytes {what} accepts")


class FileSink:
    """One JSON value per line in a file; the topic is not written (one file, one stream).

    The file is created at the first ``send`` (``mode="w"`` truncates it then, ``"a"`` appends),
    so a run with nothing to write leaves no file behind. ``count`` is the lines sent. A line
    is at most ``max_line_bytes`` (newline excluded): see :func:`fit`.
    """

    def __init__(self, path: str | Path, mode: Literal["w", "a"] = "a",
                 max_line_bytes: int | None = DEFAULT_MAX_LINE_BYTES) -> None:
        self.path = Path(path)
        self.mode = mode
        self.max_line_bytes = max_line_bytes
        self.count = 0
        self._file: Any = None

    def send(self, topic: str, key: str | bytes | None, value: Any) -> None:
        data = fit(value, self.max_line_bytes, f"a line of {self.path}")
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
