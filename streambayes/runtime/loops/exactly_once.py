"""The predict loop in exactly-once mode (``streambayes predict --exactly-once``, issue 12).

Each micro-batch is one Kafka transaction (:meth:`~streambayes.runtime.kafka.transactions.
TransactionalSink.exactly_once` owns the order of its steps): its posteriors and dead letters are
produced into the transaction and the batch's next offsets are sent to it with the consumer's group
metadata, then it commits. A reader with ``isolation.level=read_committed`` sees every posterior
of a batch or none, and the group's committed offsets move with them, so after a crash (``kill
-9``: the restarted instance, same transactional id, fences the old one and aborts its open
transaction) or a rebalance (the broker refuses the offsets of a member of an older generation)
each input has exactly one committed posterior. An aborted batch is served again from its first
offsets (:func:`~streambayes.runtime.kafka.transactions.rewind`); its counts are taken back.

Both sinks must be Kafka topics on the source's cluster (one producer writes both); the consumer
reads with ``read_committed`` too, so an input topic written transactionally is read as committed.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from streambayes.errors import UsageError
from streambayes.runtime.kafka.transactions import (
    Aborted,
    TransactionalSink,
    Unsettled,
    committed_offsets,
    consumer_of,
    next_offsets,
    rewind,
)
from streambayes.runtime.loops.predict import PredictLoop
from streambayes.runtime.records.uri import KafkaURI, parse_uri
from streambayes.runtime.retry import Backoff

logger = logging.getLogger(__name__)

READ_COMMITTED = {"confluent": {"isolation.level": "read_committed"},
                  "kafka-python": {"isolation_level": "read_committed"}}


class ExactlyOncePredictLoop(PredictLoop):
    """A :class:`PredictLoop` whose batches are transactions on ``sink`` (a
    :class:`TransactionalSink` that also carries the dead letters when ``dead_topic`` is set)."""

    def __init__(self, source: Any, decoder: Any, watcher: Any, sink: TransactionalSink,
                 topic: str, dead_topic: str | None = None, **options: Any) -> None:
        super().__init__(source, decoder, watcher, (sink, topic),
                         dead_letters=None if dead_topic is None else (sink, dead_topic), **options)
        self.transactions = sink
        self.consumer = consumer_of(source)
        self._backoff = Backoff(0.05, 5.0, stop=self.stop)

    def _serve(self, records: list) -> None:
        batch = next_offsets(records)
        before = copy.deepcopy(self.stats)
        observer, self.observer = self.observer, (_Deferred() if self.observer is not None else None)
        try:
            self.transactions.exactly_once(lambda: self._publish(records), self.consumer,
                                           self.source.topic,
                                           {p: after for p, (_first, after) in batch.items()})
        except Aborted as exc:
            if not (isinstance(exc, Unsettled) and self._committed_after_all(batch)):
                self.stats = before  # the batch is served again after the rewind
                rewind(self.consumer, self.transactions.client, self.source.topic,
                       {p: first for p, (first, _after) in batch.items()})
                self._backoff.wait()
                return
        finally:
            deferred, self.observer = self.observer, observer
        if deferred is not None:
            deferred.apply(observer)  # the figures of committed batches only
        self._backoff.reset()

    def _committed_after_all(self, batch: dict[int, tuple[int, int]]) -> bool:
        """Whether the settled transaction of ``batch`` committed: the group's offsets moved past
        it (they are part of the transaction)."""
        committed = committed_offsets(self.consumer, self.transactions.client, self.source.topic,
                                      list(batch))
        done = all(committed.get(p, -1) >= after for p, (_first, after) in batch.items())
        logger.warning("the unsettled transaction was %s; %s", "committed" if done else "aborted",
                       "going on" if done else "the batch is served again")
        return done

    def _settle(self, force: bool = False) -> None:
        """Nothing to settle: each batch committed its offsets in its transaction."""


class _Deferred:
    """The observer calls of one transaction, applied once it commits: an aborted batch is served
    again after the rewind, and must be counted once."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple]] = []

    def __getattr__(self, name: str) -> Any:
        def record(*args: Any) -> None:
            self.calls.append((name, tuple(a if isinstance(a, (int, float, str)) else list(a)
                                           for a in args)))
        return record

    def apply(self, observer: Any) -> None:
        for name, args in self.calls:
            getattr(observer, name)(*args)


def kafka_targets(source: str, sink: str, dead_letter: str | None) -> tuple[KafkaURI, KafkaURI,
                                                                             KafkaURI | None]:
    """The three URIs of an exactly-once predictor, checked: all Kafka, one cluster."""
    parsed = [parse_uri(u) if u is not None else None for u in (source, sink, dead_letter)]
    names = ("--source", "--sink", "--dead-letter")
    for name, target in zip(names, parsed, strict=True):
        if target is not None and not isinstance(target, KafkaURI):
            raise UsageError(f"--exactly-once: {name} must be a kafka:// topic (a transaction "
                             "covers Kafka topics only)")
    clusters = {t.bootstrap for t in parsed if t is not None}
    if len(clusters) > 1:
        raise UsageError("--exactly-once: --source, --sink and --dead-letter must be on one Kafka "
                         f"cluster (got {', '.join(sorted(clusters))})")
    return parsed[0], parsed[1], parsed[2]  # type: ignore[return-value]


def run_exactly_once(job: Any, settings: Any, stop: Any,
                     group_options: dict[str, Any] | None = None) -> Any:
    """``run_predict`` for ``job.exactly_once``: the parts of :class:`ExactlyOncePredictLoop`."""
    from functools import partial

    from streambayes.runtime.kafka.connect import DEFAULT_GROUPS, client_options, open_source
    from streambayes.runtime.kafka.options import low_latency
    from streambayes.runtime.kafka.transactions import default_transactional_id
    from streambayes.runtime.loops.learn import _decoder, per_key_bounds
    from streambayes.runtime.loops.predict import ModelWatcher
    from streambayes.runtime.loops.shards import open_stores, store_options
    from streambayes.runtime.loops.spill import restore_model
    from streambayes.runtime.observe import observer_for
    from streambayes.runtime.records.limits import RecordLimits

    source_uri, sink_uri, dead_uri = kafka_targets(job.source, job.sink, job.dead_letter)
    stores = open_stores(job.snapshots, settings)
    group = settings.kafka_group or DEFAULT_GROUPS["predict"]
    tid = job.transactional_id or default_transactional_id(group)
    client = settings.kafka_client
    options = {**low_latency(client, "consumer", client_options(settings, "consumer")),
               **READ_COMMITTED[client], **(group_options or {})}
    source = open_source(source_uri, settings, role="predict", stop=stop, group_options=options)
    try:
        decoder = _decoder(source, job, require_label=False,
                           limits=RecordLimits.from_settings(settings))
        sink = TransactionalSink(settings.kafka_client, sink_uri.bootstrap, tid,
                                 options={**low_latency(client, "producer", client_options(
                                     settings, "producer")), **client_options(settings, "producer")},
                                 stop=stop, renew=True)
        try:
            restore = partial(restore_model, bounds=per_key_bounds(job), **store_options(settings))
            with observer_for(job, "predict", source) as observer:
                loop = ExactlyOncePredictLoop(
                    source, decoder, ModelWatcher(stores, restore, per_key=job.per_key), sink,
                    sink_uri.topic, None if dead_uri is None else dead_uri.topic,
                    batch_size=job.batch_size, clues=job.clues, reload_seconds=job.reload_seconds,
                    wait_seconds=job.wait_seconds, stop_at_end=False, stop=stop, loss=job.loss,
                    calibrated=job.calibrated, freeze_gc=True,
                    observer=observer)
                stats = loop.run()
            logger.info("%d transactions committed (%.1f ms each on average, slowest %.1f ms), "
                        "%d aborted (transactional id %s)", sink.transactions,
                        sink.seconds * 1000 / max(1, sink.transactions), sink.slowest * 1000,
                        sink.aborts, tid)
        finally:
            sink.close()
    finally:
        source.close()
    stats.deleted = getattr(source, "deleted", 0)  # the group source's count, final once closed
    return stats
