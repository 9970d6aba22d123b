"""Kafka transactions for exactly-once posteriors (``streambayes predict --exactly-once``).

:class:`TransactionalSink` is a sink (``send``/``flush``/``close``) on a transactional producer of
either client backend (``confluent``: librdkafka; ``kafka-python`` >= 2.1: its
``KafkaProducer(transactional_id=...)``; both in :mod:`~streambayes.runtime.kafka.txn_producers`).
:meth:`TransactionalSink.exactly_once` owns the order of one micro-batch's steps, and is the only
place that does:

1. ``begin_transaction``;
2. ``publish()``: the posteriors and dead letters of the batch are sent (into the transaction);
3. ``send_offsets_to_transaction``: the batch's next offsets, with the consumer's group metadata,
   so the broker refuses the offsets of a member that was fenced by a rebalance (KIP-447);
4. ``commit_transaction``.

A failure in 1-4 aborts the transaction and raises :class:`Aborted`; the loop then rewinds the
consumer to the start of the batch (:func:`rewind`) and serves it again. An error that no abort
can cure (a refused authorization, a producer fenced again and again, which means another live
process uses the same transactional id, or the abort itself fails) is a
:class:`~streambayes.errors.BrokerError`: the predictor exits 1 and a restart resumes exactly once
from the last committed offsets. A predictor's producer fenced once (after a broker restart the
coordinator may time out and bump the epoch of an open transaction) is replaced by a new one with
the same id and the batch served again, at most :data:`MAX_RENEWALS` times in
:data:`RENEWAL_WINDOW` seconds (``renew=True``: the consumer group's metadata in each transaction
fences a zombie predictor). A learner's shard producer is never renewed: a new owner of the shard
fences the old one through the transactional id (:class:`Fenced`). A confluent offsets or abort
call that does not return within its timeout and :data:`STUCK_MARGIN` (librdkafka#5456) makes the
producer broken, as fenced: it is left behind in its call thread. A stuck commit (or one that
kept timing out for :data:`COMMIT_PATIENCE`) may still commit: it is never aborted
(:class:`StuckCommit`). A predictor settles it with a new producer and raises :class:`Unsettled`
(its loop reads the committed offsets); a learner's shard exits 1 (the restart settles it).
A predictor's abort that times out (the broker is away, or librdkafka lost its way after a stall)
also renews the producer: the new one's ``init_transactions`` aborts the open transaction on the
broker; so does a predictor's offsets call that went on timing out for :data:`OFFSETS_PATIENCE`
(seen in CI after a broker stall: every call timed out for minutes, the predictor idle). A new
producer is started again with backoff while its ``init_transactions`` times out, for up to
:data:`ABORT_PATIENCE` seconds.

**Transactional id.** One per predictor instance, stable across its restarts: the broker then
fences the instance that was killed (its producer epoch is bumped, its open transaction aborted) as
soon as the new one calls ``init_transactions``. ``--transactional-id`` sets it; the default is
``streambayes-predict-<group>-<hostname>``, stable for a process restarted on the same host or
container. Two predictors on one host need distinct ids (else each fences the other).
``transaction.timeout.ms`` defaults to 10 s (:data:`TRANSACTION_TIMEOUT_MS`; Kafka's default is
60 s): how long the partitions of a predictor killed and *not* restarted stay blocked for the
member that takes them over (its read_committed offset fetch waits for the open transaction).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from streambayes.errors import BrokerError, NetworkUnavailable
from streambayes.runtime.kafka.bounded import Stuck
from streambayes.runtime.kafka.txn_producers import (  # noqa: F401 (re-exported: the module's names)
    _BACKENDS,
    _TIMEOUT,
    ABORT_PATIENCE,
    COMMIT_PATIENCE,
    OFFSETS_PATIENCE,
    STUCK_MARGIN,
    TRANSACTION_TIMEOUT_MS,
    StuckCommit,
    _Confluent,
    _KafkaPython,
    _resumed,
)
from streambayes.runtime.records.sinks import fit, key_bytes
from streambayes.runtime.records.sources import Record
from streambayes.runtime.retry import Backoff

logger = logging.getLogger(__name__)
MAX_RENEWALS = 3  # fenced producers replaced within RENEWAL_WINDOW before giving up (exit 1)
RENEWAL_WINDOW = 60.0


class Aborted(Exception):  # noqa: N818 (a state, not a bug: the batch is served again)
    """The batch's transaction was aborted; nothing of it is visible to read_committed readers."""


class Fenced(BrokerError):  # noqa: N818 (a state: a newer producer took the transactional id)
    """The producer cannot go on (fenced by a newer instance with its transactional id, or
    another fatal error); its open transaction is aborted by the broker."""


class Unsettled(Aborted):
    """A commit whose outcome was unknown (:class:`StuckCommit`) was settled by a new producer
    with the same transactional id: its ``init_transactions`` fences the old one and has the
    broker complete or abort the transaction, as a restart would. The loop then reads the group's
    committed offsets to learn which (:func:`committed_offsets`): a committed batch goes on, an
    aborted one is served again."""


def default_transactional_id(group: str) -> str:
    """``streambayes-predict-<group>-<hostname>`` (documented above).

    >>> default_transactional_id("g").startswith("streambayes-predict-g-")
    True
    """
    prefix = group if group.startswith("streambayes-predict") else f"streambayes-predict-{group}"
    return f"{prefix}-{socket.gethostname()}"


def consumer_of(source: Any) -> Any:
    """The client consumer of a backend's ``GroupSource`` (needed for its group metadata)."""
    consumer = getattr(source, "_consumer", None)
    if consumer is None or not hasattr(source, "group"):
        raise BrokerError("--exactly-once needs a Kafka consumer-group source")
    return consumer


def next_offsets(records: list[Record]) -> dict[int, tuple[int, int]]:
    """Per partition: (first offset, next offset) of a batch.

    >>> next_offsets([Record(b"", None, "t", 0, 5, None), Record(b"", None, "t", 0, 6, None)])
    {0: (5, 7)}
    """
    out: dict[int, tuple[int, int]] = {}
    for r in records:
        first, after = out.get(r.partition, (r.offset, r.offset + 1))
        out[r.partition] = (min(first, r.offset), max(after, r.offset + 1))
    return out


class TransactionalSink:
    """A sink whose sends join the current transaction (see the module doc)."""

    def __init__(self, client: str, bootstrap: str, transactional_id: str, *,
                 options: Mapping[str, Any] | None = None, stop: threading.Event | None = None,
                 linger_ms: int = 0, renew: bool = False) -> None:
        if client not in _BACKENDS:
            raise BrokerError(f"Kafka client {client!r} has no transactional producer")
        self.client = client
        self.transactional_id = transactional_id
        self.stop = stop or threading.Event()
        self.count = 0
        self.transactions = 0
        self.aborts = 0
        self.seconds = 0.0  # spent in committed transactions (begin to commit)
        self.slowest = 0.0
        self._open = False
        self._make = lambda: _BACKENDS[client](bootstrap, transactional_id, dict(options or {}),
                                               linger_ms)
        self._impl = self._first()
        # replace a fenced producer (the predictor: its consumer group fences zombies); never for
        # a learner's shard producer, whose fencing by a new owner is the zombie fence itself
        self.renew = renew
        self.renewals: list[float] = []  # when a fenced producer was replaced (monotonic)
        self.max_bytes = self._impl.max_bytes
        logger.info("transactional producer %s ready (%s)", transactional_id, client)

    def send(self, topic: str, key: str | bytes | None, value: Any) -> None:
        """Send ``value`` in the open transaction (raises :class:`~.sinks.MessageTooLarge` for a
        value over the limit that is not a dead letter: nothing is sent then)."""
        if not self._open:
            raise BrokerError("send outside a transaction (use TransactionalSink.exactly_once)")
        k = key_bytes(key)
        self._impl.send(topic, k, fit(value, self.max_bytes - len(k or b""), f"a message to {topic}"))
        self.count += 1

    def send_raw(self, topic: str, key: bytes, value: bytes | None,
                 partition: int | None = None) -> None:
        """Send ``value`` as is (None: a tombstone) in the open transaction: the records of a
        snapshot in a Kafka state topic (``learn --exactly-once``), sized by the store."""
        if not self._open:
            raise BrokerError("send outside a transaction (use TransactionalSink.exactly_once)")
        self._impl.send(topic, key, value, partition)
        self.count += 1

    def flush(self) -> None:
        """Nothing to do between transactions (commit waits for every message of its batch)."""

    def exactly_once(self, publish: Callable[[], None], consumer: Any, topic: str,
                     offsets: Mapping[int, int]) -> None:
        """Begin; ``publish()``; send ``offsets`` ({partition: next offset} of ``topic``) with the
        consumer's group metadata (none when ``consumer`` is None); commit. Raises
        :class:`Aborted` after an abort, or :class:`~streambayes.errors.BrokerError` when no
        abort can cure the failure."""
        start = time.monotonic()
        try:
            self._impl.begin()
            self._open = True
            publish()
            if consumer is not None:
                self._impl.offsets(consumer, topic, offsets, OFFSETS_PATIENCE if self.renew else None)
            self._impl.commit()
            self._open = False
            self.transactions += 1
            took = time.monotonic() - start
            self.seconds += took
            self.slowest = max(self.slowest, took)
        except Exception as exc:
            self._open = False
            self._abort(exc)
            if not self._impl.retriable(exc):  # not the broker's doing (a bug): do not loop on it
                raise
            raise Aborted(f"{type(exc).__name__}: {exc}") from exc

    def _abort(self, cause: BaseException) -> None:
        if isinstance(cause, StuckCommit):  # it may still commit: never aborted
            if self.renew and self._renew(cause, close=False):
                raise Unsettled(f"{type(cause).__name__}: {cause}") from cause
            self._cannot_go_on(cause)
            return
        if self._impl.fatal(cause) or self._impl.broken() or isinstance(cause, Stuck):
            self._cannot_go_on(cause)  # (Stuck: also an offsets call that timed out for too long)
            return
        logger.warning("aborting the transaction (%s: %s); the batch is served again",
                       type(cause).__name__, cause)
        start = time.monotonic()
        backoff = Backoff(0.1, 5.0, stop=self.stop)
        while True:
            try:
                self._impl.abort()
                break
            except Exception as exc:
                if self._impl.fatal(exc) or self._impl.broken():
                    self._cannot_go_on(exc)
                    return
                if self._impl.timed_out(exc) and self.renew and self._impl.renewable(exc):
                    # a new producer's init_transactions aborts the open transaction on the broker
                    # (as for a fenced one): calling the abort again once lasted minutes after a
                    # broker stall, with the predictor's partitions idle all along
                    self._cannot_go_on(exc)
                    return
                if (self._impl.resumable(exc) and time.monotonic() - start < ABORT_PATIENCE
                        and backoff.wait()):
                    logger.warning("the abort did not finish (%s): trying again", exc)
                    continue
                raise BrokerError(f"cannot abort a transaction of {self.transactional_id} ({exc}); "
                                  "a restart resumes from the last committed offsets "
                                  "(exactly once)") from exc
        self.aborts += 1
        logger.info("aborted in %.3f s", time.monotonic() - start)

    def _cannot_go_on(self, cause: BaseException) -> None:
        """The producer is fenced or broken: renew it (a predictor's, see the module) or raise
        :class:`Fenced` (a learner's shard: its new owner fenced it)."""
        if self.renew and self._impl.renewable(cause) and self._renew(cause):
            return
        raise Fenced(f"transactional producer {self.transactional_id} cannot go on "
                     f"({cause}); a restart resumes from the last committed offsets "
                     "(exactly once)") from cause

    def _renew(self, cause: BaseException, close: bool = True) -> bool:
        """Replace a fenced producer (its open transaction is aborted by the broker) by a new one
        with the same transactional id, as Kafka Streams does: after a broker restart the
        coordinator may bump the epoch of a transaction it timed out. False, when it happened
        :data:`MAX_RENEWALS` times within :data:`RENEWAL_WINDOW` seconds (another live process
        holds the id: the two would fence each other forever). An old producer whose close does
        not finish in time is left behind with its thread until the process ends."""
        now = time.monotonic()
        self.renewals = [t for t in self.renewals if now - t < RENEWAL_WINDOW]
        if len(self.renewals) >= MAX_RENEWALS:
            logger.error("transactional producer %s could not go on %d times in %g s (last: %s): "
                         "is another process using this transactional id?", self.transactional_id,
                         len(self.renewals) + 1, RENEWAL_WINDOW, cause)
            return False
        self.renewals.append(now)
        logger.warning("transactional producer %s cannot go on (%s: %s); a new one takes over and "
                       "the batch is served again", self.transactional_id, type(cause).__name__, cause)
        try:
            if close:  # not a producer whose commit may still be under way: left behind
                self._impl.close()
        except Exception as exc:  # noqa: BLE001 (the old producer is dead either way)
            logger.debug("closing the fenced producer: %s", exc)
        self._impl = self._restarted()
        self.aborts += 1
        return True

    def _first(self) -> Any:
        """The first producer, made again with backoff while the transaction coordinator is not
        ready (a broker just started answers ``init_transactions`` with
        COORDINATOR_LOAD_IN_PROGRESS for a while: a predictor started then exited 1, seen in CI)
        or the broker is away (``init_transactions`` timed out: a predictor started while the
        broker restarted exited 1, seen in CI), for up to :data:`ABORT_PATIENCE` seconds, as a
        renewal waits (:meth:`_restarted`); any other error is raised at once. A stop request
        meanwhile raises :class:`NetworkUnavailable` (status 0, nothing committed)."""
        start = time.monotonic()
        backoff = Backoff(0.5, 5.0, stop=self.stop)
        backend = _BACKENDS[self.client]
        loading = getattr(backend, "loading", lambda exc: False)
        away = getattr(backend, "unavailable", lambda exc: False)
        while True:
            try:
                return self._make()
            except Exception as exc:
                if not (loading(exc) or away(exc)) or time.monotonic() - start > ABORT_PATIENCE:
                    raise
                if not backoff.wait():
                    raise NetworkUnavailable(f"stopped while the transaction coordinator of "
                                             f"{self.transactional_id} was loading") from exc
                logger.warning("transactional producer %s: the coordinator is not ready or the "
                               "broker is away (%s); trying again", self.transactional_id, exc)

    def _restarted(self) -> Any:
        """A new producer with the same transactional id, tried again with backoff while its
        ``init_transactions`` times out (the broker is away: a renewal often follows a broker
        restart) for up to :data:`ABORT_PATIENCE` seconds; then, or on an error that waiting does
        not cure, a :class:`BrokerError` (exit 1). A stop request meanwhile raises
        :class:`NetworkUnavailable` (the command ends with status 0; nothing was committed)."""
        start = time.monotonic()
        backoff = Backoff(0.5, 5.0, stop=self.stop)
        while True:
            if self.stop.is_set():
                raise NetworkUnavailable(f"stopped while starting a new transactional producer "
                                         f"{self.transactional_id}; a restart resumes from the last "
                                         "committed offsets (exactly once)")
            try:
                return self._make()
            except Exception as exc:
                if self._impl.unavailable(exc) and time.monotonic() - start < ABORT_PATIENCE:
                    if backoff.wait():  # else stopped: said at the top
                        logger.warning("a new transactional producer %s did not start (%s): "
                                       "trying again", self.transactional_id, exc)
                    continue
                raise BrokerError(f"cannot start a new transactional producer {self.transactional_id} "
                                  f"({exc}); a restart resumes from the last committed offsets "
                                  "(exactly once)") from exc

    def close(self) -> None:
        self._impl.close()


def rewind(consumer: Any, client: str, topic: str, starts: Mapping[int, int]) -> None:
    """Seek the partitions still assigned back to ``starts`` ({partition: first offset of the
    aborted batch}); a partition another member took over resumes there from the committed
    offsets."""
    owned = {tp.partition for tp in consumer.assignment() if tp.topic == topic}
    for p, offset in starts.items():
        if p not in owned:
            continue
        if client == "confluent":
            from confluent_kafka import TopicPartition

            consumer.seek(TopicPartition(topic, p, offset))
        else:
            from kafka import TopicPartition

            consumer.seek(TopicPartition(topic, p), offset)


def committed_offsets(consumer: Any, client: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """The group's committed next offset of each of ``partitions`` (absent: none committed yet);
    a :class:`~streambayes.errors.BrokerError` when the broker does not answer in time."""
    try:
        if client == "confluent":
            from confluent_kafka import TopicPartition

            got = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=_TIMEOUT)
            return {tp.partition: tp.offset for tp in got if tp.offset >= 0}
        from kafka import TopicPartition

        found = {p: consumer.committed(TopicPartition(topic, p)) for p in partitions}
        return {p: off for p, off in found.items() if off is not None and off >= 0}
    except Exception as exc:  # noqa: BLE001 (either client's errors: the outcome stays unknown)
        raise BrokerError(f"cannot read the committed offsets of {topic} ({exc}); a restart "
                          "resumes from them (exactly once)") from exc

