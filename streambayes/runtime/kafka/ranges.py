"""A bounded range of a Kafka topic for replay: ``kafka://HOST:PORT/TOPIC?from=…&to=…``.

``from`` and ``to`` are each an offset (the same for every partition) or an ISO-8601 time
(resolved per partition with ``offsets_for_times``). ``from`` is inclusive (default: the
beginning); ``to`` is exclusive (an offset, or the first record at or after the time). Without
``to`` the range ends when every partition has reached the end offsets and the topic has been
quiet for ``idle_seconds`` (the end offsets of some brokers lag one produce batch behind, so the
quiet period, not the offsets alone, says the end has come).

>>> parse_bound("42"), parse_bound("2026-11-20T10:00:00Z")
(42, 1795168800000)
"""

from __future__ import annotations

import time
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
                 idle_seconds: float = 1.0) -> None:
        self.source = source
        self.topic = source.topic
        self.idle_seconds = idle_seconds
        self._stop: dict[int, int] | None = None
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
                self._open_ended = set()
        source.seek({self.topic: {str(p): off for p, off in first.items()}})
        self._done: set[int] = {p for p in source.assigned
                                if self._stop is not None and p in self._stop
                                and first[p] >= self._stop[p]}

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
            if self._stop is not None and len(self._done) == len(self.source.assigned) \
                    and not self._open_ended:
                return []
            records = self.source.poll(max_records, timeout=0.2)
            out = [r for r in records if r.partition not in self._done and
                   (self._stop is None or r.partition not in self._stop
                    or r.offset < self._stop[r.partition])]
            if self._stop is not None:
                for r in records:
                    if r.partition in self._stop and r.offset + 1 >= self._stop[r.partition]:
                        self._done.add(r.partition)
            if out:
                return out
            if not records and time.monotonic() - quiet_since >= self.idle_seconds:
                if self._caught_up():
                    return []
                quiet_since = time.monotonic()

    def _caught_up(self) -> bool:
        ends = self.source.end_offsets()
        mine = self.source.positions().get(self.topic, {})
        begin = self.source.beginning_offsets()
        return all(int(mine.get(str(p), begin.get(p, 0))) >= end for p, end in ends.items())

    def positions(self) -> Positions:
        return self.source.positions()

    def seek(self, positions: Any) -> None:
        raise UsageError("a replay range is fixed by its from/to bounds")

    def close(self) -> None:
        self.source.close()
