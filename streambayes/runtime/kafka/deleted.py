"""Records a predictor group owed its members but the topic no longer holds, reported as the
client resets past them.

A predictor group resumes each partition at the group's committed offset, and a running member
fetches on from its position. When retention (or DeleteRecords) deleted records from there on
before any member read them (the predictors were down, or behind, longer than the topic keeps
records), the fetch is out of range and the client goes on from where the partition now begins
(``auto.offset.reset=earliest``): those events get no posterior. Each client says so itself, and
the source warns about the offsets in between and counts them (``deleted``):

- kafka-python: its reset, hooked, :func:`~.kafka_python.report_resets_past_deleted`;
- confluent: librdkafka's own warning of the reset (``OFFSET``: ``<topic> [<p>]: offset reset
  (at offset <fetched> ...) to ... BEGINNING ...``), read here by :class:`LoggedResets`, which
  the member's client logs to (on the member's thread, inside its ``consume``); the first record
  read past the fetched offset, with the partition's start as the fetches since saw it, says
  where the gap ends. No question to the broker, no thread, no client of its own (until stop 36
  a second consumer per member asked the group's committed offsets at each assignment, and only
  a group resuming was reported).

Not reported: a reset to the end (``latest``), a reset below the fetched offset (a truncated or
recreated log), offsets between the partition's start and its first record (transaction markers,
compaction).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

logger = logging.getLogger(__name__)

# librdkafka's rd_kafka_offset_reset warning; the fetch position is "offset N (leader epoch E)"
_RESET = re.compile(r"\[(\d+)\]: offset reset \(at offset (\d+)\b.*?\) to (?:cached BEGINNING|offset "
                    r"BEGINNING)")
# librdkafka's syslog levels as confluent-kafka hands them to a logger (0-2 critical ... 7 debug)
_PY_LEVEL = {0: logging.CRITICAL, 1: logging.CRITICAL, 2: logging.CRITICAL, 3: logging.ERROR,
             4: logging.WARNING, 5: logging.INFO, 6: logging.INFO, 7: logging.DEBUG}
RESET_LOG_LEVEL = 4  # librdkafka logs the reset as a warning: the member's client logs from there


def warn_deleted(topic: str, partition: int, fetched: int, start: int,
                 resumes: int | None = None) -> None:
    """The warning that offsets ``fetched`` to ``start - 1`` of ``topic[partition]`` were deleted
    before the group's predictor read them (it resumes at ``resumes``, default ``start``)."""
    logger.warning("%s[%d]: offsets %d-%d were deleted from the topic (retention or DeleteRecords) "
                   "before this group's predictor read them: their events got no posterior; it "
                   "resumes at %d", topic, partition, fetched, start - 1,
                   start if resumes is None else resumes)


class LoggedResets:
    """A confluent-kafka ``logger`` for one member's client (see the module doc): every line goes
    on to ``forward`` at ``shown`` and above (the level the member's lines had before: the reset
    warning needs ``log_level`` 4, the member shows critical lines only unless asked); the resets
    of ``topic`` to its beginning are kept until :meth:`seen` finds where they landed."""

    def __init__(self, topic: str, forward: logging.Logger, shown: int) -> None:
        self.topic = topic
        self.deleted = 0  # offsets reported
        self._forward = forward
        self._shown = shown
        self._mark = f"{topic} ["
        self._owed: dict[int, int] = {}  # partition -> the offset its fetch failed at

    def log(self, level: int, msg: str, *args: Any) -> None:
        """confluent-kafka's call: ``log(level, "%s [%s] %s", facility, client, line)``."""
        if (level >= logging.WARNING and len(args) == 3 and args[0] == "OFFSET"
                and self._mark in str(args[2])):  # (a debug line says a reset with no error)
            self._reset(str(args[2]))
        if level >= self._shown:
            self._forward.log(level, msg, *args)

    def _reset(self, line: str) -> None:
        i = line.find(self._mark)
        found = _RESET.match(line, i + len(self.topic) + 1)
        if found is not None:  # the earliest offset kept: a second reset before a record lands
            self._owed.setdefault(int(found[1]), int(found[2]))
        elif "offset reset" in line and "BEGINNING" in line:
            logger.info("offsets of %s deleted before they were read cannot be told from "
                        "librdkafka's line: %s", self.topic, line)

    @property
    def owed(self) -> bool:
        """Whether a reset still waits for its partition's first record."""
        return bool(self._owed)

    def seen(self, records: Iterable[Any], start: Callable[[int], int | None]) -> None:
        """Where the resets landed: the first record of each reset partition at or past the offset
        fetched (records below it were fetched before the reset), ``start(p)`` the partition's
        first offset as the client's fetches saw it (None: unknown, the record alone says)."""
        firsts: dict[int, int] = {}
        owed = self._owed
        for r in records:
            fetched = owed.get(r.partition)
            if fetched is not None and r.offset >= fetched and r.partition not in firsts:
                firsts[r.partition] = r.offset
        for p, first in firsts.items():
            fetched = owed.pop(p)
            begins = start(p)
            gone = first if begins is None or begins < 0 else min(int(begins), first)
            if gone > fetched:
                self.deleted += gone - fetched
                warn_deleted(self.topic, p, fetched, gone, first)

    def forget(self, kept: Mapping[int, Any] | Iterable[int]) -> None:
        """Partitions no longer the member's: a reset of theirs is the next owner's to see."""
        keep = set(kept)
        for p in [p for p in self._owed if p not in keep]:
            del self._owed[p]


def shown_level(config: Mapping[str, Any]) -> int:
    """The Python level from which a client's librdkafka lines are shown (its ``log_level``)."""
    return _PY_LEVEL.get(int(config.get("log_level", 6)), logging.DEBUG)
