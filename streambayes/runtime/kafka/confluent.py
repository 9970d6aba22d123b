"""Kafka through confluent-kafka (librdkafka): the same sources, sink and helpers as
:mod:`streambayes.runtime.kafka.kafka_python`, selected with ``STREAMBAYES_KAFKA_CLIENT=confluent``.

- :class:`AssignedSource` assigns partitions explicitly. librdkafka needs a ``group.id`` for
  any consumer: without ``group`` a private one is generated and :meth:`AssignedSource.commit`
  does nothing. The assignment is made at the first poll with the start offsets in it (a
  ``seek`` right after ``assign`` can fail with "Erroneous state"); later seeks are seeks.
- :class:`GroupSource` subscribes in a consumer group; :class:`KafkaSink` produces with
  ``acks=all``, idempotence and the Java client's ``murmur2`` partitioner, so a key lands in
  the same partition whichever backend produced it.

librdkafka reconnects by itself; while the broker is down ``poll`` waits out its timeout and
returns ``[]``. Its log lines go to the ``streambayes.runtime.kafka.confluent.librdkafka``
logger instead of stderr (critical ones only, unless ``debug`` is among the options), and
client errors are logged here, each kind at most once per ``_QUIET`` seconds.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from streambayes.errors import BrokerError, UsageError
from streambayes.runtime.kafka.bounded import bounded
from streambayes.runtime.kafka.deleted import RESET_LOG_LEVEL, LoggedResets, shown_level
from streambayes.runtime.records.sources import Positions, Record
from streambayes.runtime.retry import Backoff, retrying

NAME = "confluent"
_T = TypeVar("_T")
logger = logging.getLogger(__name__)

_SECURITY_NAMES = {
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_username": "sasl.username",
    "sasl_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
}
_TIMEOUT = 10.0  # seconds for a metadata, offsets or admin request
_QUIET = 30.0  # seconds between two log lines about the same client error
_LIBRDKAFKA_LOG = logging.getLogger(__name__ + ".librdkafka")
_TOO_LARGE = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE,
              getattr(KafkaError, "_MSG_SIZE_TOO_LARGE", KafkaError.MSG_SIZE_TOO_LARGE)}
# delivery errors a re-send cannot cure (librdkafka's retriable() is False for most delivery
# errors, timeouts included, so the list is explicit; anything else is re-sent)
_NEVER = {*_TOO_LARGE, KafkaError.TOPIC_AUTHORIZATION_FAILED,
          KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
          KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._AUTHENTICATION,
          KafkaError.TOPIC_EXCEPTION, KafkaError.INVALID_MSG_SIZE, KafkaError.INVALID_RECORD,
          KafkaError.INVALID_REQUIRED_ACKS, KafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT,
          KafkaError.POLICY_VIOLATION, KafkaError._INVALID_ARG}
_RECORD_OVERHEAD = 512  # bytes of batch and record framing around key and value
_MIN_LETTER = 1024  # a refused dead letter is not cut below this


def _usable(make: Callable[[], _T]) -> _T:
    """``make()``, with librdkafka's refusal of an unknown or ill-typed property as a usage error."""
    try:
        return make()
    except KafkaException as exc:
        error = exc.args[0]
        if isinstance(error, KafkaError) and error.code() in (KafkaError._INVALID_ARG,
                                                              KafkaError._INVALID_TYPE):
            raise UsageError(f"Kafka client options (STREAMBAYES_KAFKA_*OPTIONS): "
                             f"{error.str()}") from None
        raise


def client_options(security: Mapping[str, Any] | None = None,
                   extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """librdkafka properties from neutral security names plus raw ``extra`` properties.

    >>> client_options({"sasl_username": "u", "security_protocol": "SASL_SSL"}, {"linger.ms": 5})
    {'sasl.username': 'u', 'security.protocol': 'SASL_SSL', 'linger.ms': 5}
    """
    options = {_SECURITY_NAMES[name]: value for name, value in (security or {}).items()}
    options.update(extra or {})
    return options


class _ErrorLog:
    """An ``error_cb`` that logs each kind of client error at most once per ``_QUIET`` seconds."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.last: dict[int, float] = {}
        self.fatal: KafkaError | None = None

    def __call__(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal = error
        now = time.monotonic()
        if now - self.last.get(error.code(), -_QUIET) >= _QUIET:
            self.last[error.code()] = now
            logger.warning("%s: %s", self.what, error.str())


def _fatal(exc: BaseException) -> KafkaError | None:
    """The fatal :class:`KafkaError` behind ``exc`` (or its cause), if it is one."""
    for e in (exc, exc.__cause__):
        error = e.args[0] if isinstance(e, KafkaException) and e.args else None
        if isinstance(error, KafkaError) and (error.fatal() or error.code() == KafkaError._FATAL):
            return error
    return None


_new_record = tuple.__new__


def _poll(consumer: Consumer, max_records: int, timeout: float, topic: str,
          next_offsets: dict[int, int], errors: _ErrorLog, backoff: Backoff) -> list[Record]:
    """Records from one ``consume`` (errors logged), updating the next offsets per partition.

    Only errors and no record: back off (librdkafka retries by itself; do not spin meanwhile).
    """
    try:  # what is already fetched, else wait for the first record only (consume(n, t) would
        # wait for all n: at a low rate every batch would be held for the whole timeout)
        messages = consumer.consume(max_records, 0)
        if not messages and timeout > 0:
            messages = consumer.consume(1, timeout)
            if messages and max_records > 1:
                messages += consumer.consume(max_records - 1, 0)
    except KafkaException as exc:
        errors(exc.args[0])
        backoff.wait()
        return []
    out: list[Record] = []
    add = out.append
    failed = False
    for m in messages:  # per record: tuple.__new__ skips the named tuple's Python-level __new__
        # (0.5-1.1 us against 1.5 us a record here; librdkafka's consume costs 1.7 us)
        error = m.error()
        if error is not None:
            if error.code() != KafkaError._PARTITION_EOF:
                errors(error)
                failed = True
            continue
        kind, ts = m.timestamp()
        partition, offset = m.partition(), m.offset()
        add(_new_record(Record, (m.value() or b"", m.key(), topic, partition, offset,
                                 None if kind == TIMESTAMP_NOT_AVAILABLE else ts, None, None)))
        next_offsets[partition] = offset + 1
    if failed and not out:
        backoff.wait()
    else:
        backoff.reset()
    return out


def commit_for_lag(consumer: Consumer, topic: str, positions: Mapping[str, Mapping[str, int]],
                   owned: Any = None) -> None:
    """Commit ``positions[topic]`` (of the ``owned`` partitions, if given) for lag monitoring:
    best effort, a failure is a warning. Asynchronous: librdkafka's synchronous commit can block
    for good (confluent-kafka-python#1801; seen here when the broker stalled for 30 s right after
    a restart: both group learners stood still, not even a progress line)."""
    offsets = [TopicPartition(topic, int(p), int(off)) for p, off in positions.get(topic, {}).items()
               if owned is None or int(p) in owned]
    if not offsets:
        return
    try:
        consumer.commit(offsets=offsets, asynchronous=True)
    except KafkaException as exc:
        logger.warning("offset commit for lag monitoring failed: %s", exc.args[0].str())


def _config(bootstrap: str, defaults: Mapping[str, Any],
            options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Client properties: ours, then ``options``; librdkafka logs to Python logging (errors
    reach ``error_cb``, so only its critical lines unless ``debug`` is asked for)."""
    config = {"bootstrap.servers": bootstrap, "logger": _LIBRDKAFKA_LOG, "log_level": 2,
              "log.connection.close": False, **defaults, **dict(options or {})}
    if "debug" in config and "log_level" not in (options or {}):
        config["log_level"] = 7
    return config


# librdkafka stops fetching a partition whose local queue holds queued.min.messages (100,000)
# and looks again after fetch.queue.backoff.ms, 1,000 by default: a reader faster than 100,000
# records a second then waits out most of every second with nothing queued (seen here: the bare
# client read 200,000 SMS records at 113,000/s, or at 590,000/s when its first drain beat the
# fill; with 50 ms, 530,000-900,000/s in all of nine runs). The look costs nothing while the
# queue is full.
QUEUE_BACKOFF_MS = 50


def _consumer_config(bootstrap: str, group: str, options: Mapping[str, Any] | None,
                     errors: _ErrorLog, auto_offset_reset: str) -> dict[str, Any]:
    return _config(bootstrap, {"group.id": group, "enable.auto.commit": False,
                               "enable.auto.offset.store": False,
                               "auto.offset.reset": auto_offset_reset,
                               "fetch.wait.max.ms": 50, "fetch.queue.backoff.ms": QUEUE_BACKOFF_MS,
                               "error_cb": errors}, options)


LOG_START_SECONDS = 5.0  # a learner's look at where a partition now begins waits at most this


def log_starts(consumer: Consumer, topic: str, partitions: Sequence[int],
               timeout: float = LOG_START_SECONDS) -> dict[int, int] | None:
    """The first offset each of ``partitions`` still holds (its low watermark: what retention or
    DeleteRecords left), asked of the broker now; None when it does not say (logged)."""
    starts = {}
    try:
        for p in partitions:
            starts[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout,
                                                       cached=False)[0]
    except KafkaException as exc:
        logger.info("where %s begins is unknown: %s", topic, exc.args[0].str())
        return None
    return starts


class AssignedSource:
    """Records of one topic from explicitly assigned partitions (DESIGN §4: the learner's source).

    ``partitions=None`` means every partition of the topic, including ones added later.
    ``group`` is used only to commit offsets for lag monitoring (:meth:`commit`); the positions
    in the snapshot are the truth. ``connect_deadline`` (seconds) makes an unreachable broker an
    error instead of a wait.
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
        self._errors = _ErrorLog(f"consumer of {topic}")
        self._consumer = _usable(lambda: Consumer(_consumer_config(
            bootstrap, group or f"streambayes-assigned-{uuid.uuid4().hex}", options, self._errors,
            "earliest")))
        retrying(lambda: self._consumer.list_topics(timeout=_TIMEOUT), f"connect to {bootstrap}",
                 (KafkaException,), self.stop, deadline=connect_deadline)
        self._next: dict[int, int] = {}  # partition -> next offset, where known
        self.assigned: list[int] = []  # the partitions read ...
        self._live = False  # ... and whether the client has them (assigned at the next poll)
        self._missing: list[int] = []  # wanted partitions the topic does not have (yet)
        self._last_refresh = -float("inf")
        self._backoff = Backoff(stop=self.stop)
        self._refresh(_TIMEOUT)

    # -- partitions ---------------------------------------------------------------------------
    def available(self, timeout: float = _TIMEOUT) -> list[int] | None:
        """The topic's partitions ([] if the topic is unknown; None if metadata is unavailable)."""
        try:
            meta = self._consumer.list_topics(self.topic, timeout=timeout)
        except KafkaException as exc:
            self._errors(exc.args[0])
            return None
        found = meta.topics.get(self.topic)
        if found is None or found.error is not None:
            return []
        return sorted(found.partitions)

    def refresh(self) -> None:
        """Re-read the topic's partitions now and assign the wanted ones that exist."""
        self._refresh(_TIMEOUT)

    def _refresh(self, timeout: float) -> None:
        available = self.available(timeout)
        self._last_refresh = time.monotonic()
        if available is None:  # broker unreachable: keep reading what is assigned
            return
        desired = available if self.wanted is None else [p for p in self.wanted if p in available]
        missing = [] if self.wanted is None else sorted(set(self.wanted) - set(available))
        if missing and missing != self._missing:
            logger.warning("topic %s has no partition %s yet; waiting for it", self.topic, missing)
        self._missing = missing
        if desired == self.assigned:
            return
        new = [p for p in desired if p not in self.assigned]
        for p in new:
            logger.info("reading %s[%d] from %s", self.topic, p, self._next.get(p, "the beginning"))
        if self._live:  # only the changes: the other partitions keep their fetch queues
            gone = [p for p in self.assigned if p not in desired]
            if gone:
                self._consumer.incremental_unassign([TopicPartition(self.topic, p) for p in gone])
            self._consumer.incremental_assign(self._starts(new))
        self.assigned = desired

    def _starts(self, partitions: list[int]) -> list[TopicPartition]:
        """Each partition at its next offset, or at the beginning when unknown."""
        return [TopicPartition(self.topic, p, self._next.get(p, OFFSET_BEGINNING))
                for p in partitions]

    # -- the Source protocol --------------------------------------------------------------------
    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        """Up to ``max_records`` records; waits up to ``timeout`` s when none are ready."""
        if time.monotonic() - self._last_refresh >= self.refresh_seconds:
            self._refresh(min(2.0, max(timeout, 0.5)))  # a broker that is down: one short wait
        if not self.assigned:
            self.stop.wait(max(timeout, 0.05))
            return []
        if not self._live:  # start offsets go in the assignment (a seek now could fail)
            self._consumer.assign(self._starts(self.assigned))
            self._live = True
        return _poll(self._consumer, max_records, timeout, self.topic, self._next, self._errors,
                     self._backoff)

    def positions(self) -> Positions:
        """{topic: {partition: next offset}} for every partition read or sought."""
        return {self.topic: {str(p): off for p, off in sorted(self._next.items())}}

    def seek(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        """Resume at ``positions[topic]``; partitions not named there restart at the beginning."""
        stored = positions.get(self.topic, {})
        self._next = {int(p): int(off) for p, off in stored.items()}
        if not self._live:
            return
        try:  # a seek purges what was fetched from the old position
            for tp in self._starts(self.assigned):
                self._consumer.seek(tp)
        except KafkaException as exc:  # not fetching yet ("Erroneous state"): assign afresh
            logger.info("seek of %s failed (%s); assigning again", self.topic, exc.args[0].str())
            self._consumer.unassign()
            self._live = False

    def commit(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        """Commit ``positions`` to the consumer group, for lag monitoring only (best effort)."""
        if self.group is None:
            return
        commit_for_lag(self._consumer, self.topic, positions, self.assigned)

    # -- ranges for replay ----------------------------------------------------------------------
    def _watermarks(self) -> dict[int, tuple[int, int]]:
        marks = {}
        for p in self.assigned:
            try:
                marks[p] = self._consumer.get_watermark_offsets(TopicPartition(self.topic, p),
                                                                timeout=_TIMEOUT)
            except KafkaException as exc:
                raise BrokerError(f"offsets of {self.topic}[{p}] unavailable: "
                                  f"{exc.args[0].str()}") from exc
        return marks

    def end_offsets(self) -> dict[int, int]:
        return {p: high for p, (_low, high) in self._watermarks().items()}

    def known_ends(self) -> dict[int, int]:
        """End offsets of the held partitions as the last fetches saw them (for lag): no request,
        so a progress line never disturbs the group or waits on a broker that is away."""
        held = [tp for tp in self._consumer.assignment() if tp.topic == self.topic]
        ends = {tp.partition: self._consumer.get_watermark_offsets(tp, cached=True)[1] for tp in held}
        return {p: end for p, end in ends.items() if end is not None and end >= 0}

    def beginning_offsets(self) -> dict[int, int]:
        return {p: low for p, (low, _high) in self._watermarks().items()}

    def log_starts(self, partitions: Sequence[int]) -> dict[int, int] | None:
        """:func:`log_starts` of ``partitions`` (a learner resuming from a snapshot)."""
        return log_starts(self._consumer, self.topic, partitions)

    def offsets_for_time(self, ms: int) -> dict[int, int | None]:
        """Per partition, the first offset with a timestamp >= ``ms`` (None: no such record)."""
        query = [TopicPartition(self.topic, p, ms) for p in self.assigned]
        try:
            found = self._consumer.offsets_for_times(query, timeout=_TIMEOUT)
        except KafkaException as exc:
            raise BrokerError(f"offsets of {self.topic} at {ms} ms unavailable: "
                              f"{exc.args[0].str()}") from exc
        return {tp.partition: (None if tp.offset < 0 else tp.offset) for tp in found}

    def close(self) -> None:
        bounded(self._consumer.close, _TIMEOUT, f"closing the consumer of {self.topic}")


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
        self._errors = _ErrorLog(f"group {group} on {topic}")
        config = _consumer_config(bootstrap, group, options, self._errors, auto_offset_reset)
        # librdkafka's warning of a reset past deleted records says which (see .deleted): the
        # member's client logs to it, its lines shown as before (to a logger of the options too)
        self._next: dict[int, int] = {}
        self._resets = LoggedResets(topic, config.get("logger") or _LIBRDKAFKA_LOG,
                                    shown_level(config), self._next.get)
        config["logger"] = self._resets
        config["log_level"] = max(int(config.get("log_level", 6)), RESET_LOG_LEVEL)
        self._consumer = _usable(lambda: Consumer(config))
        # revoked or lost partitions' positions are another's: forgotten after a poll in which
        # librdkafka handed some over (the callback runs inside consume, on this thread; librdkafka
        # then unassigns them itself). Until stop 28 every poll asked for the assignment: a round
        # trip to librdkafka's thread, ~0.1 ms a poll, where rebalances are rare.
        me = weakref.ref(self)  # no reference cycle through the consumer's callbacks

        def revoked(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            source = me()
            if source is not None:
                source._rebalanced = True
                source._resets.revoked(tp.partition for tp in partitions if tp.topic == topic)

        def assigned(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            source = me()  # (librdkafka assigns them itself after the callback)
            if source is not None:
                source._resets.assigned(tp.partition for tp in partitions if tp.topic == topic)

        self._consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
        self._rebalanced = False
        self._backoff = Backoff(stop=self.stop)
        self._abandoned = False  # a commit given up on is still running (see close)

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        records = _poll(self._consumer, max_records, timeout, self.topic, self._next, self._errors,
                        self._backoff)
        if self._resets.owed and records:  # a reset past deleted records lands (see .deleted)
            self._resets.seen(records, self._start)
        if self._rebalanced:  # after the poll: a batch can hold records fetched before the revoke
            self._rebalanced = False
            owned = {tp.partition for tp in self._consumer.assignment() if tp.topic == self.topic}
            for p in [p for p in self._next if p not in owned]:
                del self._next[p]
        return records

    def _start(self, partition: int) -> int | None:
        """Where ``partition`` begins as the client's fetches saw it (no request)."""
        low = self._consumer.get_watermark_offsets(TopicPartition(self.topic, partition),
                                                   cached=True)[0]
        return None if low is None or low < 0 else low

    @property
    def deleted(self) -> int:
        """Offsets the group owed that were deleted before it read them (:mod:`.deleted`)."""
        return self._resets.deleted

    def positions(self) -> Positions:
        return {self.topic: {str(p): off for p, off in sorted(self._next.items())}}

    def known_ends(self) -> dict[int, int]:
        """End offsets of the held partitions as the last fetches saw them (for lag): no request,
        so a progress line never disturbs the group or waits on a broker that is away."""
        held = [tp for tp in self._consumer.assignment() if tp.topic == self.topic]
        ends = {tp.partition: self._consumer.get_watermark_offsets(tp, cached=True)[1] for tp in held}
        return {p: end for p, end in ends.items() if end is not None and end >= 0}

    def seek(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        raise BrokerError("a consumer-group source resumes from the group's committed offsets")

    def commit(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        """Commit the next offsets of partitions still assigned to this member."""
        owned = {tp.partition for tp in self._consumer.assignment()}
        offsets = [TopicPartition(self.topic, int(p), int(off))
                   for p, off in positions.get(self.topic, {}).items() if int(p) in owned]
        if offsets:
            try:  # a synchronous commit can wait for good on a broker that went away
                self._abandoned |= not bounded(
                    lambda: self._consumer.commit(offsets=offsets, asynchronous=False), _TIMEOUT,
                    "an offset commit (the events after the last one may be predicted twice)")
            except KafkaException as exc:  # a rebalance: the new owner re-reads from the last commit
                logger.warning("offset commit failed (%s); those events may be predicted twice",
                               exc.args[0].str())

    def close(self) -> None:
        """Leave the group, for up to ``_TIMEOUT`` s; not at all when a commit is still running
        (a handle must not be destroyed under a call: it ends with the process)."""
        if self._abandoned:
            logger.warning("not leaving the group %s: its last commit is still running",
                           self.group)
            return
        bounded(self._consumer.close, _TIMEOUT, f"leaving the group {self.group}")


def __getattr__(name: str):
    """``KafkaSink`` and ``never_succeeds`` live in :mod:`.confluent_sink`, ``create_topic`` and
    ``wait_for_records`` in :mod:`.confluent_admin` (imported on first use, so any of the modules
    may be imported first)."""
    if name in ("KafkaSink", "never_succeeds"):
        from streambayes.runtime.kafka import confluent_sink

        return getattr(confluent_sink, name)
    if name in ("create_topic", "wait_for_records"):
        from streambayes.runtime.kafka import confluent_admin

        return getattr(confluent_admin, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
