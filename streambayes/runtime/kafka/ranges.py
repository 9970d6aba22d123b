"""A bounded range of a Kafka topic for replay: ``kafka://HOST:PORT/TOPIC?from=…&to=…``.

Bounds apply per partition. ``from`` and ``to`` are each an offset (the same offset in every
partition: ``from=100`` skips the first 100 records *of each partition*) or an ISO-8601 time
(resolved per partition with ``offsets_for_times``, so a time range is the same moment
everywhere). ``from`` is inclusive (default: the beginning); ``to`` is exclusive (an offset, or
the first record at or after the time). Without ``to`` the range ends when every partition has
reached the end offsets and the topic has been quiet for ``idle_seconds`` (the end offsets of
some brokers lag one produce batch behind, so the quiet period, not the offsets alone, says the
end has come).

The records of several partitions are replayed in one order whatever the client and however
its fetches interleave: by timestamp, then partition, then offset (a k-way merge of the
partitions, each in offset order). A record is released once every partition that may still
deliver has a record buffered, or has reached its end offset; at most ``max_buffered`` records
wait (past it the earliest buffered record is released anyway, so memory stays bounded and the
order is then only as good as the fetches).

>>> parse_bound("42"), parse_bound("2026-11-20T10:00:00Z")
(42, 1795168800000)
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from datetime import UTC, datetime
from typing import Any

from streambayes.errors import UsageError
from streambayes.runtime.records.sources import Positions, Record


def parse_bound(text: str | None) -> int | None:
    """An offset as given, or an ISO-8601 time as milliseconds since the epoch; None if absent."""
    if text is None or text == "":
        return None
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"replay bound {text!r} is neither an offset nor an ISO-8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _is_time(text: str | None) -> bool:
    return text is not None and text != "" and not text.isdigit()


class KafkaRange:
    """Wraps an assigned Kafka source; ``poll`` returns ``[]`` only once the range is done."""

    def __init__(self, source: Any, start: str | None, end: str | None,
                 idle_seconds: float = 1.0, max_buffered: int = 100_000) -> None:
        self.source = source
        self.topic = source.topic
        self.idle_seconds = idle_seconds
        self.max_buffered = max_buffered
        self._stop: dict[int, int] | None = None
        self._open_ended: set[int] = set()
        self._wait_for_partitions()
        begin = source.beginning_offsets()
        if start is None or start == "":
            first = dict(begin)
        elif _is_time(start):
            found = source.offsets_for_time(parse_bound(start))
            ends = source.end_offsets()
            first = {p: (off if off is not None else ends[p]) for p, off in found.items()}
        else:
            first = {p: max(int(start), b) for p, b in begin.items()}
        if end is not None and end != "":
            if _is_time(end):
                found = source.offsets_for_time(parse_bound(end))
                self._stop = {p: off for p, off in found.items() if off is not None}
                self._open_ended = {p for p, off in found.items() if off is None}
            else:
                self._stop = {p: int(end) for p in source.assigned}
        source.seek({self.topic: {str(p): off for p, off in first.items()}})
        self._next = dict(first)  # next offset per partition, of the records released
        self._done: set[int] = {p for p in source.assigned
                                if self._stop is not None and p in self._stop
                                and first[p] >= self._stop[p]}
        self._buffer: dict[int, deque[Record]] = {p: deque() for p in source.assigned}
        self._buffered = 0
        self._at_end: set[int] = set()  # partitions read up to the end offsets last asked
        self._ends_asked = 0.0

    def _wait_for_partitions(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.source.assigned:
            if time.monotonic() >= deadline:
                raise UsageError(f"topic {self.topic!r} does not exist or has no partitions")
            time.sleep(0.1)
            self.source.refresh()

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        quiet_since = time.monotonic()
        while True:
            out = self._release(max_records, final=False)
            if out:
                return out
            if self._stop is not None and len(self._done) == len(self.source.assigned) \
                    and not self._open_ended:
                return self._release(max_records, final=True)
            records = self.source.poll(max_records, timeout=0.2)
            self._take(records)
            if self._buffered and self._blocked():
                self._refresh_ends()  # a partition with nothing more to give stops blocking
            if records:
                quiet_since = time.monotonic()
                continue
            if time.monotonic() - quiet_since >= self.idle_seconds:
                if self._caught_up():
                    return self._release(max_records, final=True)
                quiet_since = time.monotonic()

    def _take(self, records: list[Record]) -> None:
        """Buffer the records inside the range; note the partitions that reached ``to``."""
        for r in records:
            if r.partition in self._done or r.partition not in self._buffer:
                continue
            if self._stop is not None and r.partition in self._stop:
                if r.offset + 1 >= self._stop[r.partition]:
                    self._done.add(r.partition)
                if r.offset >= self._stop[r.partition]:
                    continue
            self._buffer[r.partition].append(r)
            self._buffered += 1

    def _blocked(self) -> bool:
        """Some partition that may still deliver has nothing buffered."""
        return any(not q and p not in self._done and p not in self._at_end
                   for p, q in self._buffer.items())

    def _refresh_ends(self, every: float = 0.2) -> None:
        """Mark the partitions read up to their end offsets (asked at most every ``every`` s)."""
        now = time.monotonic()
        if now - self._ends_asked < every:
            return
        self._ends_asked = now
        ends = self.source.end_offsets()
        read = self.source.positions().get(self.topic, {})
        self._at_end = {p for p, end in ends.items() if int(read.get(str(p), self._next.get(p, 0))) >= end}

    def _release(self, max_records: int, final: bool) -> list[Record]:
        """Up to ``max_records`` buffered records in (timestamp, partition, offset) order, while
        every partition that may still deliver has a head (all of them when ``final``)."""
        out: list[Record] = []
        heads = [(_order(q[0]), p) for p, q in self._buffer.items() if q]
        heapq.heapify(heads)
        while heads and len(out) < max_records:
            if not final and self._buffered <= self.max_buffered and self._blocked():
                break
            _, p = heapq.heappop(heads)
            record = self._buffer[p].popleft()
            self._buffered -= 1
            self._next[p] = record.offset + 1
            out.append(record)
            if self._buffer[p]:
                heapq.heappush(heads, (_order(self._buffer[p][0]), p))
        return out

    def _caught_up(self) -> bool:
        ends = self.source.end_offsets()
        mine = self.source.positions().get(self.topic, {})
        begin = self.source.beginning_offsets()
        return all(int(mine.get(str(p), begin.get(p, 0))) >= end for p, end in ends.items())

    def positions(self) -> Positions:
        """The next offset per partition of the records released so far."""
        return {self.topic: {str(p): off for p, off in sorted(self._next.items())}}

    def seek(self, positions: Any) -> None:
        raise UsageError("a replay range is fixed by its from/to bounds")

    def close(self) -> None:
        self.source.close()


def _order(record: Record) -> tuple[int, int, int]:
    return (record.timestamp if record.timestamp is not None else 0, record.partition, record.offset)
