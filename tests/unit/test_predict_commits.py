"""When the predict loop commits offsets (issue 13 item 1) and how an aborted transaction is served
again (issue 12 item 4), with fakes for the sinks, the source and the transactional producer.

- At least once: offsets are committed only once every posterior sent before them is acknowledged,
  and the loop does not block on a flush per micro-batch (acknowledgements are pipelined); a batch
  left unacknowledged for ``settle_seconds`` is flushed, then committed.
- Exactly once: a batch whose transaction aborts is rewound to its first offsets and its counts
  are taken back; the offsets sent to the transaction are the batch's next offsets.
"""

from __future__ import annotations

import json
import threading

import pytest

from streambayes.models import make_model
from streambayes.runtime.kafka.transactions import Aborted
from streambayes.runtime.loops.exactly_once import ExactlyOncePredictLoop
from streambayes.runtime.loops.predict import ModelWatcher, PredictLoop
from streambayes.runtime.loops.shards import open_stores
from streambayes.runtime.records.decode import Decoder
from streambayes.runtime.records.sources import Record
from streambayes.snapshot import SnapshotStore


def watcher(tmp_path) -> ModelWatcher:
    model = make_model("mnb")
    model.learn_many([{"text": "win cash now"}, {"text": "see you at lunch"}], ["spam", "ham"])
    SnapshotStore(tmp_path).write(model.to_state(), model="mnb", positions={}, events=2)
    return ModelWatcher(open_stores([tmp_path]))


def batches(n: int, size: int) -> list[list[Record]]:
    out, offset = [], 0
    for _ in range(n):
        out.append([Record(json.dumps({"id": f"e{offset + i}", "text": "cash lunch"}).encode(),
                           None, "in", 0, offset + i) for i in range(size)])
        offset += size
    return out


class Source:
    """Hands out the given batches (then nothing, and stops the loop); records commits."""

    def __init__(self, batches: list[list[Record]], stop: threading.Event, topic: str = "in",
                 consumer: bool = False) -> None:
        self.batches, self.stop, self.topic = list(batches), stop, topic
        self.next = 0
        self.commits: list[int] = []
        if consumer:  # what the exactly-once loop needs of a group source
            self.group = "g"
            self._consumer = Consumer()

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        if not self.batches:
            self.stop.set()
            return []
        batch = self.batches.pop(0)
        self.next = batch[-1].offset + 1
        return batch

    def positions(self) -> dict:
        return {"in": {"0": self.next}}

    def commit(self, positions: dict) -> None:
        self.commits.append(positions["in"]["0"])


class Consumer:
    def __init__(self) -> None:
        self.seeks: list[tuple[int, int]] = []

    def assignment(self) -> list:
        class TP:
            topic, partition = "in", 0
        return [TP()]

    def seek(self, tp, offset=None) -> None:
        self.seeks.append((tp.partition, tp.offset if offset is None else offset))

    def committed(self, tp) -> int | None:  # kafka-python's: the group's next offset
        return self.group_offsets.get(tp.partition)

    group_offsets: dict[int, int] = {}


class PipelinedSink:
    """A Kafka-like sink: sends are acknowledged ``lag`` checks later; ``flush`` acknowledges all."""

    def __init__(self, lag: int) -> None:
        self.lag = lag
        self.sent = 0
        self.acked = 0
        self.checks = 0
        self.flushes = 0
        self.commits_seen: list[tuple[int, int]] = []  # (sent, acked) at each commit

    def send(self, topic, key, value) -> None:
        self.sent += 1

    def unacknowledged(self) -> int:
        self.checks += 1
        if self.checks % self.lag == 0:
            self.acked = self.sent
        return self.sent - self.acked

    def flush(self) -> None:
        self.flushes += 1
        self.acked = self.sent

    def close(self) -> None:
        pass


def test_offsets_are_committed_only_after_the_posteriors_are_acknowledged(tmp_path):
    stop = threading.Event()
    source, sink = Source(batches(12, 10), stop), PipelinedSink(lag=3)
    acked_at_commit = []
    commit = source.commit
    source.commit = lambda positions: (acked_at_commit.append((sink.acked, positions["in"]["0"])),
                                       commit(positions))
    loop = PredictLoop(source, Decoder("jsonl", require_label=False), watcher(tmp_path), (sink, "out"),
                       stop=stop, stop_at_end=False, settle_seconds=3600, commit_seconds=0)
    stats = loop.run()
    assert stats.posteriors == 120 and sink.sent == 120
    assert sink.flushes == 0  # no flush per batch: the acknowledgements came in by themselves
    assert len(source.commits) >= 3 and source.commits[-1] == 120
    for acked, offset in acked_at_commit:  # one posterior per record: offset N needs N acknowledged
        assert acked >= offset


def test_a_batch_unacknowledged_for_settle_seconds_is_flushed_then_committed(tmp_path):
    stop, now = threading.Event(), [0.0]

    def clock() -> float:
        now[0] += 0.3
        return now[0]

    source, sink = Source(batches(4, 5), stop), PipelinedSink(lag=10**9)  # never acknowledged
    loop = PredictLoop(source, Decoder("jsonl", require_label=False), watcher(tmp_path), (sink, "out"),
                       stop=stop, stop_at_end=False, settle_seconds=0.5, commit_seconds=0,
                       clock=clock)
    loop.run()
    assert sink.flushes >= 1 and source.commits and source.commits[-1] == 20


class FakeTransactions:
    """The steps of :meth:`TransactionalSink.exactly_once`, failing the ``fail``-th transaction."""

    client = "kafka-python"

    def __init__(self, fail: int) -> None:
        self.fail, self.calls = fail, 0
        self.committed: list[dict] = []
        self.sent: list[str] = []

    def send(self, topic, key, value) -> None:
        self.sent.append(value.id)

    def flush(self) -> None:
        pass

    def exactly_once(self, publish, consumer, topic, offsets) -> None:
        self.calls += 1
        mark = len(self.sent)
        publish()
        if self.calls == self.fail:
            del self.sent[mark:]  # aborted: not visible
            raise Aborted("injected")
        self.committed.append(dict(offsets))


def test_an_aborted_batch_is_rewound_and_served_again(tmp_path):
    stop = threading.Event()
    data = batches(3, 4)
    source = Source([data[0], data[1], data[1], data[2]], stop, consumer=True)  # re-read after a seek
    txn = FakeTransactions(fail=2)
    from streambayes.runtime.observe import Observer

    observer = Observer("predict", every=1e9)
    loop = ExactlyOncePredictLoop(source, Decoder("jsonl", require_label=False), watcher(tmp_path),
                                  txn, "out", stop=stop, stop_at_end=False, observer=observer)
    loop._backoff.first = loop._backoff.delay = 0.001
    stats = loop.run()
    assert (observer.records_total, observer.events_total) == (12, 12)  # committed batches only
    assert observer.registry.get_sample_value("streambayes_latency_seconds_count",
                                              {"role": "predict"}) == 12
    assert source._consumer.seeks == [(0, 4)]  # the aborted batch's first offset
    assert txn.committed == [{0: 4}, {0: 8}, {0: 12}]
    assert sorted(txn.sent) == sorted(f"e{i}" for i in range(12))  # each once
    assert stats.records == 12 and stats.posteriors == 12  # the aborted try is not counted
    assert source.commits == []  # offsets go in the transactions only


class UnsettledTransactions(FakeTransactions):
    """The ``fail``-th commit's outcome is unknown (a stuck commit settled by a new producer): it
    committed (``committed=True``: posteriors visible, group offsets moved) or was aborted."""

    def __init__(self, fail: int, committed: bool, consumer: Consumer) -> None:
        super().__init__(fail)
        self.outcome, self.consumer = committed, consumer
        consumer.group_offsets = {}

    def exactly_once(self, publish, consumer, topic, offsets) -> None:
        from streambayes.runtime.kafka.transactions import Unsettled

        self.calls += 1
        mark = len(self.sent)
        publish()
        if self.calls == self.fail and not self.outcome:
            del self.sent[mark:]
            raise Unsettled("injected: aborted by the broker")
        self.committed.append(dict(offsets))
        self.consumer.group_offsets.update(offsets)
        if self.calls == self.fail:
            raise Unsettled("injected: committed after all")


@pytest.mark.parametrize("committed", [True, False])
def test_an_unsettled_commit_goes_on_from_the_committed_offsets(tmp_path, committed):
    """A stuck commit settled by a new producer: the group's committed offsets say whether the
    batch committed. Committed: it is counted once and not served again. Aborted: rewound."""
    from streambayes.runtime.observe import Observer

    stop = threading.Event()
    data = batches(3, 4)
    polls = [data[0], data[1], data[1], data[2]] if not committed else data
    source = Source(polls, stop, consumer=True)
    txn = UnsettledTransactions(2, committed, source._consumer)
    observer = Observer("predict", every=1e9)
    loop = ExactlyOncePredictLoop(source, Decoder("jsonl", require_label=False), watcher(tmp_path),
                                  txn, "out", stop=stop, stop_at_end=False, observer=observer)
    loop._backoff.first = loop._backoff.delay = 0.001
    stats = loop.run()
    assert source._consumer.seeks == ([] if committed else [(0, 4)])
    assert txn.committed == [{0: 4}, {0: 8}, {0: 12}]
    assert sorted(txn.sent) == sorted(f"e{i}" for i in range(12))  # each once
    assert stats.records == 12 and stats.posteriors == 12
    assert (observer.records_total, observer.events_total) == (12, 12)


def test_exactly_once_refuses_sinks_that_are_not_kafka():
    from streambayes.errors import UsageError
    from streambayes.runtime.loops.exactly_once import kafka_targets

    with pytest.raises(UsageError, match="--sink must be a kafka"):
        kafka_targets("kafka://h:9092/in", "out.jsonl", None)
    with pytest.raises(UsageError, match="one Kafka cluster"):
        kafka_targets("kafka://h:9092/in", "kafka://other:9092/out", None)


def test_the_confluent_sink_is_read_without_blocking():
    """The adapter knows the confluent sink's queue (a rename there would silently cost a flush per
    batch): a message to an unreachable broker stays unacknowledged (a flush would wait for it)."""
    from streambayes.runtime.kafka.confluent import KafkaSink
    from streambayes.runtime.kafka.pipelined import unacknowledged

    sink = KafkaSink("127.0.0.1:1", options={"message.timeout.ms": 60_000})
    try:
        assert unacknowledged(sink) == 0
        sink.send("t", "k", {"id": "x"})
        assert unacknowledged(sink) == 1
    finally:
        sink._producer.purge()
        sink._producer.flush(0)
