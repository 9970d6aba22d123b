"""The kafka-python sink: acknowledged sends, retries within a deadline, dead letters fitted to
the broker's limits."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError, UnsupportedVersionError

from streambayes.errors import BrokerError
from streambayes.runtime.kafka.kafka_python import (
    _BOOTSTRAP_MS,
    _CONNECT_ERRORS,
    _MIN_LETTER,
    _NEVER,
    _RECORD_OVERHEAD,
    _TOO_LARGE,
)
from streambayes.runtime.records.events import DeadLetter
from streambayes.runtime.records.sinks import fit, key_bytes, truncate_dead_letter
from streambayes.runtime.retry import Backoff, Patience, retrying

logger = logging.getLogger("streambayes.runtime.kafka.kafka_python")

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

    >>> from kafka.errors import MessageSizeTooLargeError
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
        base = {"bootstrap_servers": bootstrap, "acks": "all", "linger_ms": linger_ms,
                **dict(options or {})}  # the user's producer options win
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
