"""Records a predictor group owed its members but the topic no longer holds, reported off the poll
(confluent; the kafka-python client says so itself, :func:`~.kafka_python.report_resets_past_deleted`).

A predictor group resumes each partition at the group's committed offset. When retention (or
DeleteRecords) deleted records from there on while no member read them (the predictors were down
longer than the topic keeps records), the client goes on from where the partition now begins
(``auto.offset.reset=earliest``) and those events get no posterior. The confluent
``GroupSource`` tells a :class:`DeletedWatch` the partitions of each assignment (its rebalance
callback, as the client makes it) and the offset of the first record of each partition new to
the member. The watch's own thread, with a client of its own (a consumer of the group that never
subscribes), asks the group's committed offsets at the assignment, before this member can have
committed past them, and, only when a partition's first record lies past its committed offset,
where the partition now begins: the offsets in between that are gone are warned about and
counted (``deleted``, final once the watch is closed). Gaps the partition's start does not
explain (transaction markers, compaction) are not reported.

The watch asks no question of the member's own client and none inside its poll: a first version
(stop 33) asked the member's kafka-python consumer for its committed offsets in the poll right
after a rebalance, and slowed the group's join. Best effort: a question that fails reports
nothing (logged); one answered after this member committed past the assignment's offset finds no
gap (the member needs a fetch, a prediction and the posteriors' acknowledgement for that, the
watch one round trip).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

logger = logging.getLogger(__name__)

ASK_SECONDS = 5.0  # each request of a question waits at most this
CLOSE_SECONDS = 10.0  # closing waits at most this for first records still to be looked at


class Asker(Protocol):
    """The broker questions of a watch (a client of its own; only the watch's thread uses it)."""

    def committed(self, partitions: list[int]) -> Mapping[int, int | None]:
        """The group's committed offset per partition (None: the group has none)."""

    def starts(self, partitions: list[int]) -> Mapping[int, int] | None:
        """Where each partition now begins (its first offset still held; None: unknown)."""

    def close(self) -> None:
        """Let go of the client."""


def first_offsets(records: Iterable[Any], partitions: set[int]) -> dict[int, int]:
    """The offset of the first record of each of ``partitions`` in ``records``."""
    firsts: dict[int, int] = {}
    for r in records:
        if r.partition in partitions and r.partition not in firsts:
            firsts[r.partition] = r.offset
            if len(firsts) == len(partitions):
                break
    return firsts


def warn_deleted(topic: str, partition: int, fetched: int, start: int,
                 resumes: int | None = None) -> None:
    """The warning that offsets ``fetched`` to ``start - 1`` of ``topic[partition]`` were deleted
    before the group's predictor read them (it resumes at ``resumes``, default ``start``)."""
    logger.warning("%s[%d]: offsets %d-%d were deleted from the topic (retention or DeleteRecords) "
                   "before this group's predictor read them: their events got no posterior; it "
                   "resumes at %d", topic, partition, fetched, start - 1,
                   start if resumes is None else resumes)


class DeletedWatch:
    """Reports offsets of ``topic`` deleted before the group read them (see the module doc):
    :meth:`given` at each assignment, :meth:`firsts` at the first records of partitions new to
    the member, :meth:`close` at the end; ``make`` makes the :class:`Asker`, on the watch's thread
    as it starts (so its connection is up by the first assignment)."""

    def __init__(self, topic: str, make: Callable[[], Asker]) -> None:
        self.topic = topic
        self.deleted = 0  # offsets reported (final once closed)
        self._make = make
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._owed: dict[int, int | None] = {}  # partition -> committed offset at its assignment
        self._queued = 0  # firsts queued (by the member's thread) ...
        self._looked = 0  # ... and looked at (by the watch's): close waits for the rest
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"deleted records of {topic}",
                                        daemon=True)
        self._thread.start()

    def given(self, partitions: Iterable[int]) -> None:
        """Partitions just assigned to the member (only queued)."""
        self._queue.put(("given", sorted(set(partitions))))

    def firsts(self, firsts: Mapping[int, int]) -> None:
        """The first record's offset of each partition new to the member (only queued)."""
        if firsts:
            self._queued += 1
            self._queue.put(("first", dict(firsts)))

    def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """Look at the first records queued (for up to ``timeout`` s; ``deleted`` is final
        unless that wait gives up, logged), then let go of the client (on the watch's thread: a
        client that is still connecting is not waited for)."""
        self._queue.put(("close", None))
        if self._queued > self._looked and not self._done.wait(timeout):
            logger.info("records of %s deleted before they were read: not all looked at within "
                        "%g s", self.topic, timeout)

    def _run(self) -> None:
        asker: Asker | None = None
        try:
            while True:
                try:
                    if asker is None:
                        asker = self._make()
                except Exception as exc:  # noqa: BLE001 (a report, not the stream)
                    logger.info("cannot look for records of %s deleted before they were read: %s",
                                self.topic, exc)
                kind, what = self._queue.get()
                if kind == "close":
                    return
                if kind == "given":  # an earlier assignment's offsets are no longer owed,
                    for p in what:  # whether or not this one's question is answered
                        self._owed.pop(p, None)
                try:
                    if asker is not None:
                        self._look(asker, kind, what)
                except Exception as exc:  # noqa: BLE001 (a report, not the stream)
                    logger.info("whether records of %s were deleted before they were read is "
                                "unknown: %s", self.topic, exc)
                finally:
                    if kind == "first":
                        self._looked += 1
        finally:
            self._done.set()
            if asker is not None:
                try:
                    asker.close()
                except Exception as exc:  # noqa: BLE001
                    logger.debug("closing the deleted-records client of %s: %s", self.topic, exc)

    def _look(self, asker: Asker, kind: str, what: Any) -> None:
        if kind == "given":
            found = asker.committed(what) or {}
            for p in what:
                self._owed[p] = found.get(p)
            return
        owed = {p: self._owed.pop(p, None) for p in what}  # once per assignment
        jumped = {p: (c, first) for p, first in what.items()
                  if (c := owed[p]) is not None and 0 <= c < first}
        if not jumped:
            return
        begins = asker.starts(sorted(jumped)) or {}
        for p, (c, first) in sorted(jumped.items()):
            start = begins.get(p)
            gone = None if start is None else min(int(start), first)  # it may move on meanwhile
            if gone is not None and gone > c:
                self.deleted += gone - c
                warn_deleted(self.topic, p, c, gone, first)


class ConfluentAsker:
    """:class:`Asker` with a confluent-kafka ``Consumer`` of its own (``config``: the member's
    consumer properties, its group included), never subscribed: it joins nothing and commits
    nothing, it only asks the group's committed offsets and the partitions' low watermarks. Not
    an ``AdminClient``: librdkafka's ListConsumerGroupOffsets can abort the process on an
    assertion (``eonce->refcnt > 0``, librdkafka#3663) when the broker restarts under it (seen
    here: an exactly-once predictor died so in a broker-restart test)."""

    def __init__(self, config: Mapping[str, Any], group: str, topic: str) -> None:
        from confluent_kafka import Consumer

        self.group, self.topic = group, topic
        self._consumer = Consumer(dict(config))
        self._consumer.list_topics(topic, timeout=ASK_SECONDS)  # connected before the question

    def committed(self, partitions: list[int]) -> dict[int, int | None]:
        from confluent_kafka import TopicPartition

        found = self._consumer.committed([TopicPartition(self.topic, p) for p in partitions],
                                         timeout=ASK_SECONDS)
        return {tp.partition: (tp.offset if tp.offset >= 0 else None)
                for tp in found if tp.error is None}

    def starts(self, partitions: list[int]) -> dict[int, int] | None:
        from streambayes.runtime.kafka.confluent import log_starts

        return log_starts(self._consumer, self.topic, partitions, ASK_SECONDS)

    def close(self) -> None:
        from streambayes.runtime.kafka.bounded import bounded

        bounded(self._consumer.close, ASK_SECONDS, f"closing the deleted-records check of "
                f"{self.topic}")
