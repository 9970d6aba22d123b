"""The confluent-kafka (librdkafka) sink: delivery reports, retries within a deadline, dead
letters fitted to the broker's limits, producers renewed after a fatal error."""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from streambayes.errors import BrokerError
from streambayes.runtime.kafka.bounded import CLOSE_SECONDS, close_producer
from streambayes.runtime.kafka.confluent import (
    _MIN_LETTER,
    _NEVER,
    _RECORD_OVERHEAD,
    _TOO_LARGE,
    _config,
    _ErrorLog,
    _fatal,
    _usable,
)
from streambayes.runtime.records.events import DeadLetter
from streambayes.runtime.records.sinks import fit, key_bytes, truncate_dead_letter
from streambayes.runtime.retry import Backoff, Patience

logger = logging.getLogger("streambayes.runtime.kafka.confluent")

def never_succeeds(error: KafkaError) -> bool:
    """Whether a delivery error cannot succeed however often it is re-sent.

    >>> never_succeeds(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    True
    >>> never_succeeds(KafkaError(KafkaError._MSG_TIMED_OUT))
    False
    """
    return error.code() in _NEVER


class KafkaSink:
    """Produce to Kafka with ``acks=all`` (idempotent unless ``idempotent=False``).

    ``send`` queues; ``flush`` blocks until every queued message is acknowledged, re-sending
    failures with backoff. Errors that cannot succeed (:func:`never_succeeds`) raise
    :class:`~streambayes.errors.BrokerError` at once; retriable ones are re-sent until they have
    lasted ``deadline`` seconds, or until stopped. A message over ``message.max.bytes`` (less an
    allowance for framing) is fitted by :func:`~.sinks.fit`; a dead letter the broker refuses as
    too large is truncated to half its size and sent once more. A producer that failed for good
    (a fatal idempotence error) is replaced and its messages re-sent.
    """

    def __init__(self, bootstrap: str, *, options: Mapping[str, Any] | None = None,
                 stop: threading.Event | None = None, idempotent: bool = True,
                 linger_ms: int = 5, deadline: float = 120.0,
                 clock: Callable[[], float] = time.monotonic,
                 backoff: tuple[float, float] = (0.1, 5.0)) -> None:
        self.stop = stop or threading.Event()
        self.count = 0
        self._errors = _ErrorLog("producer")
        self._config = _config(bootstrap, {
            "acks": "all", "linger.ms": linger_ms, "enable.idempotence": idempotent,
            "partitioner": "murmur2_random",  # the Java client's (and kafka-python's) partitions
            "message.timeout.ms": 120_000,  # then re-sent; kafka-python's delivery timeout
            "error_cb": self._errors}, options)
        self.max_bytes = int(self._config.get("message.max.bytes", 1_000_000)) - _RECORD_OVERHEAD
        self.deadline = deadline
        self._patience = Patience(deadline, clock)
        self._backoff = backoff
        self._producer = _usable(lambda: Producer(self._config))
        self._in_flight = 0  # produced, delivery report not yet served
        self.renewals = 0  # producers replaced after a fatal error or failed deliveries
        self._failed: list[tuple[str, bytes | None, bytes, KafkaError, bool]] = []

    def _delivered(self, refit: bool, error: KafkaError | None, message: Message) -> None:
        self._in_flight -= 1
        if error is None:
            self._patience.reset()
        else:
            self._failed.append((message.topic(), message.key(), message.value(), error, refit))

    def send(self, topic: str, key: str | bytes | None, value: Any) -> None:
        """Queue ``value``; raises :class:`~.sinks.MessageTooLarge` for a value over the limit
        that is not a dead letter (nothing is sent then)."""
        k = key_bytes(key)
        self._produce(topic, k, fit(value, self.max_bytes - len(k or b""), f"a message to {topic}"))
        self.count += 1

    def _refit(self, topic: str, value: bytes, error: KafkaError) -> bytes | None:
        """A refused dead letter truncated to half its size (None: not a dead letter)."""
        try:
            letter = DeadLetter.model_validate_json(value)
        except ValueError:
            return None
        limit = max(_MIN_LETTER, len(value) // 2)
        self.max_bytes = min(self.max_bytes, limit)
        logger.warning("%s refused a dead letter of %d bytes (%s); truncating to %d bytes", topic,
                       len(value), error.str(), limit)
        return truncate_dead_letter(letter, limit)

    def _judge(self, topic: str, value: bytes, error: KafkaError, refit: bool) -> bytes | None:
        """A failed message: its refit bytes to re-send at once, or None to re-send after a
        backoff; raises when it cannot or may no longer succeed."""
        if error.code() in _TOO_LARGE and not refit:
            data = self._refit(topic, value, error)
            if data is not None:
                return data
        if never_succeeds(error):
            raise BrokerError(f"cannot deliver a message of {len(value)} bytes to {topic}: "
                              f"{error.str()} (not retried: it cannot succeed)")
        if self._patience.failed():
            raise BrokerError(f"delivery to {topic} kept failing for "
                              f"{self._patience.elapsed():.0f} s (deadline {self.deadline:g} s, "
                              f"STREAMBAYES_KAFKA_DELIVERY_DEADLINE): {error.str()}")
        return None

    def _produce(self, topic: str, key: bytes | None, value: bytes, refit: bool = False) -> None:
        while True:
            try:
                self._producer.produce(topic, value, key,
                                       on_delivery=functools.partial(self._delivered, refit))
                break
            except BufferError:  # the local queue is full: wait for deliveries to make room
                before = self._in_flight
                self._serve(0.5)
                if self.stop.is_set() and self._in_flight == before:
                    raise BrokerError(f"stopped while the queue to {topic} was full") from None
            except KafkaException as exc:
                if not _fatal(exc):
                    error = exc.args[0]
                    data = self._judge(topic, value, error, refit) if never_succeeds(error) \
                        else None
                    if data is None:
                        raise BrokerError(f"cannot send to {topic}: {error.str()}") from exc
                    value, refit = data, True
                    continue
                self._renew(f"it failed for good ({exc.args[0].str()})")
        self._in_flight += 1
        self._serve(0)  # delivery reports as we go

    def _serve(self, timeout: float) -> None:
        """Serve delivery reports for up to ``timeout`` s; a fatal error replaces the producer."""
        try:
            if timeout:
                self._producer.flush(timeout)
            else:
                self._producer.poll(0)
        except (KafkaException, SystemError) as exc:  # SystemError: raised past a callback
            error = _fatal(exc)
            if error is None:
                raise
            self._errors.fatal = error
        if self._errors.fatal is not None:
            self._renew(f"it failed for good ({self._errors.fatal.str()})")

    def _renew(self, reason: str) -> None:
        """Replace the producer; its queued messages come back as failed, to be re-sent."""
        logger.warning("starting a new producer: %s", reason)
        error, self._errors.fatal = self._errors.fatal, None
        self._producer.purge()
        for _ in range(2):  # the purged messages' reports join _failed (a fatal error raises once)
            with contextlib.suppress(KafkaException, SystemError):
                self._producer.flush(1.0)
        if error is not None and error.code() in (KafkaError._UNSUPPORTED_FEATURE,
                                                  KafkaError.UNSUPPORTED_VERSION):
            logger.warning("broker does not support idempotent producers; using acks=all only")
            self._config["enable.idempotence"] = False
        self._producer = Producer(self._config)
        self.renewals += 1

    def flush(self) -> None:
        """Return once everything sent is acknowledged; re-send failures (backoff) until then."""
        backoff = Backoff(*self._backoff, stop=self.stop)
        while True:
            before, renewals = self._in_flight, self.renewals
            self._serve(0.5)
            if not self._failed:
                if self._in_flight <= 0:
                    return
                if self.stop.is_set() and self._in_flight == before:
                    raise BrokerError(
                        f"stopped with {self._in_flight} messages not acknowledged")
                continue
            failed, self._failed = self._failed, []
            now, later = self._sort(failed)
            for topic, key, value in now:
                self._produce(topic, key, value, refit=True)
            if not later:
                continue
            logger.warning("delivery of %d messages to %s failed (%s); re-sending", len(later),
                           later[0][0], later[0][3].str())
            if not backoff.wait():
                self._failed = later + self._failed
                raise BrokerError(
                    f"stopped with {len(later) + self._in_flight} messages not acknowledged")
            if self._config["enable.idempotence"] and renewals == self.renewals:
                self._renew("deliveries failed (its producer id may be unusable)")
                later, self._failed = later + self._failed, []
            for topic, key, value, _error, refit in later:
                self._produce(topic, key, value, refit)

    def _sort(self, failed: list[tuple[str, bytes | None, bytes, KafkaError, bool]]) -> tuple[
            list[tuple[str, bytes | None, bytes]], list[tuple[str, bytes | None, bytes, KafkaError,
                                                               bool]]]:
        """Failed messages into refit dead letters (re-sent at once) and the rest (re-sent after
        a backoff); raises for one that cannot or may no longer succeed."""
        now, later = [], []
        for topic, key, value, error, refit in failed:
            data = self._judge(topic, value, error, refit)
            if data is None:
                later.append((topic, key, value, error, refit))
            else:
                now.append((topic, key, data))
        return now, later

    def close(self) -> None:
        try:
            self.flush()
        finally:  # stopped with the broker away: do not wait for it
            close_producer(self._producer, 0.0 if self._in_flight > 0 else CLOSE_SECONDS)
