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
