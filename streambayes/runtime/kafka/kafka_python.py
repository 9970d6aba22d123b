"""Kafka through kafka-python (``STREAMBAYES_KAFKA_CLIENT=kafka-python``; confluent is the
default): sources, a sink, admin helpers.

- :class:`AssignedSource` assigns partitions explicitly (all of a topic's, or a given set) — the
  learner and replay use it. Its positions are the next offsets of the records it has handed
  out (or was told to seek to), so a snapshot taken after learning a poll's records stores
  exactly what the state reflects. Partitions appear later (a topic created later, partitions
  added) are picked up on a metadata refresh and read from their beginning. ``learn
  --partitions`` and ``replay`` use its subclass :class:`~.kafka_python_fetch.FetchedSource`,
  which fetches in a helper process.
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
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.consumer.subscription_state import OffsetResetStrategy
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
from streambayes.runtime.kafka.deleted import warn_deleted
from streambayes.runtime.records.sources import Positions, Record
from streambayes.runtime.retry import Backoff, retrying

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


def client_of(cls: type, **kwargs: Any) -> Any:
    """``cls(**kwargs)``, a kafka-python client; when the construction fails after the client's
    I/O thread started (a bootstrap the broker does not answer), that thread is stopped:
    kafka-python 3.0.12 leaves it running, one more thread with each failed attempt (a learner
    retrying through an hour's outage made dozens)."""
    client = cls.__new__(cls)
    try:
        client.__init__(**kwargs)
    except BaseException:
        stop = getattr(getattr(client, "_net", None), "stop", None)
        if stop is not None:
            try:
                stop()
            except Exception as exc:  # noqa: BLE001 (the construction's error is the one to raise)
                logger.debug("stopping the I/O thread of a %s that failed: %s", cls.__name__, exc)
        raise
    return client


def new_consumer(**kwargs: Any) -> KafkaConsumer:
    """A ``KafkaConsumer`` (``kwargs`` as given; :func:`client_of`) whose poll does not sleep
    with records waiting (:func:`wake_on_landed_fetch`)."""
    consumer = client_of(KafkaConsumer, **kwargs)
    wake_on_landed_fetch(consumer)
    return consumer


def wake_on_landed_fetch(consumer: Any) -> bool:
    """Keep ``consumer.poll`` from sleeping while a fetched batch waits in its buffer.

    kafka-python 3's poll drains its buffer, then sends the next fetches; when neither gave a
    record and no fetch is in flight it sleeps ``retry_backoff_ms`` (100 ms). A fetch response
    that lands between the drain and the send (on the client's I/O thread) is buffered, so no
    fetch is sent and none is in flight: poll sleeps 100 ms with the records in hand. At 2,000
    events/s that was the predictor's p99 (90-140 ms in 1 run of 3; issue 13). The client's
    fetcher is wrapped so that this case says "not idle", and poll drains the buffer at once.
    Returns whether it could (False, and nothing changed, on a client without those parts).
    """
    fetcher = getattr(consumer, "_fetcher", None)
    inner = getattr(fetcher, "fetch_records", None)
    if inner is None or not hasattr(fetcher, "_completed_fetches"):
        return False
    owner = weakref.ref(fetcher)  # no cycle through the fetcher's own attribute

    def fetch_records(*args: Any, **kwargs: Any) -> Any:
        out = inner(*args, **kwargs)
        if type(out) is not tuple or len(out) != 2:  # another kafka-python: as it answered
            return out
        records, idle = out
        held = owner()
        if idle and not records and held is not None and held._completed_fetches:
            return records, False  # landed meanwhile: the next round drains it
        return out

    fetch_records.wakes_on_landed_fetch = True  # type: ignore[attr-defined]
    fetcher.fetch_records = fetch_records
    return True


def report_resets_past_deleted(consumer: Any, report: Callable[[int, int, int], None]) -> bool:
    """Call ``report(partition, fetched, start)`` when ``consumer`` finds the offset it fetches
    (``fetched``: a group's committed offset, or its own position after falling behind) no longer
    in the partition and its reset policy moves it to ``start``, the partition's beginning, above
    it: offsets ``fetched`` to ``start - 1`` were deleted (retention or DeleteRecords) before it
    read them. Exactly the client's own reset: no question of its own, no thread, no other client.

    kafka-python 3 marks such a partition for a reset with its default policy
    (``request_offset_reset(tp)`` without a strategy, position still at the offset fetched) and
    later seeks it to the answer of its ListOffsets (``_reset_offset_if_needed``); both are
    wrapped on this client's objects. An explicit ``seek_to_beginning``/``_end`` (a strategy
    given) is not a loss, nor is a reset to the end (``auto_offset_reset="latest"`` skips by
    choice). Returns whether it could (False, nothing changed, on a client without
    those parts)."""
    subscription = getattr(consumer, "_subscription", None)
    fetcher = getattr(consumer, "_fetcher", None)
    mark = getattr(subscription, "request_offset_reset", None)
    seek = getattr(fetcher, "_reset_offset_if_needed", None)
    if mark is None or seek is None or not hasattr(subscription, "assignment"):
        return False
    # partition -> (its state then, the offset found out of range); a state replaced since (the
    # partition revoked and given back) is not that reset's
    fetched: dict[Any, tuple[Any, int]] = {}
    lock = getattr(subscription, "_lock", None) or threading.RLock()  # (the state's own: an RLock)

    def request_offset_reset(partition: Any, offset_reset_strategy: Any = None) -> Any:
        with lock:
            fetched.pop(partition, None)
            if offset_reset_strategy is None:  # the client's own reset (out of range, truncation)
                state = subscription.assignment.get(partition)
                position = getattr(state, "position", None)
                if position is not None:
                    fetched[partition] = (state, int(position.offset))
            return mark(partition, offset_reset_strategy)

    def reset_offset_if_needed(partition: Any, timestamp: Any, offset: Any) -> Any:
        with lock:
            out = seek(partition, timestamp, offset)
            state, was = fetched.pop(partition, (None, None))
            position = getattr(state, "position", None)
            if was is not None and subscription.assignment.get(partition) is state \
                    and timestamp == OffsetResetStrategy.EARLIEST and position is not None \
                    and int(position.offset) == int(offset) > was:  # (latest: skipped by choice)
                report(partition.partition, was, int(offset))
            return out

    subscription.request_offset_reset = request_offset_reset
    fetcher._reset_offset_if_needed = reset_offset_if_needed
    return True


def client_options(security: Mapping[str, Any] | None = None,
                   extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """kafka-python keyword arguments from neutral security names plus raw ``extra`` options.

    >>> client_options({"sasl_username": "u", "security_protocol": "SASL_SSL"}, {"linger_ms": 5})
    {'sasl_plain_username': 'u', 'security_protocol': 'SASL_SSL', 'linger_ms': 5}
    """
    options = {_SECURITY_NAMES[name]: value for name, value in (security or {}).items()}
    options.update(extra or {})
    return options


def held_partitions(consumer: Any, topic: str) -> set[int]:
    """The partitions of ``topic`` the group gives ``consumer`` now, less those pending
    revocation: an eager rebalance revokes every partition but keeps it in the client's
    assignment, not fetched, until its JoinGroup completes (a poll meanwhile returns nothing).
    kafka-python's state per partition; its public assignment if that internal shape changes."""
    try:
        states = list(consumer._subscription.assignment.items())
        return {tp.partition for tp, state in states
                if tp.topic == topic and not state._pending_revocation}
    except AttributeError:
        return {tp.partition for tp in consumer.assignment() if getattr(tp, "topic", topic) == topic}


def known_ends(consumer: Any, topic: str) -> dict[int, int]:
    """End offsets of the partitions ``consumer`` holds (:func:`held_partitions`) as its last
    fetches saw them (for lag): no request, so a progress line never disturbs the group or waits
    on a broker that is away."""
    ends = {p: consumer.highwater(TopicPartition(topic, p))
            for p in sorted(held_partitions(consumer, topic))}
    return {p: end for p, end in ends.items() if end is not None}


LOG_START_SECONDS = 5.0  # a learner's look at where a partition now begins waits at most this


def log_starts(consumer: KafkaConsumer, topic: str, partitions: Sequence[int],
               timeout: float = LOG_START_SECONDS) -> dict[int, int] | None:
    """The first offset each of ``partitions`` still holds (what retention or DeleteRecords
    left), asked of the broker now; None when it does not say (logged)."""
    tps = [TopicPartition(topic, p) for p in partitions]
    try:
        found = consumer.beginning_offsets(tps, timeout_ms=int(timeout * 1000))
    except KafkaError as exc:
        logger.info("where %s begins is unknown: %s", topic, exc)
        return None
    return {tp.partition: offset for tp, offset in found.items()}


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


def assigned_options(bootstrap: str, group: str | None, refresh_seconds: float,
                     options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The KafkaConsumer arguments of an :class:`AssignedSource` (the user's ``options`` win)."""
    kwargs = dict(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                  auto_offset_reset="earliest", metadata_max_age_ms=int(refresh_seconds * 1000),
                  **dict(options or {}))
    kwargs.setdefault("bootstrap_timeout_ms", _BOOTSTRAP_MS)
    return kwargs


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
        kwargs = assigned_options(bootstrap, group, refresh_seconds, options)
        self._consumer = retrying(lambda: new_consumer(**kwargs), f"connect to {bootstrap}",
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

    def known_ends(self) -> dict[int, int]:
        """:func:`known_ends` of this source's consumer."""
        return known_ends(self._consumer, self.topic)

    def beginning_offsets(self) -> dict[int, int]:
        tps = [TopicPartition(self.topic, p) for p in self.assigned]
        return {tp.partition: off for tp, off in self._consumer.beginning_offsets(tps).items()}

    def log_starts(self, partitions: Sequence[int]) -> dict[int, int] | None:
        """:func:`log_starts` of ``partitions`` (a learner resuming from a snapshot)."""
        return log_starts(self._consumer, self.topic, partitions)

    def offsets_for_time(self, ms: int) -> dict[int, int | None]:
        """Per partition, the first offset with a timestamp >= ``ms`` (None: no such record)."""
        query = {TopicPartition(self.topic, p): ms for p in self.assigned}
        found = self._consumer.offsets_for_times(query)
        return {tp.partition: (None if hit is None else hit.offset) for tp, hit in found.items()}

    def close(self) -> None:
        self._consumer.close(autocommit=False)


# Group members refresh metadata every 5 s, not kafka-python's 5 minutes, so new partitions show
# up soon.
_METADATA_MAX_AGE_MS = 5000
# A group leader that assigns before its client has the topic's metadata gives every member
# nothing ("No partition metadata for topic"), and kafka-python 3 does not always join again when
# the metadata arrives: seen in CI runs and in a bench (no record for 20 and 60 s; the race was
# not reproduced here, a test makes such an assignment with its own assignor). A member that
# holds no partition asks the broker every 5 s whether any member holds one; when twice in a row
# none does and the topic has partitions, it joins the group again.
_UNASSIGNED_CHECK_SECONDS = 5.0
_ADMIN_TIMEOUT_MS = 5000  # a check waits at most this long per request


# Before a member first joins, its client asks for the topic's partitions (for at most this long,
# a topic that does not exist yet included): a leader that has them assigns them, and the check
# above is left for the cases it cannot prevent (a rebalance, a topic made later).
_TOPIC_WAIT_SECONDS = 3.0


def _await_topic(consumer: Any, topic: str, stop: threading.Event,
                 seconds: float = _TOPIC_WAIT_SECONDS) -> None:
    """Wait (at most ``seconds``, or until ``stop``) until ``consumer``'s metadata knows
    ``topic``'s partitions; best effort: a failure is logged and the member joins all the same."""
    deadline = time.monotonic() + seconds
    while not stop.is_set():
        try:
            if consumer.partitions_for_topic(topic):
                return
        except Exception as exc:  # noqa: BLE001 (a head start, not a condition of joining)
            logger.debug("partitions of %s unknown before joining: %s", topic, exc)
        if time.monotonic() >= deadline:
            return
        stop.wait(0.25)


def unheld_partitions(topic: str, topics: Sequence[Mapping], group: Mapping | None
                      ) -> set[int] | None:
    """The partitions of ``topic`` that no member of the (stable) ``group`` holds; None when the
    answer is not clear (a group not stable or without members, a member's assignment the broker
    did not describe, the topic unknown). ``topics`` and ``group`` are kafka-python 3's
    ``describe_topics`` and ``describe_groups`` answers.

    >>> held = {"assigned_partitions": [{"topic": "t", "partitions": [1]}]}
    >>> group = {"group_state": "Stable", "members": [{"member_assignment": held},
    ...          {"member_assignment": {"assigned_partitions": []}}]}
    >>> topics = [{"name": "t", "error_code": 0, "partitions": [{"partition_index": 0},
    ...                                                          {"partition_index": 1}]}]
    >>> unheld_partitions("t", topics, group)
    {0}
    >>> held["assigned_partitions"][0]["partitions"] = [1, 0]; unheld_partitions("t", topics, group)
    set()
    >>> group["group_state"] = "PreparingRebalance"; print(unheld_partitions("t", topics, group))
    None
    """
    partitions = {part.get("partition_index") for t in topics if t.get("name") == topic
                  and not t.get("error_code") for part in t.get("partitions") or []}
    if not partitions or None in partitions or not group or group.get("error") \
            or group.get("group_state") != "Stable" or not group.get("members"):
        return None
    for member in group["members"]:
        assignment = member.get("member_assignment")
        if not isinstance(assignment, Mapping):
            return None
        for part in assignment.get("assigned_partitions") or []:
            if part.get("topic") == topic:
                partitions.difference_update(part.get("partitions") or [])
    return partitions


def nobody_holds(topic: str, topics: Sequence[Mapping], group: Mapping | None) -> int:
    """The partition count of ``topic`` when the (stable) ``group`` gives no member any of them;
    0 when a member holds one, or when the answer is not clear (:func:`unheld_partitions`).

    >>> held = {"assigned_partitions": [{"topic": "t", "partitions": [0]}]}
    >>> group = {"group_state": "Stable", "members": [{"member_assignment": held},
    ...          {"member_assignment": {"assigned_partitions": []}}]}
    >>> topics = [{"name": "t", "error_code": 0, "partitions": [{"partition_index": 0},
    ...                                                          {"partition_index": 1}]}]
    >>> nobody_holds("t", topics, group)
    0
    >>> held["assigned_partitions"] = []; nobody_holds("t", topics, group)
    2
    >>> group["members"][0]["member_assignment"] = ""  # not described (Tansu): unclear
    >>> nobody_holds("t", topics, group)
    0
    """
    unheld = unheld_partitions(topic, topics, group)
    count = sum(len(t.get("partitions") or []) for t in topics
                if t.get("name") == topic and not t.get("error_code"))
    return count if unheld is not None and len(unheld) == count else 0


def admin_options(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The ``KafkaAdminClient`` arguments among a consumer's ``kwargs`` (its connection and
    security), with a short request timeout: the assignment checks wait at most that long."""
    options = {k: v for k, v in kwargs.items() if k in KafkaAdminClient.DEFAULT_CONFIG
               and k not in ("metadata_max_age_ms", "request_timeout_ms")}
    options["request_timeout_ms"] = _ADMIN_TIMEOUT_MS
    return options


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
        # the group leader sees new partitions (and a topic it missed) within 5 s, not 5 minutes
        kwargs.setdefault("metadata_max_age_ms", _METADATA_MAX_AGE_MS)
        self._consumer = retrying(lambda: new_consumer(**kwargs), f"connect to {bootstrap}",
                                  _CONNECT_ERRORS, self.stop)
        _await_topic(self._consumer, topic, self.stop)
        self._admin_options = admin_options(kwargs)
        # records deleted before the group read them: the client's own reset says so, reported
        # by poll on the caller's thread (no question, thread or client of its own; stop 34's
        # watch cost an admin client and a 2 s wait at each assignment). No rebalance listener:
        # kafka-python 3 runs one on its I/O loop, and with one (even one that only queued) a
        # member joining a group of one failed to get a partition within 40 s in 4 of 24 runs
        self._resets: deque[tuple[int, int, int]] = deque()
        self._deleted = 0
        if not report_resets_past_deleted(
                self._consumer, lambda p, fetched, start: self._resets.append((p, fetched, start))):
            logger.info("this kafka-python cannot report records of %s deleted before the group "
                        "read them (its offset reset is not where kafka-python 3 has it)", topic)
        self._consumer.subscribe([topic])
        self._next: dict[int, int] = {}
        self._backoff = Backoff(stop=self.stop)
        self._admin: Any = None
        self._idle_since: float | None = None  # since when this member holds no partition
        self._unassigned = 0  # checks in a row that found no member holding a partition
        self.checks = 0  # checks made (tests)
        # a static member's leave does not rebalance: joining again would change nothing
        self._watch = kwargs.get("group_instance_id") is None
        self.clock = time.monotonic

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        out = _poll(self._consumer, max_records, timeout, self.topic, self._next, self._backoff)
        self._report_resets()
        owned = held_partitions(self._consumer, self.topic)
        for p in [p for p in self._next if p not in owned]:  # revoked: its position is another's
            del self._next[p]
        if owned:
            self._idle_since = None
        else:
            self._check_unassigned()
        return out

    def _report_resets(self) -> None:
        while self._resets:
            p, fetched, start = self._resets.popleft()
            self._deleted += start - fetched
            warn_deleted(self.topic, p, fetched, start)

    def _check_unassigned(self) -> None:
        """Every ``_UNASSIGNED_CHECK_SECONDS`` while this member holds nothing, ask the broker
        (:func:`nobody_holds`); twice in a row "nobody holds any": join the group again. Best
        effort: an admin client that cannot be made turns the check off (logged once)."""
        now = self.clock()
        if not self._watch or self.stop.is_set():
            return
        if self._idle_since is None:
            self._idle_since = now
            return
        if now - self._idle_since < _UNASSIGNED_CHECK_SECONDS:
            return
        self._idle_since = now
        self.checks += 1
        try:
            if self._admin is None:
                self._admin = client_of(KafkaAdminClient, **self._admin_options)
            topics = self._admin.describe_topics([self.topic])
            group = self._admin.describe_groups([self.group]).get(self.group)
        except Exception as exc:  # noqa: BLE001 (a check, not the stream: never ends the run)
            if self._admin is None:
                self._watch = False
                logger.warning("cannot check the assignment of group %s (%s); not checked again",
                               self.group, exc)
            else:
                logger.debug("describing group %s failed: %s", self.group, exc)
                self._close_admin()  # made again at the next check (a moved coordinator)
            return
        found = nobody_holds(self.topic, topics, group)
        self._unassigned = self._unassigned + 1 if found else 0
        if found and self._unassigned >= 2:
            self._unassigned = 0
            logger.warning("group %s gave no member any of the %d partitions of %s (assigned "
                           "without the topic's metadata): joining again", self.group, found,
                           self.topic)
            self._consumer.unsubscribe()
            self._consumer.subscribe([self.topic])

    def _close_admin(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception as exc:  # noqa: BLE001
                logger.debug("closing the admin client: %s", exc)

    def positions(self) -> Positions:
        return {self.topic: {str(p): off for p, off in sorted(self._next.items())}}

    def known_ends(self) -> dict[int, int]:
        """:func:`known_ends` of this source's consumer."""
        return known_ends(self._consumer, self.topic)

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

    @property
    def deleted(self) -> int:
        """Offsets the group owed that were deleted before it read them
        (:func:`report_resets_past_deleted`; counted by each poll, final once closed)."""
        return self._deleted

    def close(self) -> None:
        try:
            self._close_admin()
        finally:
            try:
                self._consumer.close(autocommit=False)
            finally:
                self._report_resets()  # a reset since the last poll


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


def __getattr__(name: str):
    """``KafkaSink`` and ``never_succeeds`` live in :mod:`.kafka_python_sink` (imported on first use, so
    either module may be imported first)."""
    if name in ("KafkaSink", "never_succeeds"):
        from streambayes.runtime.kafka import kafka_python_sink

        return getattr(kafka_python_sink, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
