"""The reading side of the Kafka state topic (:mod:`.kafka_topic`): partition 0 of the topic,
read from the beginning and then followed, through the configured client
(``STREAMBAYES_KAFKA_CLIENT``).

A reader has three calls, all under the :class:`~.kafka_topic.TopicLog`'s lock:

- ``exists()``: False while the topic does not exist (a reader never creates it); the first
  True assigns partition 0 from its first offset;
- ``read(apply, timeout, strict=False)``: every record appended since the last read, ``apply(key,
  value, offset)`` in offset order, up to the end the partition had when the read began (a
  :class:`~streambayes.errors.SnapshotError` if it cannot get there within ``timeout`` s);
- ``fetch(wanted, timeout)``: the records at the ``wanted`` offsets (offset -> key) again, with a
  second consumer (an older snapshot's chunks the log no longer keeps in memory).

Both read committed records only (``isolation.level=read_committed``): what a transaction that
was aborted wrote is never a snapshot, and a log ending with a transaction marker is read to
its end.

A read ends where such a reader's end is, the last stable offset: any transaction still open
holds it below every record committed after that transaction began, whoever wrote them. That is
what a predictor wants (an open checkpoint never holds it up). ``read(..., strict=True)`` reads
to the high watermark instead (asked by a ``read_uncommitted`` client), waiting until every
transaction open below it has ended: what an exactly-once learner reads when it takes a shard
over, right after its producer fenced the shard's previous writer, so that no snapshot of that
shard committed behind another shard's open transaction is missed (a killed writer's stays open
until it is fenced or its ``transaction.timeout.ms`` runs out). It must not be asked while this
process has a transaction of its own open on the topic: that would wait for itself.

librdkafka (:class:`ConfluentReader`, the default) loads the newest merged model on a fresh
process in about half kafka-python's time here (bench/state_stores.py, enron, 4 shards: 1.3x
the directory against 2.3x); kafka-python waits ``retry_backoff_ms`` before its first fetch.
Between looks librdkafka keeps fetching ahead into its queue (``queued.max.messages.kbytes``,
64 MiB by default; kafka-python holds its completed fetches the same way).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from streambayes.errors import SnapshotError

logger = logging.getLogger(__name__)
Apply = Callable[[str, "bytes | None", int], None]
_MAX_FETCH = 64 << 20  # bytes per fetch response; a partition's share is 16 MiB
_MAX_PARTITION_FETCH = 16 << 20
# kafka-python waits retry_backoff_ms (default 100) after its bootstrap metadata and before the
# first fetch: half of a fresh reader's load time. The reader is idle between looks; a
# STREAMBAYES_KAFKA_CONSUMER_OPTIONS value wins.
_READER_BACKOFF_MS = 20
# librdkafka holds its first cluster connection for reconnect.backoff.ms (default 100) before an
# application metadata request; it still backs off exponentially to reconnect.backoff.max.ms.
_RECONNECT_BACKOFF_MS = 10


def _missing_codes() -> frozenset[int]:
    from confluent_kafka import KafkaError

    return frozenset({KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
                      KafkaError.UNKNOWN_TOPIC_OR_PART})


def open_reader(client: str, bootstrap: str, topic: str, options: Mapping[str, Any],
                name: str) -> Any:
    """The reader of ``client`` (``confluent`` or ``kafka-python``); ``options`` are that
    client's consumer options (security and ``STREAMBAYES_KAFKA_*OPTIONS``), ``name`` the
    topic's URI for messages."""
    if client == "kafka-python":
        return KafkaPythonReader(bootstrap, topic, options, name)
    return ConfluentReader(bootstrap, topic, options, name)


class ConfluentReader:
    """Partition 0 through librdkafka: no consumer group is joined (librdkafka wants a
    ``group.id``; nothing is committed). The end of a plain read is the end the second client
    (``read_committed``) gives when the read began, the last stable offset, or the
    partition-EOF event (which also covers transaction markers at the end); a strict read ends
    at the high watermark a ``read_uncommitted`` client gives, and goes on past EOF events until
    the position reaches it.

    The broker answers one request per connection at a time, and the reading consumer keeps a
    fetch waiting there (``fetch.wait.max.ms``) between looks: the high watermark of a later
    look is asked by a second client, which also re-reads older chunks (:meth:`fetch`) and
    fetches nothing in between."""

    def __init__(self, bootstrap: str, topic: str, options: Mapping[str, Any], name: str) -> None:
        from streambayes.runtime.kafka.confluent import _config, _ErrorLog

        self.topic, self.name = topic, name
        self._errors = _ErrorLog(f"state topic {name}")
        self._config = _config(bootstrap, {
            "group.id": "streambayes-state-reader", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "enable.partition.eof": True,
            "auto.offset.reset": "earliest", "fetch.max.bytes": _MAX_FETCH,
            "max.partition.fetch.bytes": _MAX_PARTITION_FETCH,
            "receive.message.max.bytes": _MAX_FETCH + (1 << 20), "socket.nagle.disable": True,
            "reconnect.backoff.ms": _RECONNECT_BACKOFF_MS, "fetch.wait.max.ms": 100,
            "error_cb": self._errors}, options)
        self._consumer: Any = None
        self._side: Any = None  # the second client: later watermarks, older chunks
        self._strict: Any = None  # a read_uncommitted client: the high watermark (strict reads)
        self._assigned = False
        self._position: int | None = None  # next offset to read; None before the first read
        self._first_end: tuple[int, int] | None = None  # the watermarks when assigned

    def _client(self) -> Any:
        from confluent_kafka import Consumer

        from streambayes.runtime.kafka.confluent import _usable

        return _usable(lambda: Consumer(self._config))

    def exists(self) -> bool:
        from confluent_kafka import KafkaException, TopicPartition

        if self._assigned:
            return True
        if self._consumer is None:
            self._consumer = self._client()
        try:  # the watermarks, asked before the first fetch; a missing topic has no partition 0
            tp = TopicPartition(self.topic, 0)
            self._first_end = self._consumer.get_watermark_offsets(tp, timeout=10.0, cached=False)
        except KafkaException as exc:
            if exc.args[0].code() in _missing_codes():
                return False
            raise SnapshotError(f"cannot read the state topic {self.name}: {exc}") from exc
        self._consumer.assign([TopicPartition(self.topic, 0, self._first_end[0])])
        self._assigned = True
        self._second()  # connects while the first read runs
        return True

    def _second(self) -> Any:
        if self._side is None:
            self._side = self._client()
        return self._side

    def read(self, apply: Apply, timeout: float, strict: bool = False) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        deadline = time.monotonic() + timeout
        tp = TopicPartition(self.topic, 0)
        try:
            first, self._first_end = self._first_end, None  # asked before the first fetch
            if first is not None:
                self._position = first[0]
            if strict:  # the high watermark: a read_uncommitted client's end
                end = self._uncommitted().get_watermark_offsets(tp, timeout=timeout, cached=False)[1]
            elif first is not None:  # no wait
                end = first[1]
            else:
                end = self._second().get_watermark_offsets(tp, timeout=timeout, cached=False)[1]
            while self._position < end:
                if time.monotonic() > deadline:
                    raise SnapshotError(f"{self.name}: could not read to offset {end} in "
                                        f"{timeout:g} s" + (" (a transaction below it stayed "
                                                            "open)" if strict else ""))
                if self._consume(self._consumer, apply) and not strict:
                    return  # the end of what is committed (the last stable offset)
        except KafkaException as exc:
            raise SnapshotError(f"cannot read the state topic {self.name}: {exc}") from exc

    def _uncommitted(self) -> Any:
        """A client that asks the high watermark only (``read_uncommitted``), made at the first
        strict read."""
        if self._strict is None:
            from confluent_kafka import Consumer

            from streambayes.runtime.kafka.confluent import _usable

            config = {**self._config, "isolation.level": "read_uncommitted"}
            self._strict = _usable(lambda: Consumer(config))
        return self._strict

    def _consume(self, consumer: Any, apply: Apply) -> bool:
        """One batch (what is fetched, else wait up to 0.5 s for a record); True at the
        partition's end."""
        from confluent_kafka import KafkaError

        messages = consumer.consume(100_000, 0) or consumer.consume(1, 0.5)
        at_end = False
        for m in messages:
            error = m.error()
            if error is None:
                key = m.key()
                apply(key.decode("utf-8", "replace") if key else "", m.value(), m.offset())
                self._position = m.offset() + 1
            elif error.code() == KafkaError._PARTITION_EOF:
                self._position, at_end = max(self._position or 0, m.offset()), True  # past markers
            elif error.fatal():
                raise SnapshotError(f"cannot read the state topic {self.name}: {error.str()}")
            else:  # logged; librdkafka retries, the read's deadline bounds the wait
                self._errors(error)
        return at_end

    def fetch(self, wanted: Mapping[int, str], timeout: float) -> dict[str, bytes]:
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        out: dict[str, bytes] = {}
        deadline, last = time.monotonic() + timeout, max(wanted)
        try:
            side = self._second()
            side.assign([TopicPartition(self.topic, 0, min(wanted))])
            position = min(wanted)
            while position <= last and time.monotonic() < deadline:
                for m in side.consume(100_000, 0) or side.consume(1, 0.5):
                    error = m.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            position = last + 1  # nothing more: what was not found is gone
                        continue
                    position = m.offset() + 1
                    key = wanted.get(m.offset())
                    if key is not None and m.key() == key.encode() and m.value() is not None:
                        out[key] = m.value()
            side.unassign()  # idle again: the next watermark is not held behind a fetch
        except KafkaException as exc:
            raise SnapshotError(f"cannot read the state topic {self.name}: {exc}") from exc
        return out

    def close(self) -> None:
        for client in (self._consumer, self._side, self._strict):
            if client is not None:
                client.close()
        self._consumer = self._side = self._strict = None
        self._assigned, self._position, self._first_end = False, None, None


class KafkaPythonReader:
    """Partition 0 through kafka-python (``STREAMBAYES_KAFKA_CLIENT=kafka-python``)."""

    def __init__(self, bootstrap: str, topic: str, options: Mapping[str, Any], name: str) -> None:
        self.bootstrap, self.topic, self.name = bootstrap, topic, name
        self.options = {"group_id": None, "enable_auto_commit": False,
                        "allow_auto_create_topics": False, "auto_offset_reset": "earliest",
                        "max_partition_fetch_bytes": _MAX_PARTITION_FETCH,
                        "fetch_max_bytes": _MAX_FETCH, "retry_backoff_ms": _READER_BACKOFF_MS,
                        "isolation_level": "read_committed", **options}
        self._consumer: Any = None
        self._probe: Any = None  # the consumer before the topic exists
        self._fetcher: Any = None
        self._strict: Any = None  # a read_uncommitted consumer: the high watermark (strict reads)

    def _partition(self) -> Any:
        from kafka import TopicPartition

        return TopicPartition(self.topic, 0)

    def exists(self) -> bool:
        from kafka.errors import KafkaError

        from streambayes.runtime.kafka.kafka_python import new_consumer

        if self._consumer is not None:
            return True
        try:
            if self._probe is None:
                self._probe = new_consumer(bootstrap_servers=self.bootstrap, **self.options)
            if not self._probe.partitions_for_topic(self.topic):
                return False
        except KafkaError as exc:
            raise SnapshotError(f"cannot read the state topic {self.name}: {exc}") from exc
        consumer, self._probe = self._probe, None
        consumer.assign([self._partition()])
        consumer.seek_to_beginning(self._partition())
        self._consumer = consumer
        return True

    def read(self, apply: Apply, timeout: float, strict: bool = False) -> None:
        from kafka.errors import KafkaError

        consumer, tp = self._consumer, self._partition()
        try:
            # read_committed: the last stable offset; read_uncommitted: the high watermark
            end = (self._uncommitted() if strict else consumer).end_offsets([tp])[tp]
            deadline = time.monotonic() + timeout
            while consumer.position(tp) < end:
                if time.monotonic() > deadline:
                    raise SnapshotError(f"{self.name}: could not read to offset {end} in "
                                        f"{timeout:g} s" + (" (a transaction below it stayed "
                                                            "open)" if strict else ""))
                for record in consumer.poll(timeout_ms=500, max_records=100_000).get(tp, ()):
                    apply(record.key.decode("utf-8", "replace") if record.key else "",
                          record.value, record.offset)
        except KafkaError as exc:
            raise SnapshotError(f"cannot read the state topic {self.name}: {exc}") from exc

    def _uncommitted(self) -> Any:
        """A consumer that asks the high watermark only (``read_uncommitted``), made at the first
        strict read."""
        from streambayes.runtime.kafka.kafka_python import new_consumer

        if self._strict is None:
            self._strict = new_consumer(bootstrap_servers=self.bootstrap,
                                        **{**self.options, "isolation_level": "read_uncommitted"})
        return self._strict

    def fetch(self, wanted: Mapping[int, str], timeout: float) -> dict[str, bytes]:
        from kafka.errors import KafkaError

        from streambayes.runtime.kafka.kafka_python import new_consumer

        tp, out = self._partition(), {}
        try:
            if self._fetcher is None:
                self._fetcher = new_consumer(bootstrap_servers=self.bootstrap, **self.options)
                self._fetcher.assign([tp])
            self._fetcher.seek(tp, min(wanted))
            deadline = time.monotonic() + timeout
            while self._fetcher.position(tp) <= max(wanted) and time.monotonic() < deadline:
                for record in self._fetcher.poll(timeout_ms=500, max_records=100_000).get(tp, ()):
                    key = wanted.get(record.offset)
                    if key is not None and record.key == key.encode() and record.value is not None:
                        out[key] = record.value
        except KafkaError as exc:
            raise SnapshotError(f"cannot read the state topic {self.name}: {exc}") from exc
        return out

    def close(self) -> None:
        for client in (self._consumer, self._probe, self._fetcher, self._strict):
            if client is not None:
                client.close()
        self._consumer = self._probe = self._fetcher = self._strict = None
