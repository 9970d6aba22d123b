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
    """A confluent-kafka ``logger`` for one member's client (see the module doc).

    Every line goes on to ``forward`` at ``shown`` and above (the level the member's lines had
    before: the reset warning needs ``log_level`` 4, a member shows critical lines only unless
    asked). A reset of ``topic`` past its fetch (out of range, to the beginning) on a partition
    the member holds (:meth:`assigned`, :meth:`revoked`, from its rebalance callbacks) is kept,
    in order with any further one, until :meth:`seen` finds the records it landed at.
    ``position(p)``: the next offset the member had read of ``p`` (None: none yet)."""

    def __init__(self, topic: str, forward: Any, shown: int,
                 position: Callable[[int], int | None] = lambda p: None) -> None:
        self.topic = topic
        self.deleted = 0  # offsets reported
        self._forward = forward
        self._shown = shown
        self._position = position
        self._line = re.compile(rf"(?:^|\s){re.escape(topic)} \[(\d+)\]: offset reset \(at offset "
                                r"(\d+)\b.*?\) to (?:cached BEGINNING|offset BEGINNING)\b.*"
                                r"Offset out of range")
        self._ours = re.compile(rf"(?:^|\s){re.escape(topic)} \[\d+\]: offset reset .*BEGINNING.*"
                                r"Offset out of range")
        self._held: set[int] = set()
        self._owed: dict[int, list[int]] = {}  # partition -> offsets its fetches failed at
        self._last: dict[int, int] = {}  # partition -> the last offset read since (or before)

    def log(self, level: int, msg: str, *args: Any) -> None:
        """confluent-kafka's call: ``log(level, "%s [%s] %s", facility, client, line)``."""
        if level >= logging.WARNING and len(args) == 3 and args[0] == "OFFSET":
            self._reset(str(args[2]))  # (a debug line says a reset with no error)
        if level >= self._shown:
            self._forward.log(level, msg, *args)

    def _reset(self, line: str) -> None:
        found = self._line.search(line)
        if found is None:
            if self._ours.search(line):  # a line of ours in a form not foreseen
                logger.info("offsets of %s deleted before they were read cannot be told from "
                            "librdkafka's line: %s", self.topic, line)
            return
        p, fetched = int(found[1]), int(found[2])
        if p not in self._held:  # served after the partition was taken: the next owner's
            return
        owed = self._owed.setdefault(p, [])
        if not owed:
            at = self._position(p)
            self._last[p] = -1 if at is None else at - 1
        if fetched not in owed:
            owed.append(fetched)
            owed.sort()

    @property
    def owed(self) -> bool:
        """Whether a reset still waits for its partition's records."""
        return bool(self._owed)

    def seen(self, records: Iterable[Any], start: Callable[[int], int | None]) -> None:
        """Where the resets landed, from the member's records in order: the first at or past an
        offset fetched closes that gap (records below it were fetched before the reset: the
        line of a reset can be served before records queued ahead of it), at ``start(p)``, the
        partition's first offset as the client's fetches saw it, if lower (None: unknown, the
        record alone says). A record below one read before it: the reset landed below the offset
        fetched (a truncated or recreated log), nothing was lost."""
        owed_by, last = self._owed, self._last
        for r in records:
            p = r.partition
            owed = owed_by.get(p)
            if owed is None:
                continue
            o = r.offset
            if o < last[p]:
                del owed_by[p], last[p]
                continue
            last[p] = o
            end = -1
            while owed and o >= owed[0]:
                fetched = max(owed.pop(0), end)
                begins = start(p)
                end = o if begins is None or begins < 0 else min(int(begins), o)
                if end > fetched:
                    self.deleted += end - fetched
                    warn_deleted(self.topic, p, fetched, end, o)
            if not owed:
                del owed_by[p], last[p]

    def assigned(self, partitions: Iterable[int]) -> None:
        """Partitions given to the member (its rebalance callback)."""
        self._held.update(partitions)

    def revoked(self, partitions: Iterable[int]) -> None:
        """Partitions taken from the member (its rebalance callback): a reset of theirs is the
        next owner's to see."""
        for p in partitions:
            self._held.discard(p)
            self._owed.pop(p, None)
            self._last.pop(p, None)


def shown_level(config: Mapping[str, Any]) -> int:
    """The Python level from which a client's librdkafka lines are shown (its ``log_level``)."""
    return _PY_LEVEL.get(int(config.get("log_level", 6)), logging.DEBUG)
