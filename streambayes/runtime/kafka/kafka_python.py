"""Kafka through kafka-python (the default client backend): sources, a sink, admin helpers.

- :class:`AssignedSource` assigns partitions explicitly (all of a topic's, or a given set) — the
  learner and replay use it. Its positions are the next offsets of the records it has handed
  out (or was told to seek to), so a snapshot taken after learning a poll's records stores
  exactly what the state reflects. Partitions appear later (a topic created later, partitions
  added) are picked up on a metadata refresh and read from their beginning.
- :class:`GroupSource` subscribes in a consumer group, so predictors scale out; offsets are
  committed by the loop after the posteriors are flushed.
- :class:`KafkaSink` produces with ``acks=all`` and idempotence; :meth:`KafkaSink.flush` does
  not return until every message sent is acknowledged, re-sending failed ones with backoff.

A broker that is down is waited for (backoff, interruptible by the ``stop`` event); nothing is
skipped. The confluent backend (:mod:`streambayes.runtime.kafka.confluent`) has the same shape.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import (
    AuthorizationError,
    IllegalArgumentError,
    InvalidRecordError,
    InvalidTopicError,
    KafkaConfigurationError,
    KafkaError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    SaslAuthenticationFailedError,
    TopicAlreadyExistsError,
    UnsupportedCodecError,
    UnsupportedVersionError,
)
from kafka.structs import OffsetAndMetadata

from streambayes.errors import BrokerError
from streambayes.runtime.records.events import DeadLetter
from streambayes.runtime.records.sinks import fit, key_bytes, truncate_dead_letter
from streambayes.runtime.records.sources import Positions, Record
from streambayes.runtime.retry import Backoff, Patience, retrying

NAME = "kafka-python"
logger = logging.getLogger(__name__)

_SECURITY_NAMES = {
    "security_protocol": "security_protocol",
    "sasl_mechanism": "sasl_mechanism",
    "sasl_username": "sasl_plain_username",
    "sasl_password": "sasl_plain_password",
    "ssl_cafile": "ssl_cafile",
    "ssl_certfile": "ssl_certfile",
    "ssl_keyfile": "ssl_keyfile",
}
_CONNECT_ERRORS = (KafkaError, OSError)  # kafka-python 3 raises KafkaConnectionError/timeouts
_BOOTSTRAP_MS = 2000  # per attempt; retried with backoff, so SIGTERM is heard within seconds
_TOO_LARGE = (MessageSizeTooLargeError, RecordListTooLargeError)
# errors a re-send cannot cure. kafka-python's ``retriable`` flag is False for some that a new
# attempt does cure (the idempotent producer's sequence and epoch errors, a closed producer's
# ``KafkaTimeoutError`` relatives), so the list is explicit; anything else is retried.
_NEVER = (*_TOO_LARGE, InvalidTopicError, AuthorizationError, SaslAuthenticationFailedError,
          UnsupportedVersionError, UnsupportedCodecError, KafkaConfigurationError,
          IllegalArgumentError, InvalidRecordError)
_RECORD_OVERHEAD = 512  # bytes of batch and record framing kafka-python adds to key and value
_MIN_LETTER = 1024  # a refused dead letter is not cut below this


def client_options(security: Mapping[str, Any] | None = None,
                   extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """kafka-python keyword arguments from neutral security names plus raw ``extra`` options.

    >>> client_options({"sasl_username": "u", "security_protocol": "SASL_SSL"}, {"linger_ms": 5})
    {'sasl_plain_username': 'u', 'security_protocol': 'SASL_SSL', 'linger_ms': 5}
    """
    options = {_SECURITY_NAMES[name]: value for name, value in (security or {}).items()}
    options.update(extra or {})
    return options


def _poll(consumer: KafkaConsumer, max_records: int, timeout: float, topic: str,
          next_offsets: dict[int, int], backoff: Backoff) -> list[Record]:
    """Records from one client poll, updating the next offset per partition; on a client
    error, log and back off (the client reconnects by itself; do not spin meanwhile)."""
    try:
        batches = consumer.poll(timeout_ms=int(timeout * 1000), max_records=max_records)
    except KafkaError as exc:
        logger.warning("poll of %s failed: %s", topic, exc)
        backoff.wait()
        return []
    backoff.reset()
    out: list[Record] = []
    for tp, messages in batches.items():
        for m in messages:
            out.append(Record(m.value if m.value is not None else b"", m.key, m.topic,
                              m.partition, m.offset, m.timestamp))
        if messages:
            next_offsets[tp.partition] = messages[-1].offset + 1
    return out


class AssignedSource:
    """Records of one topic from explicitly assigned partitions (DESIGN §4: the learner's source).

    ``partitions=None`` means every partition of the topic, including ones added later.
    ``connect_deadline`` (seconds) makes an unreachable broker an error instead of a wait.
    ``group`` is used only to commit offsets for lag monitoring (:meth:`commit`); the positions
    in the snapshot are the truth.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        partitions: Sequence[int] | None = None,
        group: str | None = None,
        options: Mapping[str, Any] | None = None,
        stop: threading.Event | None = None,
        refresh_seconds: float = 5.0,
        connect_deadline: float | None = None,
    ) -> None:
        self.topic = topic
        self.stop = stop or threading.Event()
        self.wanted = None if partitions is None else sorted(set(partitions))
        self.group = group
        self.refresh_seconds = refresh_seconds
        kwargs = dict(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", metadata_max_age_ms=int(refresh_seconds * 1000),
                      **dict(options or {}))
        kwargs.setdefault("bootstrap_timeout_ms", _BOOTSTRAP_MS)
        self._consumer = retrying(lambda: KafkaConsumer(**kwargs), f"connect to {bootstrap}",
                                  _CONNECT_ERRORS, self.stop, deadline=connect_deadline)
        self._next: dict[int, int] = {}  # partition -> next offset, where known
        self.assigned: list[int] = []
        self._missing: list[int] = []
        self._last_refresh = -float("inf")
        self._backoff = Backoff(stop=self.stop)
        self.refresh()

    # -- partitions ---------------------------------------------------------------------------
    def available(self) -> list[int]:
        """The topic's partitions as the client's metadata knows them ([] if the topic is unknown)."""
        try:
            found = self._consumer.partitions_for_topic(self.topic)
        except KafkaError as exc:
            logger.warning("metadata for %s unavailable: %s", self.topic, exc)
            return []
        return sorted(found or ())

    def refresh(self) -> None:
        """Re-read the topic's partitions and assign the wanted ones that exist (new ones from
        their beginning, unless a position was sought for them)."""
        self._last_refresh = time.monotonic()
        available = self.available()
        desired = available if self.wanted is None else [p for p in self.wanted if p in available]
        missing = [] if self.wanted is None else sorted(set(self.wanted) - set(available))
        if missing and missing != self._missing:
            logger.warning("topic %s has no partition %s yet; waiting for it", self.topic, missing)
        self._missing = missing
        if desired == self.assigned:
            return
        new = [p for p in desired if p not in self.assigned]
        self._consumer.assign([TopicPartition(self.topic, p) for p in desired])
        self.assigned = desired
        for p in new:  # assign() forgets positions: set every partition's again
            logger.info("reading %s[%d] from %s", self.topic, p, self._next.get(p, "the beginning"))
        for p in desired:
            self._seek_one(p)

    def _seek_one(self, partition: int) -> None:
        tp = TopicPartition(self.topic, partition)
        if partition in self._next:
            self._consumer.seek(tp, self._next[partition])
        else:
            self._consumer.seek_to_beginning(tp)

    # -- the Source protocol --------------------------------------------------------------------
    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        """Up to ``max_records`` records; waits up to ``timeout`` s when none are ready."""
        if time.monotonic() - self._last_refresh >= self.refresh_seconds:
            self.refresh()
        if not self.assigned:
            self.stop.wait(max(timeout, 0.05))
            return []
        return _poll(self._consumer, max_records, timeout, self.topic, self._next, self._backoff)

    def positions(self) -> Positions:
        """{topic: {partition: next offset}} for every partition read or sought."""
        return {self.topic: {str(p): off for p, off in sorted(self._next.items())}}

    def seek(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        """Resume at ``positions[topic]``; partitions not named there restart at the beginning."""
        stored = positions.get(self.topic, {})
        self._next = {int(p): int(off) for p, off in stored.items()}
        for p in self.assigned:
            self._seek_one(p)

    def commit(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        """Commit ``positions`` to the consumer group, for lag monitoring only (best effort)."""
        if self.group is None:
            return
        offsets = {TopicPartition(self.topic, int(p)): OffsetAndMetadata(int(off), "", -1)
                   for p, off in positions.get(self.topic, {}).items() if int(p) in self.assigned}
        if not offsets:
            return
        try:
            self._consumer.commit(offsets)
        except KafkaError as exc:
            logger.warning("offset commit for lag monitoring failed: %s", exc)

    # -- ranges for replay ----------------------------------------------------------------------
    def end_offsets(self) -> dict[int, int]:
        tps = [TopicPartition(self.topic, p) for p in self.assigned]
        return {tp.partition: off for tp, off in self._consumer.end_offsets(tps).items()}

    def beginning_offsets(self) -> dict[int, int]:
        tps = [TopicPartition(self.topic, p) for p in self.assigned]
        return {tp.partition: off for tp, off in self._consumer.beginning_offsets(tps).items()}

    def offsets_for_time(self, ms: int) -> dict[int, int | None]:
        """Per partition, the first offset with a timestamp >= ``ms`` (None: no such record)."""
        query = {TopicPartition(self.topic, p): ms for p in self.assigned}
        found = self._consumer.offsets_for_times(query)
        return {tp.partition: (None if hit is None else hit.offset) for tp, hit in found.items()}

    def close(self) -> None:
        self._consumer.close(autocommit=False)


class GroupSource:
    """Records of one topic read in a consumer group (DESIGN §4: predictors scale out this way).

    :meth:`commit` commits the offsets of records whose results were flushed; after a rebalance
    another member resumes from there (at least once).
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        group: str,
        options: Mapping[str, Any] | None = None,
        stop: threading.Event | None = None,
        auto_offset_reset: str = "earliest",
    ) -> None:
        self.topic = topic
        self.group = group
        self.stop = stop or threading.Event()
        kwargs = dict(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset=auto_offset_reset, **dict(options or {}))
        kwargs.setdefault("bootstrap_timeout_ms", _BOOTSTRAP_MS)
        self._consumer = retrying(lambda: KafkaConsumer(**kwargs), f"connect to {bootstrap}",
                                  _CONNECT_ERRORS, self.stop)
        self._consumer.subscribe([topic])
        self._next: dict[int, int] = {}
        self._backoff = Backoff(stop=self.stop)

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        out = _poll(self._consumer, max_records, timeout, self.topic, self._next, self._backoff)
        owned = {tp.partition for tp in self._consumer.assignment()}
        for p in [p for p in self._next if p not in owned]:  # revoked: its position is another's
            del self._next[p]
        return out

    def positions(self) -> Positions:
        return {self.topic: {str(p): off for p, off in sorted(self._next.items())}}

    def end_offsets(self) -> dict[int, int]:
        """End offsets of the partitions the group gives this member (for lag)."""
        tps = [tp for tp in self._consumer.assignment() if tp.topic == self.topic]
        return {tp.partition: off for tp, off in self._consumer.end_offsets(tps).items()} if tps else {}

    def seek(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        raise BrokerError("a consumer-group source resumes from the group's committed offsets")

    def commit(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        """Commit the next offsets of partitions still assigned to this member."""
        owned = {tp.partition for tp in self._consumer.assignment()}
        offsets = {TopicPartition(self.topic, int(p)): OffsetAndMetadata(int(off), "", -1)
                   for p, off in positions.get(self.topic, {}).items() if int(p) in owned}
        if offsets:
            try:
                self._consumer.commit(offsets)
            except KafkaError as exc:  # a rebalance: the new owner re-reads from the last commit
                logger.warning("offset commit failed (%s); those events may be predicted twice", exc)

    def close(self) -> None:
        self._consumer.close(autocommit=False)


@dataclass
class _Message:
    """One message sent and not yet acknowledged (``value`` kept: a dead letter may be refit)."""

    topic: str
    key: bytes | None
    data: bytes
    value: Any
    future: Any = None
    refit: bool = False


def never_succeeds(exc: BaseException) -> bool:
    """Whether a send error cannot succeed however often it is retried.

    >>> never_succeeds(MessageSizeTooLargeError()), never_succeeds(KafkaError("timed out"))
    (True, False)
    """
    return isinstance(exc, _NEVER)


class KafkaSink:
    """Produce to Kafka with ``acks=all`` (idempotent when the broker supports it).

    ``send`` queues; ``flush`` blocks until every queued message is acknowledged, re-sending
    failures with backoff. Errors that cannot succeed (:func:`never_succeeds`) raise
    :class:`~streambayes.errors.BrokerError` at once; retriable ones are retried until they
    have lasted ``deadline`` seconds, or until stopped. A message over ``max_request_size``
    (less an allowance for the record's framing) is fitted by :func:`~.sinks.fit`; a dead letter
    the broker refuses as too large is truncated to half its size and sent once more.
    """

    def __init__(self, bootstrap: str, *, options: Mapping[str, Any] | None = None,
                 stop: threading.Event | None = None, idempotent: bool = True,
                 linger_ms: int = 5, deadline: float = 120.0,
                 clock: Callable[[], float] = time.monotonic,
                 backoff: tuple[float, float] = (0.1, 5.0)) -> None:
        self.stop = stop or threading.Event()
        self.count = 0
        base = dict(bootstrap_servers=bootstrap, acks="all", linger_ms=linger_ms,
                    **dict(options or {}))
        base.setdefault("bootstrap_timeout_ms", _BOOTSTRAP_MS)
        self.max_bytes = int(base.get("max_request_size", KafkaProducer.DEFAULT_CONFIG[
            "max_request_size"])) - _RECORD_OVERHEAD
        self.deadline = deadline
        self._patience = Patience(deadline, clock)
        self._backoff = backoff

        def connect() -> KafkaProducer:
            if not idempotent:
                return KafkaProducer(**base)
            try:
                return KafkaProducer(enable_idempotence=True, **base)
            except UnsupportedVersionError:
                logger.warning("broker does not support idempotent producers; using acks=all only")
                return KafkaProducer(**base)

        self._producer = retrying(connect, f"connect to {bootstrap}", _CONNECT_ERRORS, self.stop)
        self._pending: list[_Message] = []

    def send(self, topic: str, key: str | bytes | None, value: Any) -> None:
        """Queue ``value``; raises :class:`~.sinks.MessageTooLarge` for a value over the limit
        that is not a dead letter (nothing is sent then)."""
        k = key_bytes(key)
        data = fit(value, self.max_bytes - len(k or b""), f"a message to {topic}")
        message = _Message(topic, k, data, value)
        message.future = self._send(message)
        self._pending.append(message)
        self.count += 1
        if len(self._pending) >= 100_000:
            self._reap()

    def _send(self, message: _Message) -> Any:
        backoff = Backoff(*self._backoff, stop=self.stop)
        while True:
            try:
                return self._producer.send(message.topic, key=message.key, value=message.data)
            except KafkaError as exc:
                if self._check(message, exc):
                    continue
                if not backoff.wait():
                    raise BrokerError(f"stopped while sending to {message.topic} failed: "
                                      f"{exc}") from exc

    def _check(self, message: _Message, exc: BaseException) -> bool:
        """Judge a failed send: True to re-send at once (a dead letter refit to half its size),
        False to re-send after a backoff; raises when it cannot or may no longer succeed."""
        if isinstance(exc, _TOO_LARGE) and isinstance(message.value, DeadLetter) \
                and not message.refit:
            limit = max(_MIN_LETTER, len(message.data) // 2)
            self.max_bytes = min(self.max_bytes, limit)
            logger.warning("%s refused a dead letter of %d bytes (%s); truncating to %d bytes",
                           message.topic, len(message.data), exc, limit)
            message.data, message.refit = truncate_dead_letter(message.value, limit), True
            return True
        if never_succeeds(exc):
            raise BrokerError(f"cannot deliver a message of {len(message.data)} bytes to "
                              f"{message.topic}: {exc} (not retried: it cannot succeed)") from exc
        if self._patience.failed():
            raise BrokerError(f"delivery to {message.topic} kept failing for "
                              f"{self._patience.elapsed():.0f} s (deadline {self.deadline:g} s, "
                              f"STREAMBAYES_KAFKA_DELIVERY_DEADLINE): {exc}") from exc
        return False

    def _reap(self) -> None:
        """Drop acknowledged messages from the front of the queue."""
        done = 0
        for message in self._pending:
            if not (message.future.is_done and message.future.succeeded()):
                break
            done += 1
        del self._pending[:done]

    def flush(self) -> None:
        """Return once everything sent is acknowledged; re-send failures (backoff) until then."""
        backoff = Backoff(*self._backoff, stop=self.stop)
        while self._pending:
            try:
                self._producer.flush(timeout=30)
            except KafkaError as exc:
                logger.warning("flush did not finish: %s", exc)
                if self._patience.failed():
                    raise BrokerError(f"flush kept failing for {self._patience.elapsed():.0f} s "
                                      f"(STREAMBAYES_KAFKA_DELIVERY_DEADLINE): {exc}") from exc
            retry: list[_Message] = []
            for message in self._pending:
                future = message.future
                if future.is_done and future.succeeded():
                    self._patience.reset()
                    continue
                if future.is_done:
                    if not self._check(message, future.exception):
                        logger.warning("delivery to %s failed (%s); re-sending", message.topic,
                                       future.exception)
                    message.future = self._send(message)
                retry.append(message)
            self._pending = retry
            if retry and not backoff.wait():
                raise BrokerError(f"stopped with {len(retry)} messages not acknowledged")

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._producer.close(timeout=5)


def create_topic(bootstrap: str, topic: str, partitions: int = 1, *,
                 options: Mapping[str, Any] | None = None,
                 config: Mapping[str, str] | None = None) -> bool:
    """Create ``topic`` with ``partitions`` partitions (and topic ``config`` such as
    ``max.message.bytes``); False if it already exists."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **dict(options or {}))
    try:
        admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=dict(config or {}))])
        return True
    except TopicAlreadyExistsError:
        return False
    finally:
        admin.close()


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

