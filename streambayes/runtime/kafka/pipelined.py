"""Pipelined acknowledgements: how many messages a sink has sent and not yet had acknowledged,
asked without blocking, so the predict loop commits offsets only after its posteriors are
acknowledged yet never waits for an acknowledgement between two micro-batches.

:func:`unacknowledged` serves the delivery reports that have arrived and counts what is still in
flight (failed deliveries count until a ``flush`` re-sends them). A sink of its own kind may say
it with an ``unacknowledged()`` method; the two Kafka sinks of the backends are read here (their
queue of messages in flight); for any other sink (a file, memory) the answer is ``None``: the
caller flushes (cheap there).

>>> from streambayes.runtime.records.sinks import MemorySink
>>> unacknowledged(MemorySink()) is None
True
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

logger = logging.getLogger(__name__)


def unacknowledged(sink: Any) -> int | None:
    """Messages ``sink`` sent that are not yet acknowledged (None: unknown, flush to be sure)."""
    own = getattr(sink, "unacknowledged", None)
    if own is not None:
        return own()
    if hasattr(sink, "_in_flight") and hasattr(sink, "_failed"):  # confluent.KafkaSink
        sink._serve(0)
        return max(0, sink._in_flight) + len(sink._failed)
    if hasattr(sink, "_pending") and hasattr(sink, "_reap"):  # kafka_python.KafkaSink
        sink._reap()
        return len(sink._pending)
    return None


def commit_async(source: Any, positions: Any) -> bool:
    """Commit ``positions`` of the partitions ``source`` still owns without waiting for the broker
    (a consumer-group source of either backend); False when ``source`` cannot (then the caller
    commits synchronously). A failed asynchronous commit is covered by the next one."""
    consumer = getattr(source, "_consumer", None)
    topic = getattr(source, "topic", None)
    if consumer is None or topic is None or not hasattr(source, "group"):
        return False
    wanted = {int(p): int(off) for p, off in positions.get(topic, {}).items()}
    owned = {tp.partition for tp in consumer.assignment()}
    if hasattr(consumer, "consumer_group_metadata"):  # confluent
        from confluent_kafka import KafkaException, TopicPartition

        offsets = [TopicPartition(topic, p, off) for p, off in wanted.items() if p in owned]
        if offsets:
            try:
                consumer.commit(offsets=offsets, asynchronous=True)
            except KafkaException as exc:
                logger.warning("offset commit failed (%s); the next one covers it", exc.args[0].str())
        return True
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    offsets = {TopicPartition(topic, p): OffsetAndMetadata(off, "", -1)
               for p, off in wanted.items() if p in owned}
    if offsets:
        consumer.commit_async(offsets, callback=_logged)
    return True


def _logged(offsets: Any, response: Any) -> None:
    if isinstance(response, Exception):
        logger.warning("offset commit failed (%s); the next one covers it", response)


class Settler:
    """When the predict loop commits the offsets it has served: once the posteriors and dead
    letters sent before them are acknowledged, without waiting for that. :meth:`settle` after each
    batch commits (asynchronously) when the sinks are drained, at most every ``commit_seconds``;
    when the oldest batch not committed is ``settle_seconds`` old, it flushes (blocking), then
    commits; ``force`` (at the end) flushes and commits synchronously."""

    def __init__(self, settle_seconds: float = 0.5, commit_seconds: float = 0.1,
                 clock: Callable[[], float] | None = None) -> None:
        import time

        self.settle_seconds = settle_seconds
        self.commit_seconds = commit_seconds
        self.clock = clock or time.monotonic
        self.unsettled: float | None = None  # when the oldest batch not committed was served
        self.committed = -float("inf")
        self.was_async = False  # the last commit was asynchronous: the end commits once more

    def pending(self) -> bool:
        return self.unsettled is not None or self.was_async

    def wait(self) -> float:
        """How long a poll may wait before :meth:`settle` is due again."""
        return self.settle_seconds if self.unsettled is not None else 1.0

    def settle(self, source: Any, sinks: Sequence[Any], force: bool = False) -> None:
        now = self.clock()
        if self.unsettled is None:
            self.unsettled = now
        counts = [unacknowledged(s) for s in sinks]
        for s, count in zip(sinks, counts, strict=True):
            if count is None:  # a file or memory sink: flushing costs nothing
                s.flush()
        drained = all(not count for count in counts)
        commit = getattr(source, "commit", None)
        if not force and commit is not None:
            if not drained and now - self.unsettled < self.settle_seconds:
                return
            if drained and now - self.committed < self.commit_seconds:
                return
        if not drained:
            for s in sinks:
                s.flush()
        self.unsettled, self.committed = None, now
        if commit is None:
            return
        self.was_async = not force and commit_async(source, source.positions())
        if not self.was_async:
            commit(source.positions())
