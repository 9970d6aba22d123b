"""The transactional producers of both client backends, under :class:`~streambayes.runtime.kafka.
transactions.TransactionalSink` (which owns the order of a transaction's steps; see its module).

``_Confluent`` (librdkafka) and ``_KafkaPython`` (``KafkaProducer(transactional_id=...)``, 2.1 and
later) offer the same steps (``begin``, ``send``, ``offsets``, ``commit``, ``abort``) and say how
their errors are to be read (``fatal``, ``retriable``, ``resumable``, ``timed_out``,
``unavailable``, ``renewable``, ``broken``). A confluent call that librdkafka times out and allows
to be called again is resumed (:func:`_resumed`); one that does not return at all
(librdkafka#5456) is cut off on its call thread (:class:`~.bounded.Stuck`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from streambayes.errors import BrokerError
from streambayes.runtime.kafka.bounded import CallThread, Stuck, close_producer

logger = logging.getLogger(__name__)
TRANSACTION_TIMEOUT_MS = 10_000
_TIMEOUT = 30.0  # seconds for one transaction call (init, offsets, commit, abort)
STUCK_MARGIN = 10.0  # past _TIMEOUT and this, a confluent transaction call is stuck (_limited)
_RECORD_OVERHEAD = 512
# A transaction begun right after the last one committed finds the broker still writing that
# one's markers, and its first AddPartitionsToTxn / AddOffsetsToTxn is refused with
# CONCURRENT_TRANSACTIONS: the client tries again after its retry backoff, 100 ms by default in
# both clients, which made every few transactions 100 ms longer (the exactly-once predictor's p99
# 131-136 ms at 2,000 events/s on confluent). Java's client waits 20 ms there (KAFKA-5477).
# librdkafka's backoff grows from this to ``retry.backoff.max.ms`` (1 s) on repeated failures;
# kafka-python's stays constant, so it keeps 20 ms. Under any option the user gives.
RETRY_BACKOFF_MS = {"confluent": 10, "kafka-python": 20}
ABORT_PATIENCE = 300.0  # seconds an abort is tried again while the broker is away (then exit 1)
COMMIT_PATIENCE = 60.0  # seconds a commit is called again (then settled by a new producer)
OFFSETS_PATIENCE = 60.0  # seconds a predictor's offsets call is called again (then a new producer)


class StuckCommit(Stuck):
    """``commit_transaction`` did not return within its limit, or kept timing out: the
    transaction may still commit, so it is never aborted and the batch never simply served
    again. A predictor settles it (:class:`Unsettled`); a learner's shard exits 1 and its restart
    resumes from the committed offsets."""


def _resumed(call: Callable[[], Any], what: str, patience: float | None = None) -> None:
    """``call()``, called again while librdkafka says it timed out and may be resumed (retriable,
    no abort needed: "retry call to resume"), for up to ``patience`` (:data:`ABORT_PATIENCE`)
    seconds. Aborting
    instead fails while the call is still under way (``_STATE`` or ``_CONFLICT``), and the
    predictor exited 1 after a broker stall."""
    from confluent_kafka import KafkaException

    start, patience = time.monotonic(), ABORT_PATIENCE if patience is None else patience
    while True:
        try:
            call()
            return
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if (error is None or not error.retriable() or error.txn_requires_abort()
                    or error.fatal() or time.monotonic() - start > patience):
                raise
            logger.warning("%s did not finish (%s): calling it again", what, error.str())
            time.sleep(0.1)


class _Confluent:
    """librdkafka's transactional producer."""

    def __init__(self, bootstrap: str, transactional_id: str, options: Mapping[str, Any],
                 linger_ms: int) -> None:
        from confluent_kafka import Producer

        from streambayes.runtime.kafka.confluent import _config, _ErrorLog, _usable

        self._errors = _ErrorLog(f"transactional producer {transactional_id}")
        config = _config(bootstrap, {
            "transactional.id": transactional_id, "acks": "all", "enable.idempotence": True,
            "linger.ms": linger_ms, "partitioner": "murmur2_random",
            "retry.backoff.ms": RETRY_BACKOFF_MS["confluent"],
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS, "error_cb": self._errors}, options)
        self.max_bytes = int(config.get("message.max.bytes", 1_000_000)) - _RECORD_OVERHEAD
        self.producer = _usable(lambda: Producer(config))
        try:
            self.producer.init_transactions(_TIMEOUT)
        except BaseException:  # the broker is away (timed out) or refused: never leak the handle
            close_producer(self.producer, 0)
            raise
        self._calls = CallThread(f"transactions of {transactional_id}")  # see _limited

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, topic: str, key: bytes | None, data: bytes | None,
             partition: int | None = None) -> None:
        extra = {} if partition is None else {"partition": partition}
        while True:
            try:
                self.producer.produce(topic, data, key, **extra)
                self.producer.poll(0)
                return
            except BufferError:  # the local queue is full: let deliveries make room
                self.producer.poll(0.1)

    def offsets(self, consumer: Any, topic: str, offsets: Mapping[int, int],
                patience: float | None = None) -> None:
        """Send the offsets, called again while it times out for up to ``patience`` s (default
        :data:`ABORT_PATIENCE`; checked between calls, so up to ``_TIMEOUT`` more); past it,
        :class:`Stuck`: librdkafka went on timing out every call for minutes after a broker stall
        (CI), where a new producer's ``init_transactions`` settles the open transaction on the
        broker (a predictor's sink renews it). (kafka-python's producer has no such loop: its
        ``offsets`` takes ``patience`` and ignores it.)"""
        from confluent_kafka import KafkaException, TopicPartition

        group = consumer.consumer_group_metadata()
        what = "sending the offsets to the transaction"
        try:
            _resumed(lambda: self._limited(lambda: self.producer.send_offsets_to_transaction(
                [TopicPartition(topic, p, off) for p, off in offsets.items()], group, _TIMEOUT), what),
                what, patience)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if patience is not None and error is not None and self.resumable(exc) \
                    and not error.txn_requires_abort():
                raise Stuck(f"{what} did not finish in {patience:g} s ({error.str()})") from None
            raise

    def commit(self) -> None:
        from confluent_kafka import KafkaException

        try:
            _resumed(lambda: self._limited(lambda: self.producer.commit_transaction(_TIMEOUT),
                                           "the commit"), "the commit", COMMIT_PATIENCE)
        except Stuck as exc:  # it may still commit: serving the batch again could publish it twice
            raise StuckCommit(str(exc)) from None
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if error is not None and self.resumable(exc) and not error.txn_requires_abort():
                # _resumed gave up on it: it may still commit, as a stuck one
                raise StuckCommit(f"the commit did not finish in {COMMIT_PATIENCE:g} s "
                                  f"({error.str()})") from None
            raise

    def abort(self) -> None:
        self._limited(lambda: self.producer.abort_transaction(_TIMEOUT), "the abort")

    def _limited(self, call: Callable[[], None], what: str) -> None:
        """``call()`` given ``_TIMEOUT`` s and a margin: librdkafka's offsets call can ignore its
        timeout for good (librdkafka#5456, seen here after a broker stall); past the limit it
        raises :class:`Stuck` and the producer is :meth:`broken` (a predictor's is replaced)."""
        self._calls(call, _TIMEOUT + STUCK_MARGIN, what)

    def flush(self) -> None:
        self.producer.flush(_TIMEOUT)

    @staticmethod
    def retriable(exc: BaseException) -> bool:
        from confluent_kafka import KafkaException

        return isinstance(exc, KafkaException | BrokerError)

    @staticmethod
    def fatal(exc: BaseException) -> bool:
        from confluent_kafka import KafkaException

        error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        return error is not None and error.fatal()

    @staticmethod
    def resumable(exc: BaseException) -> bool:
        """A call that timed out (the broker is away) and may be called again to finish
        (librdkafka: "retry call to resume")."""
        from confluent_kafka import KafkaException

        error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        return error is not None and error.retriable() and not error.fatal()

    unavailable = resumable  # a timed-out init_transactions: a new producer may start later

    @staticmethod
    def loading(exc: BaseException) -> bool:
        """The transaction coordinator answered that it is not ready yet (a broker just started)."""
        from confluent_kafka import KafkaError, KafkaException

        error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        return error is not None and error.code() in (
            KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
            KafkaError.NOT_COORDINATOR)

    @staticmethod
    def timed_out(exc: BaseException) -> bool:
        """The call itself ran out of time (``_TIMED_OUT``; not ``_CONFLICT``, which an abort
        gets while an earlier commit is still under way)."""
        from confluent_kafka import KafkaError, KafkaException

        error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        return error is not None and error.code() == KafkaError._TIMED_OUT

    def broken(self) -> bool:
        return self._calls.stuck  # else librdkafka says it in the error itself (``fatal()``)

    @staticmethod
    def renewable(exc: BaseException) -> bool:
        """librdkafka's fatal producer errors (fenced, epoch or sequence lost) are cured by a new
        producer instance (its documented remedy), except a refused authorization."""
        from confluent_kafka import KafkaError, KafkaException

        if isinstance(exc, Stuck):  # a stuck commit may still commit: only a restart is safe
            return not isinstance(exc, StuckCommit)
        error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        return error is not None and error.code() not in (
            KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED)

    def close(self) -> None:
        if self._calls.stuck:  # its close would wait for the stuck call: left behind with it
            return
        self._calls.close()
        close_producer(self.producer)  # Producer.close() only with a time limit: it can block


class _KafkaPython:
    """kafka-python's transactional producer (``transactional_id``; 2.1 and later)."""

    def __init__(self, bootstrap: str, transactional_id: str, options: Mapping[str, Any],
                 linger_ms: int) -> None:
        from kafka import KafkaProducer

        config = {"bootstrap_servers": bootstrap, "transactional_id": transactional_id,
                  "enable_idempotence": True, "acks": "all", "linger_ms": linger_ms,
                  "retry_backoff_ms": RETRY_BACKOFF_MS["kafka-python"],
                  "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS, **dict(options)}
        if not hasattr(KafkaProducer, "send_offsets_to_transaction"):
            raise BrokerError("this kafka-python has no transactional producer (2.1 or later "
                              "needed for --exactly-once; or use STREAMBAYES_KAFKA_CLIENT=confluent)")
        self.max_bytes = int(config.get("max_request_size", 1_048_576)) - _RECORD_OVERHEAD
        self.producer = KafkaProducer(**config)
        try:
            self.producer.init_transactions()
        except BaseException:  # the broker is away (timed out) or refused: never leak the client
            try:
                self.producer.close(timeout=0)
            except Exception as exc:  # noqa: BLE001 (the start's own error is the one to raise)
                logger.debug("closing a producer that did not start: %s", exc)
            raise
        self.futures: list[Any] = []

    def begin(self) -> None:
        self.futures = []
        self.producer.begin_transaction()

    def send(self, topic: str, key: bytes | None, data: bytes | None,
             partition: int | None = None) -> None:
        self.futures.append(self.producer.send(topic, key=key, value=data, partition=partition))

    def offsets(self, consumer: Any, topic: str, offsets: Mapping[int, int],
                patience: float | None = None) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        self.producer.send_offsets_to_transaction(
            {TopicPartition(topic, p): OffsetAndMetadata(off, "", -1) for p, off in offsets.items()},
            consumer.group_metadata())

    def commit(self) -> None:
        from kafka.errors import KafkaError

        self.producer.flush()
        failed = next((f.exception for f in self.futures if f.is_done and f.failed()), None)
        if isinstance(failed, KafkaError):  # its own type says fenced or not (see fatal)
            raise failed
        if failed is not None:  # kafka-python would abort at commit too: say why
            raise BrokerError(f"a message of the transaction was not delivered: {failed}")
        self.producer.commit_transaction()

    def abort(self) -> None:
        from kafka.producer.transaction_manager import TransactionState

        manager = getattr(self.producer, "_transaction_manager", None)
        if manager is not None and manager._current_state == TransactionState.READY:
            return  # no transaction open (a failed send already ended it): nothing to abort
        self.producer.abort_transaction()

    def flush(self) -> None:
        self.producer.flush()

    @staticmethod
    def retriable(exc: BaseException) -> bool:
        from kafka.errors import KafkaError

        return isinstance(exc, KafkaError | BrokerError)

    @staticmethod
    def fatal(exc: BaseException) -> bool:
        from kafka import errors

        fenced = tuple(getattr(errors, name) for name in (
            "ProducerFencedError", "InvalidProducerEpochError", "TransactionalIdAuthorizationFailedError",
            "InvalidTxnStateError") if hasattr(errors, name))
        return isinstance(exc, fenced)

    @staticmethod
    def resumable(exc: BaseException) -> bool:
        return False  # kafka-python's abort_transaction waits until it is done

    timed_out = resumable  # never renewed for a slow abort (see resumable)

    @staticmethod
    def unavailable(exc: BaseException) -> bool:
        """The broker did not answer in time (a new producer may start later)."""
        from kafka import errors

        return isinstance(exc, errors.KafkaTimeoutError | errors.KafkaConnectionError
                          | errors.BrokerNotAvailableError)

    @staticmethod
    def loading(exc: BaseException) -> bool:
        """The transaction coordinator answered that it is not ready yet (a broker just started)."""
        from kafka import errors

        return isinstance(exc, errors.CoordinatorLoadInProgressError
                          | errors.CoordinatorNotAvailableError | errors.NotCoordinatorError)

    def broken(self) -> bool:
        """kafka-python's transaction manager went to its fatal state (a request timed out while
        the broker was away does it): only a new producer can go on; its errors say so only in
        words ("Cannot execute transactional method because we are in an error state")."""
        manager = getattr(self.producer, "_transaction_manager", None)
        return bool(manager is not None and manager.has_fatal_error())

    @staticmethod
    def renewable(exc: BaseException) -> bool:
        from kafka import errors

        return not isinstance(exc, errors.TransactionalIdAuthorizationFailedError)

    def close(self) -> None:
        self.producer.close(timeout=5)


_BACKENDS: dict[str, Callable[..., Any]] = {"confluent": _Confluent, "kafka-python": _KafkaPython}
