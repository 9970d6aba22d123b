"""Topic creation and whole-topic reads with confluent-kafka (for tests, benches and tools)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from streambayes.errors import BrokerError
from streambayes.runtime.kafka.confluent import _TIMEOUT, AssignedSource, _config, _usable
from streambayes.runtime.records.sources import Record


def create_topic(bootstrap: str, topic: str, partitions: int = 1, *,
                 options: Mapping[str, Any] | None = None) -> bool:
    """Create ``topic`` with ``partitions`` partitions; False if it already exists."""
    admin = _usable(lambda: AdminClient(_config(bootstrap, {}, options)))
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  request_timeout=_TIMEOUT)
    try:
        futures[topic].result(timeout=3 * _TIMEOUT)
        return True
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise BrokerError(f"cannot create topic {topic}: {exc.args[0].str()}") from exc


def wait_for_records(bootstrap: str, topic: str, count: int, *, timeout: float = 30.0,
                     options: Mapping[str, Any] | None = None) -> list[Record]:
    """Read ``topic`` from the beginning of every partition until ``count`` records (tests, tools).

    Raises :class:`~streambayes.errors.BrokerError` with what was found if ``timeout`` passes first.
    """
    source = AssignedSource(bootstrap, topic, options=options, refresh_seconds=0.5)
    out: list[Record] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            out.extend(source.poll(10_000, timeout=0.2))
    finally:
        source.close()
    if len(out) < count:
        raise BrokerError(f"{topic}: found {len(out)} records, expected {count} within {timeout:g} s")
    return out
