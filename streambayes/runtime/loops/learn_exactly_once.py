"""The learner's dead letters exactly once (``streambayes learn --exactly-once``, issue 12).

A plain learner flushes its dead letters before each snapshot (at least once: a crash between
the flush and the snapshot reads those records again and sends their letters twice). With
``--exactly-once`` the snapshot store must be a Kafka state topic (``kafka://HOST:PORT/TOPIC``)
and the dead-letter sink, if any, a topic on the same cluster. The learner then keeps the letters
of the records read since its last checkpoint in memory (at most ``--every`` + one batch of
records' worth) and each checkpoint is one Kafka transaction of one transactional producer
(:func:`~streambayes.runtime.loops.checkpoint.write_in_transaction` owns the order): begin, the
letters, the snapshot's chunks and manifest and the prune tombstones, commit. A
``read_committed`` reader sees the letters of a checkpoint and its snapshot together or not at
all: one letter per bad record across ``kill -9``; the state topic's readers (the store reads
``read_committed``) never see a snapshot of an aborted checkpoint.

**Fencing.** One producer per state shard, its transactional id derived from the shard:
``streambayes-learn-<state topic>`` for a static learner (``--partitions``: one store, one
writer), ``streambayes-learn-<state topic>-partition-<topic>-<p>`` for each partition shard of a
group learner. The producer is made (``init_transactions``) before the shard is restored, so a
restarted learner, or the member a partition moved to, first fences the shard's previous writer
(its open transaction is aborted, it can commit nothing more) and then reads the committed state,
strictly: to the state topic's high watermark, waiting for every transaction open below it to end
(:meth:`TransactionalStore.settle`). All shards share the topic's partition 0, so a plain
``read_committed`` read would stop before another shard's open transaction (a killed member's
stays open until its shard's new owner fences it or it times out, ``transaction.timeout.ms``),
missing this shard's snapshots committed after it: the shard would be restored from an older
snapshot and its records' dead letters written twice. (The broker aborts a timed-out transaction
at its next check, every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``, 10 s by
default: a strict read may wait up to some 20 s; it gives up after
``STREAMBAYES_KAFKA_DELIVERY_DEADLINE``, 120 s.) A member that takes several shards fences
them all before it reads, so it does not wait for transactions it is about to abort.

A directory or S3 store cannot join a Kafka transaction: the flag is refused there (exit 2).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from streambayes.errors import BrokerError, UsageError
from streambayes.runtime.kafka.transactions import Aborted, TransactionalSink
from streambayes.runtime.loops.checkpoint import write_in_transaction
from streambayes.runtime.records.sinks import Sink, fit
from streambayes.runtime.retry import Backoff
from streambayes.snapshot.store import BaseSnapshotStore, SnapshotInfo

logger = logging.getLogger(__name__)
ID_PREFIX = "streambayes-learn"
ATTEMPTS = 3  # transactions of one checkpoint before the learner gives up (exit 1)
# a letter's bytes, as a plain dead-letter sink sends them (the producer's own limit is the state
# topic's max.message.bytes, for the snapshot chunks; the dead-letter topic may allow less)
LETTER_BYTES = {"confluent": 1_000_000 - 512, "kafka-python": 1_048_576 - 512}


def transactional_id(store: Any) -> str:
    """The id of the producer writing ``store`` (a Kafka store or a child of one).

    >>> class Log: topic = "state"
    >>> class Store: log, namespace = Log(), "partition-events-3/"
    >>> transactional_id(Store())
    'streambayes-learn-state-partition-events-3'
    """
    shard = store.namespace.strip("/").replace("/", "-")
    return f"{ID_PREFIX}-{store.log.topic}" + (f"-{shard}" if shard else "")


class LetterBuffer:
    """The dead-letter sink of a learner in exactly-once mode: letters wait here for the next
    checkpoint's transaction (``flush`` sends nothing)."""

    def __init__(self) -> None:
        self.letters: list[tuple[str, Any, Any]] = []

    def send(self, topic: str, key: Any, value: Any) -> None:
        self.letters.append((topic, key, value))

    def take(self) -> list[tuple[str, Any, Any]]:
        letters, self.letters = self.letters, []
        return letters

    def flush(self) -> None:
        """Nothing: the letters go in the checkpoint's transaction."""

    def close(self) -> None:
        self.letters = []


class TransactionalStore:
    """A Kafka snapshot store (or shard) whose writes are transactions that carry ``letters``;
    everything else is the store's own."""

    def __init__(self, store: Any, make_sink: Callable[[str], TransactionalSink],
                 letter_bytes: int | None = None) -> None:
        self.inner = store
        self.letters = LetterBuffer()
        self.letter_bytes = letter_bytes  # None: the producer's limit
        self.sink = make_sink(transactional_id(store))  # fences the shard's previous writer
        self._backoff = Backoff(0.2, 5.0, stop=self.sink.stop)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return repr(self.inner)

    def write(self, state: Mapping[str, Any], **header: Any) -> SnapshotInfo:
        """The letters since the last write and the snapshot, in one transaction; an aborted one
        is tried again (the same letters and state) up to :data:`ATTEMPTS` times."""
        letters = [(topic, key, fit(value, self.letter_bytes, f"a message to {topic}"))
                   for topic, key, value in self.letters.take()]
        for attempt in range(1, ATTEMPTS + 1):
            try:
                info = self._write_once(letters, state, header)
                self._backoff.reset()
                return info
            except Aborted as exc:
                if attempt == ATTEMPTS or not self._backoff.wait():
                    raise BrokerError(
                        f"the checkpoint's transaction was aborted {attempt} times ({exc}); a "
                        "restart learns again from the last committed snapshot (exactly once)"
                    ) from exc
        raise AssertionError("unreachable")

    def _write_once(self, letters: list, state: Mapping[str, Any], header: dict) -> SnapshotInfo:
        log = self.inner.log
        with log.lock:
            log.writer, log.pending = self.sink, {}
            try:
                info = write_in_transaction(self.sink, letters,
                                            lambda: self.inner.write(state, **header))
                log.overlay.update(log.pending)  # committed: ours until read back
            finally:
                log.writer, log.pending = None, {}  # aborted: as if never written
        return info

    def settle(self) -> None:
        """Read the state topic to its high watermark (a strict read, :meth:`TopicLog.refresh`):
        after this producer fenced the shard's previous writer, every snapshot that writer
        committed is there, even one committed behind another shard's transaction that is still
        open (a plain read ends before that transaction). Called before the shard is restored;
        a member taking several shards fences them all first, then settles once."""
        self.inner.log.refresh(strict=True)

    def release(self) -> None:
        """Close the producer (the shard was dropped; its unsent letters too)."""
        self.letters.close()
        self.sink.close()


def check_targets(snapshots: Any, dead_letter: str | None) -> tuple[Any, Any]:
    """The state topic's and dead-letter topic's URIs, checked: both Kafka, one cluster."""
    from streambayes.runtime.records.uri import KafkaURI, parse_uri
    from streambayes.runtime.stores import location

    where = location(snapshots)
    state = parse_uri(where, allowed_query=()) if isinstance(where, str) and \
        where.lower().startswith("kafka://") else None
    if not isinstance(state, KafkaURI):
        raise UsageError(f"learn --exactly-once needs a kafka:// snapshot store (a directory or "
                         f"S3 store cannot join a Kafka transaction), not {where}")
    dead = parse_uri(dead_letter) if dead_letter else None
    if dead is not None and not isinstance(dead, KafkaURI):
        raise UsageError("learn --exactly-once: --dead-letter must be a kafka:// topic (a "
                         "transaction covers Kafka topics only)")
    if dead is not None and dead.bootstrap != state.bootstrap:
        raise UsageError("learn --exactly-once: --dead-letter and --snapshots must be on one Kafka "
                         f"cluster (got {dead.bootstrap} and {state.bootstrap})")
    return state, dead


# A checkpoint transaction holds a whole snapshot (every chunk) and three reads of the state topic.
# 10 s, as the predictor's: a member that takes a shard over reads the state topic strictly, and
# so waits out the open transactions of other shards' killed writers that nobody fences (a 60 s
# timeout once made a restarted learner's wait a minute; a kill test failed). A model whose
# snapshot takes longer to write needs STREAMBAYES_KAFKA_PRODUCER_OPTIONS (each checkpoint is
# aborted and fenced else).
LEARN_TRANSACTION_TIMEOUT_MS = 10_000


def sink_factory(store: Any, settings: Any, stop: Any = None) -> Callable[[str], TransactionalSink]:
    """``transactional id -> TransactionalSink`` on the state topic's cluster, its messages as
    large as the topic's (a snapshot chunk)."""
    from streambayes.runtime.kafka.connect import client_options

    client = settings.kafka_client
    largest = store.log.chunk_bytes + 1024  # the topic's max.message.bytes
    size = ({"message.max.bytes": largest, "batch.size": largest} if client == "confluent"
            else {"max_request_size": largest, "batch_size": largest})
    timeout = ({"transaction.timeout.ms": LEARN_TRANSACTION_TIMEOUT_MS} if client == "confluent"
               else {"transaction_timeout_ms": LEARN_TRANSACTION_TIMEOUT_MS})
    options = {**timeout, **client_options(settings, "producer"), **size}

    def make(tid: str) -> TransactionalSink:
        return TransactionalSink(client, store.log.bootstrap, tid, options=options, stop=stop)

    return make


def letter_bytes(settings: Any) -> int:
    """A dead letter's largest size: a plain sink's (the client's default message size, or the
    ``message.max.bytes`` / ``max_request_size`` of ``STREAMBAYES_KAFKA_PRODUCER_OPTIONS``)."""
    from streambayes.runtime.kafka.connect import client_options

    client = settings.kafka_client
    given = client_options(settings, "producer").get(
        "message.max.bytes" if client == "confluent" else "max_request_size")
    return int(given) - 512 if given else LETTER_BYTES[client]


def exactly_once_parts(job: Any, settings: Any, store: BaseSnapshotStore, stop: Any = None
                       ) -> tuple[TransactionalStore, tuple[Sink, str] | None]:
    """A static learner's transactional store and its dead-letter buffer (``(sink, topic)``)."""
    _state, dead = check_targets(job.snapshots, job.dead_letter)
    wrapped = TransactionalStore(store, sink_factory(store, settings, stop), letter_bytes(settings))
    try:
        wrapped.settle()
    except BaseException:
        wrapped.release()
        raise
    return wrapped, (None if dead is None else (wrapped.letters, dead.topic))


def shard_parts(job: Any, settings: Any, store: BaseSnapshotStore, stop: Any = None
                ) -> Callable[[BaseSnapshotStore], tuple[Any, tuple[Sink, str] | None]]:
    """For a group learner: ``child store -> (its transactional store, its letter buffer)``."""
    _state, dead = check_targets(job.snapshots, job.dead_letter)
    make, largest = sink_factory(store, settings, stop), letter_bytes(settings)

    def parts(child: BaseSnapshotStore) -> tuple[Any, tuple[Sink, str] | None]:
        wrapped = TransactionalStore(child, make, largest)
        return wrapped, (None if dead is None else (wrapped.letters, dead.topic))

    return parts
