"""Sources of records (DESIGN §4): a file (JSONL, TSV, CSV) and an in-memory backend.

A source hands out :class:`Record` values with ``poll(max_records, timeout)``, tells where it
stands with ``positions()`` (topic → {partition as str → NEXT offset to read}) and resumes
anywhere with ``seek(positions)``. A file source has one partition, ``"0"``; its records are
numbered from 0 in file order (blank lines and, for CSV, the header row are not records), and
each record keeps its 1-based ``line`` number for dead letters. Files are read as bytes and
decoded record by record, so one bad byte sequence spoils only its own line.

>>> src = MemorySource({"events": [b'{"id": "a"}', b'{"id": "b"}']})
>>> [r.offset for r in src.poll(10)], src.positions()
([0, 1], {'events': {'0': 2}})
>>> src.seek({"events": {"0": 1}}); [r.value for r in src.poll(10)]
[b'{"id": "b"}']
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterator, Mapping, MutableSequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from streambayes.errors import UsageError

Format = Literal["jsonl", "tsv", "csv"]
FORMATS: tuple[Format, ...] = ("jsonl", "tsv", "csv")
Positions = dict[str, dict[str, int]]

_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class Record:
    """One raw record: the value's bytes and where it came from (Kafka's record shape)."""

    value: bytes
    key: bytes | None
    topic: str
    partition: int
    offset: int
    timestamp: int | None = None  # milliseconds since the epoch, when known
    line: int | None = None  # 1-based line number in a file source
    size: int | None = None  # the full size in bytes when ``value`` holds only the record's head


class Source(Protocol):
    """What the learn, predict and replay loops read from."""

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]: ...

    def positions(self) -> Positions: ...

    def seek(self, positions: Mapping[str, Mapping[str, int]]) -> None: ...

    def close(self) -> None: ...


def format_from_name(path: str | Path) -> Format:
    """The file format its name implies: ``.jsonl``/``.json`` → jsonl, ``.csv`` → csv, else tsv.

    >>> format_from_name("SMSSpamCollection"), format_from_name("x.JSONL"), format_from_name("a.csv")
    ('tsv', 'jsonl', 'csv')
    """
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    return "tsv"


class FileSource:
    """Records from a JSONL, TSV or CSV file; offset = record number, topic = the path as given.

    ``poll`` returns ``[]`` at the end of the file; with ``follow=True`` later polls return the
    lines appended since (``tail -f``; a line counts once its newline is written).
    For CSV the header row is read at open (:attr:`header`) and a quoted field may span lines.
    With ``max_line_bytes`` a longer line is never held in memory: its record holds the first
    ``max_line_bytes + 1`` bytes and its full ``size`` (the decoder makes it a ``limit`` dead letter).
    """

    def __init__(self, path: str | Path, fmt: Format | None = None, *, follow: bool = False,
                 max_line_bytes: int | None = None) -> None:
        self.path = Path(path)
        self.follow = follow
        self._read_limit = -1 if max_line_bytes is None else max_line_bytes + 1
        self.topic = str(path)
        self.format: Format = fmt or format_from_name(self.path)
        if self.format not in FORMATS:
            raise UsageError(f"unknown format {self.format!r} (expected one of {', '.join(FORMATS)})")
        if self.path.is_dir():
            raise UsageError(f"{self.path} is a directory, not a file")
        try:
            self._file = open(self.path, "rb")  # noqa: SIM115  (closed by close())
        except FileNotFoundError:
            raise UsageError(f"no such file: {self.path}") from None
        self.size_bytes = self.path.stat().st_size
        self.header: list[str] | None = None
        self._start()

    def _start(self) -> None:
        self._file.seek(0)
        self._line_number = 0
        self._lines = self._numbered_lines()
        self._next_offset = 0
        self.bytes_read = 0
        self._oversize: dict[int, tuple[int, int]] = {}  # line cut to its head → (bytes, content)
        if self.format == "csv":
            self.header = self._read_header()

    def _numbered_lines(self) -> Iterator[tuple[int, bytes]]:
        """Lines with their numbers; when following, a last line without its newline waits."""
        while raw := self._file.readline(self._read_limit):
            size, content = len(raw), None
            if size == self._read_limit and not raw.endswith(b"\n"):
                raw, size, content = self._skip_rest(raw)
                if not raw:
                    return  # following: the writer is mid-line
            if self.follow and not raw.endswith(b"\n"):
                self._file.seek(-len(raw), io.SEEK_CUR)  # a writer is mid-line: read it later
                return
            self._line_number += 1
            self.bytes_read += size
            if content is not None:
                self._oversize[self._line_number] = (size, content)
            if self._line_number == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM):]
            yield self._line_number, raw

    def _skip_rest(self, head: bytes) -> tuple[bytes, int, int]:
        """Read past the rest of an over-long line: (its head + newline, the bytes it takes, its
        size without the line end); when following and its newline is not written yet, go back
        to its start and return (b"", 0, 0)."""
        size = len(head)
        while chunk := self._file.readline(1 << 16):
            size += len(chunk)
            if chunk.endswith(b"\n"):
                return head + b"\n", size, size - len(chunk) + len(chunk.rstrip(b"\r\n"))
        if self.follow:
            self._file.seek(-size, io.SEEK_CUR)
            return b"", 0, 0
        return head + b"\n", size, size

    def _next_raw(self) -> tuple[int, bytes] | None:
        """The next non-blank logical record (a CSV record may span lines inside quotes)."""
        for number, raw in self._lines:
            if not raw.strip():
                continue
            if self.format == "csv":
                used = self._oversize.get(number, (len(raw), 0))[0]  # bytes the line took
                start = (self._file.tell() - used, number - 1, self.bytes_read - used)
                while raw.count(b'"') % 2:
                    more = next(self._lines, None)
                    if more is None:
                        if self.follow:  # the rest of the quoted field is not written yet
                            self._file.seek(start[0])
                            self._line_number, self.bytes_read = start[1], start[2]
                            return None
                        break
                    raw += more[1]
            return number, raw.rstrip(b"\r\n")
        return None

    def _read_header(self) -> list[str]:
        first = self._next_raw()
        if first is None:
            raise UsageError(f"{self.path}: CSV file is empty (expected a header row)")
        try:
            text = first[1].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"{self.path}: CSV header is not UTF-8 ({exc.reason})") from None
        return [name.strip() for name in next(csv.reader(io.StringIO(text)))]

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        """Up to ``max_records`` next records; ``[]`` at the end of the file.

        Never waits, unless following: then at the end it reads what was appended since, and
        sleeps ``timeout`` seconds when there is nothing new."""
        if self.follow:
            self._lines = self._numbered_lines()
        out: list[Record] = []
        while len(out) < max_records:
            item = self._next_raw()
            if item is None:
                break
            number, value = item
            cut = self._oversize.pop(number, None)
            out.append(Record(value, None, self.topic, 0, self._next_offset, None, number,
                              None if cut is None else cut[1]))
            self._next_offset += 1
        if self.follow and not out and timeout > 0:
            time.sleep(timeout)
        return out

    def positions(self) -> Positions:
        return {self.topic: {"0": self._next_offset}}

    def seek(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        """Continue from the next offset stored for this file (0 when it has none)."""
        target = int(positions.get(self.topic, {}).get("0", 0))
        if target < self._next_offset:
            self._start()
        while self._next_offset < target and self._next_raw() is not None:
            self._next_offset += 1

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> FileSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MemorySource:
    """Records from in-memory lists, one per topic, read in topic order; partition ``"0"``.

    The lists are read by reference, so values appended later (for example by a
    :class:`~streambayes.runtime.sinks.MemorySink` sharing the same dict) are seen by later polls.
    Items may be ``bytes``, ``str`` (UTF-8 encoded) or :class:`Record` (value, key, timestamp kept).
    """

    def __init__(
        self,
        topics: Mapping[str, MutableSequence[bytes | str | Record]] | None = None,
    ) -> None:
        self.topics = topics if topics is not None else {}
        self._next = {topic: 0 for topic in self.topics}

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        out: list[Record] = []
        for topic, items in self.topics.items():
            start = self._next.get(topic, 0)
            stop = min(len(items), start + max_records - len(out))
            out.extend(_as_record(items[i], topic, i) for i in range(start, stop))
            self._next[topic] = max(start, stop)
            if len(out) >= max_records:
                break
        return out

    def positions(self) -> Positions:
        return {topic: {"0": self._next.get(topic, 0)} for topic in self.topics}

    def seek(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        for topic in self.topics:
            self._next[topic] = int(positions.get(topic, {}).get("0", 0))

    def close(self) -> None:
        """Nothing to release."""


def _as_record(item: bytes | str | Record, topic: str, offset: int) -> Record:
    if isinstance(item, Record):
        return Record(item.value, item.key, topic, 0, offset, item.timestamp)
    value = item.encode("utf-8") if isinstance(item, str) else bytes(item)
    return Record(value, None, topic, 0, offset)
