"""``learn --exactly-once``: each checkpoint's dead letters and snapshot in one Kafka transaction.

A fake broker keeps the committed records of one cluster (what a read_committed reader sees) and
the transactional producers' epochs (a new producer with the same id fences the old one); the
state topic is a real :class:`KafkaSnapshotStore` on a :class:`TopicLog` that reads the fake.
"""

from __future__ import annotations

import json

import pytest

from streambayes.cli import main
from streambayes.errors import BrokerError, SnapshotError, UsageError
from streambayes.models import make_model
from streambayes.runtime.kafka import transactions
from streambayes.runtime.loops.group import GroupLearner, shard_name
from streambayes.runtime.loops.learn import LearnLoop
from streambayes.runtime.loops.learn_exactly_once import (
    ATTEMPTS,
    TransactionalStore,
    check_targets,
    transactional_id,
)
from streambayes.runtime.records.decode import Decoder
from streambayes.runtime.records.sources import MemorySource
from streambayes.runtime.stores.kafka_topic import KafkaSnapshotStore, TopicLog
from tests.unit.test_group_learn import TOPIC, FakeGroup, FakeMember, drive

STATE, DLQ = "state", "dlq"


class Retriable(Exception):
    pass


class Fenced(Exception):
    pass


class Broker:
    """Committed records ``(topic, key, value)``; ``lso``: how many a read_committed reader sees
    (None: all; less while another writer's transaction is open). ``holder``: the transactional
    id of that open transaction, if given: a new producer of that id fences it (aborts it: the
    LSO is gone), and a strict read (to the high watermark) raises instead of waiting for it."""

    def __init__(self) -> None:
        self.log: list[tuple[str, bytes, bytes | None]] = []
        self.events: list = []
        self.epochs: dict[str, int] = {}
        self.fail_commits = 0
        self.lso: int | None = None
        self.holder: str | None = None

    def committed(self, topic: str) -> list[tuple[bytes, bytes | None]]:
        return [(k, v) for t, k, v in self.log if t == topic]


class FakeProducer:
    """A transactional producer backend (the ``_BACKENDS`` interface) on a :class:`Broker`."""

    broker: Broker

    def __init__(self, bootstrap, tid, options, linger_ms) -> None:
        self.tid, self.max_bytes, self.buffer = tid, 10**6, []
        self.epoch = self.broker.epochs[tid] = self.broker.epochs.get(tid, 0) + 1
        self.broker.events.append(("init", tid))
        if tid == self.broker.holder:  # fenced: the open transaction is aborted
            self.broker.holder = self.broker.lso = None

    def _check(self) -> None:
        if self.broker.epochs[self.tid] != self.epoch:
            raise Fenced(f"{self.tid} epoch {self.epoch} fenced")

    def begin(self) -> None:
        self.buffer = []
        self.broker.events.append(("begin", self.tid))

    def send(self, topic, key, data, partition=None) -> None:
        self._check()
        if topic == STATE:
            assert partition == 0, "state records go to partition 0, the one readers read"
        self.buffer.append((topic, key, data))
        self.broker.events.append(("send", topic, key.decode() if key else None))

    def offsets(self, consumer, topic, offsets, patience=None) -> None:
        raise AssertionError("a learner sends no consumer offsets to its transactions")

    def commit(self) -> None:
        self._check()
        if self.broker.fail_commits:
            self.broker.fail_commits -= 1
            raise Retriable("coordinator not available")
        self.broker.log.extend(self.buffer)
        self.broker.events.append(("commit", self.tid))

    def abort(self) -> None:
        self.broker.events.append(("abort", self.tid))

    def flush(self) -> None:
        pass

    @staticmethod
    def retriable(exc) -> bool:
        return isinstance(exc, Retriable | Fenced | BrokerError)

    @staticmethod
    def fatal(exc) -> bool:
        return isinstance(exc, Fenced)

    @staticmethod
    def renewable(exc) -> bool:
        return True  # a learner's sink never renews: it must stop though a client says it could

    @staticmethod
    def resumable(exc) -> bool:
        return False

    def broken(self) -> bool:
        return False

    def close(self) -> None:
        self.broker.events.append(("close", self.tid))


class FakeLog(TopicLog):
    """The state topic read from the fake broker (read_committed: up to its ``lso``)."""

    def __init__(self, broker: Broker) -> None:
        super().__init__("fake:9092", STATE)
        self.broker, self.position = broker, 0

    @property
    def chunk_bytes(self) -> int:
        return 700  # small: a snapshot is several chunks

    def refresh(self, strict: bool = False) -> None:
        self.broker.events.append(("strict read" if strict else "read", STATE))
        if strict and self.writer is not None:
            raise AssertionError("a strict read inside the learner's own transaction")
        if strict and self.broker.lso is not None:
            raise SnapshotError(f"a strict read waited for {self.broker.holder}'s open transaction")
        end = len(self.broker.log) if self.broker.lso is None else self.broker.lso
        with self.lock:
            for offset in range(self.position, end):
                topic, key, value = self.broker.log[offset]
                if topic == STATE:
                    self._apply(key.decode(), value, offset)
            self.position = max(self.position, end)

    def _open_producer(self) -> None:
        raise AssertionError("in exactly-once mode every write goes through a transaction")


@pytest.fixture
def broker(monkeypatch) -> Broker:
    b = Broker()
    monkeypatch.setattr(FakeProducer, "broker", b, raising=False)
    monkeypatch.setitem(transactions._BACKENDS, "fake", FakeProducer)
    return b


def make_sink(tid: str) -> transactions.TransactionalSink:
    return transactions.TransactionalSink("fake", "fake:9092", tid)


def kafka_store(broker: Broker, keep: int = 5) -> KafkaSnapshotStore:
    return KafkaSnapshotStore(FakeLog(broker), keep)


def records(n: int) -> list[bytes]:
    """``n`` events; every 5th one (offset 3, 8, ...) is not JSON: a dead letter."""
    return [b"{bad" if i % 5 == 3 else json.dumps(
        {"id": i, "label": "ab"[i % 2], "text": f"w{i % 7} x{i % 3}"}).encode() for i in range(n)]


def loop_of(store: TransactionalStore, source: MemorySource) -> LearnLoop:
    return LearnLoop(source, Decoder("jsonl"), store, lambda: make_model("nb"), "nb",
                     dead_letters=(store.letters, DLQ), every=10**9, calibrate=False)


def letter_offsets(broker: Broker) -> list[int]:
    return [json.loads(v)["source"]["offset"] for _k, v in broker.committed(DLQ)]


def test_a_letter_is_fitted_to_the_letter_limit_not_the_snapshot_chunks(broker):
    store = TransactionalStore(kafka_store(broker), make_sink, letter_bytes=600)
    huge = b"{bad" + b"x" * 5000
    loop = LearnLoop(MemorySource({"ev": [huge]}), Decoder("jsonl"), store,
                     lambda: make_model("nb"), "nb", dead_letters=(store.letters, DLQ),
                     calibrate=False)
    loop.run()
    (letter,) = [v for _k, v in broker.committed(DLQ)]
    assert len(letter) <= 600 and json.loads(letter)["source"]["offset"] == 0


def test_letters_wait_for_the_checkpoint_and_share_its_transaction(broker):
    store = TransactionalStore(kafka_store(broker), make_sink)
    loop = loop_of(store, MemorySource({"ev": records(20)}))
    loop.restore()
    loop._learn(loop.source.poll(20))
    assert broker.log == [] and not any(e[0] == "send" for e in broker.events)  # buffered
    loop.checkpoint()
    steps = [e for e in broker.events if e[0] != "read"]
    assert steps[:2] == [("init", "streambayes-learn-state"), ("begin", "streambayes-learn-state")]
    sends = [e for e in steps if e[0] == "send"]
    assert [e[1] for e in sends[:4]] == [DLQ] * 4  # the letters first, then the snapshot
    chunks = [e[2] for e in sends[4:]]
    assert len(chunks) > 2 and chunks[-1] == "snapshot-000001.sbs"  # the manifest last
    assert all(c.startswith("snapshot-000001.sbs:") for c in chunks[:-1])
    assert steps[-1] == ("commit", "streambayes-learn-state")
    assert letter_offsets(broker) == [3, 8, 13, 18]
    reader = kafka_store(broker)  # another host, read_committed
    snap = reader.latest()
    assert snap.id == "000001" and snap.events == 16 and snap.positions == {"ev": {"0": 20}}


def test_an_aborted_transaction_is_tried_again_with_the_same_letters(broker):
    store = TransactionalStore(kafka_store(broker), make_sink)
    broker.fail_commits = 1
    loop_of(store, MemorySource({"ev": records(10)})).run()
    steps = [e[0] for e in broker.events if e[0] in ("begin", "abort", "commit")]
    assert steps == ["begin", "abort", "begin", "commit"]
    assert letter_offsets(broker) == [3, 8] and store.ids() == ["000001"]


def test_an_aborted_checkpoint_shows_nothing_and_the_restart_sends_each_letter_once(broker):
    source = {"ev": records(30)}
    store = TransactionalStore(kafka_store(broker), make_sink)
    loop = loop_of(store, MemorySource(source))
    broker.fail_commits = ATTEMPTS
    with pytest.raises(BrokerError, match=f"aborted {ATTEMPTS} times"):
        loop.run()
    assert ("abort", "streambayes-learn-state") in broker.events
    assert broker.log == [] and store.ids() == [] and store.inner.log.overlay == {}

    again = TransactionalStore(kafka_store(broker), make_sink)  # the restarted learner
    loop_of(again, MemorySource(source)).run()
    assert letter_offsets(broker) == [3, 8, 13, 18, 23, 28]
    assert kafka_store(broker).latest().events == 24


def test_a_restarted_learner_fences_its_zombie(broker):
    zombie = TransactionalStore(kafka_store(broker), make_sink)
    old = loop_of(zombie, MemorySource({"ev": records(10)}))
    old.restore()
    old._learn(old.source.poll(10))
    restarted = TransactionalStore(kafka_store(broker), make_sink)  # same id: a new epoch
    with pytest.raises(BrokerError, match="cannot go on"):
        old.checkpoint()
    assert broker.log == []
    loop_of(restarted, MemorySource({"ev": records(10)})).run()
    assert letter_offsets(broker) == [3, 8] and kafka_store(broker).ids() == ["000001"]


def test_own_commits_count_while_another_transaction_hides_them(broker):
    """A read_committed reader stops at another writer's open transaction: the learner's own
    committed snapshot is not read back yet, but numbers and keep-K must count it."""
    store = TransactionalStore(kafka_store(broker, keep=1), make_sink)
    source = MemorySource({"ev": records(10)})
    loop = loop_of(store, source)
    loop.restore()
    broker.lso = 0  # another shard's writer holds a transaction open from the start
    for _ in range(2):
        loop._learn(source.poll(5))
        loop.checkpoint()
    assert store.ids() == ["000002"]
    keys = [k.decode() for k, v in broker.committed(STATE) if v is None]
    assert "snapshot-000001.sbs" in keys  # pruned in the second transaction
    broker.lso = None  # the other transaction ends: the reader catches up with the overlay
    assert store.ids() == ["000002"] and store.inner.log.overlay == {}
    assert kafka_store(broker).latest().positions == {"ev": {"0": 10}}


def test_group_shards_each_have_a_fenced_producer_and_their_own_letters(broker):
    group, store = FakeGroup({0: 40, 1: 40}), kafka_store(broker)
    a = FakeMember(group, "a")
    gl = GroupLearner(a, Decoder("jsonl"), store, lambda: make_model("nb"), "nb", every=10**9,
                      every_seconds=10**9, batch_size=13, calibrate=False,
                      shard_parts=lambda child: _parts(child))
    a.pending.append(("assigned", [0, 1]))
    drive(gl, a, 2)
    tid0 = transactional_id(gl.shards[0].loop.store)
    assert tid0 == f"streambayes-learn-state-{shard_name(TOPIC, 0)}"
    tid1 = transactional_id(gl.shards[1].loop.store)
    read = ("read", STATE)  # the first: the group learner's check of the store's own snapshots
    # both shards' previous writers fenced, then one strict read, then each shard restored
    assert broker.events == [read, ("init", tid0), ("init", tid1), ("strict read", STATE),
                             read, read]
    a.pending.append(("revoked", [1]))
    drive(gl, a, 1)
    committed = [e for e in broker.events if e[0] == "commit"]
    assert committed == [("commit", tid1)]
    letters = [json.loads(v)["source"] for _k, v in broker.committed(DLQ)]
    assert letters == [{"topic": TOPIC, "partition": 1, "offset": o} for o in (5, 22)]  # shard 1's
    assert ("close", committed[0][1]) in broker.events  # dropped shard: producer closed
    a.pending.append(("lost", [0]))
    drive(gl, a, 1)
    assert gl.shards == {} and ("close", tid0) in broker.events  # its letters dropped unsent
    assert len(broker.committed(DLQ)) == 2 and len(committed) == 1


def test_a_group_shard_fenced_by_another_member_is_restored_not_fatal(broker):
    """Two members think they hold partition 0 (one was evicted without hearing of it): each
    restore fences the other's producer; a fenced checkpoint commits nothing and restores the
    shard from the newest snapshot instead of stopping the learner. One letter per bad record."""
    group = FakeGroup({0: 60})
    a, b = FakeMember(group, "a"), FakeMember(group, "b")
    ga, gb = (GroupLearner(m, Decoder("jsonl"), kafka_store(broker), lambda: make_model("nb"),
                           "nb", every=10**9, every_seconds=10**9, batch_size=13,
                           calibrate=False, shard_parts=_parts) for m in (a, b))
    a.pending.append(("assigned", [0]))
    drive(ga, a, 1)
    b.pending.append(("assigned", [0]))  # fences a's producer of the shard
    drive(gb, b, 2)
    assert ga.checkpoint() == [] and broker.log == []  # fenced: restored (fencing b) instead
    assert ga.shards[0].view.next is None and a.next[0] == 0  # no snapshot yet: the beginning
    assert ga.shards[0].unsaved == 0
    assert gb.checkpoint() == [] and broker.log == []  # b fenced in turn: restored too
    assert b.next[0] == 0
    drive(gb, b, 3)
    assert [i.id for i in gb.checkpoint()] == ["000001"]
    assert letter_offsets(broker) == [5, 22]
    assert kafka_store(broker).child(shard_name(TOPIC, 0)).latest().events == 37


def _parts(child):
    wrapped = TransactionalStore(child, make_sink)
    return wrapped, (wrapped.letters, DLQ)


def _group_learner(member, broker) -> GroupLearner:
    """An exactly-once group learner of ``member`` on the fake broker's state topic."""
    return GroupLearner(member, Decoder("jsonl"), kafka_store(broker), lambda: make_model("nb"),
                        "nb", every=10**9, every_seconds=10**9, batch_size=13, calibrate=False,
                        shard_parts=_parts)


def test_a_shard_taken_over_is_restored_from_its_newest_snapshot_past_an_open_transaction(broker):
    """All shards write partition 0 of the state topic. A member killed mid-checkpoint of shard 1
    leaves a transaction open there that holds a read_committed reader's end (the last stable
    offset) below the newest snapshot of shard 0, committed after it began. The member that takes
    shard 0 over must restore that newest snapshot (a plain read would give it the one before:
    its records learned again, their dead letters written twice): it reads the topic strictly, to
    its high watermark, after fencing. Taking both shards, it fences both before it reads, so it
    never waits for the transaction it is about to abort; taking shard 0 only, its strict read
    waits (here: raises) while shard 1's writer is not fenced."""
    group = FakeGroup({0: 60, 1: 60})
    a = FakeMember(group, "a")
    ga = _group_learner(a, broker)
    a.pending.append(("assigned", [0, 1]))
    drive(ga, a, 1)
    assert [i.id for i in ga.checkpoint()] == ["000001", "000001"]  # shard 0's, shard 1's
    held = len(broker.log)  # a's next checkpoint of shard 1 stays open from here (a is killed)
    drive(ga, a, 2)
    assert [i.id for i in ga.checkpoint([0])] == ["000002"]  # committed after it: past the LSO
    broker.lso, broker.holder = held, transactional_id(ga.shards[1].loop.store)
    newest = ga.shards[0].view.next
    assert kafka_store(broker).child(shard_name(TOPIC, 0)).ids() == ["000001"]  # a plain read

    alone = FakeMember(group, "c")  # takes shard 0 only: shard 1's writer is not fenced yet
    gc = _group_learner(alone, broker)
    alone.pending.append(("assigned", [0]))
    with pytest.raises(SnapshotError, match="waited for"):
        drive(gc, alone, 1)
    assert gc.shards == {}
    assert broker.events[-1] == ("close", f"streambayes-learn-state-{shard_name(TOPIC, 0)}")

    b = FakeMember(group, "b")
    gb = _group_learner(b, broker)
    b.pending.append(("assigned", [0, 1]))
    drive(gb, b, 1)
    assert broker.lso is None  # shard 1's open transaction aborted by b's fence, not waited out
    shard = gb.shards[0]  # restored from 000002, then one batch read on from its offset
    assert shard.last_id == "000002" and shard.view.next - shard.unsaved == newest


@pytest.mark.parametrize(("snapshots", "dead", "needle"), [
    ("state/dir", None, "a directory or S3 store cannot join"),
    ("s3://bucket/prefix", "kafka://h:9092/dlq", "a directory or S3 store cannot join"),
    ("kafka://h:9092/state", "letters.jsonl", "--dead-letter must be a kafka:// topic"),
    ("kafka://h:9092/state", "kafka://other:9092/dlq", "one Kafka cluster"),
])
def test_exactly_once_needs_kafka_state_and_letters_on_one_cluster(snapshots, dead, needle):
    with pytest.raises(UsageError, match=needle):
        check_targets(snapshots, dead)


def test_learn_exactly_once_with_a_directory_store_exits_2_with_one_line(tmp_path, capsys):
    events = tmp_path / "e.jsonl"
    events.write_text('{"label": "a", "text": "x"}\n')
    code = main(["learn", "--source", str(events), "--snapshots", str(tmp_path / "s"),
                 "--exactly-once"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "kafka:// snapshot store" in err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("client, key", [("confluent", "transaction.timeout.ms"),
                                         ("kafka-python", "transaction_timeout_ms")])
def test_a_learner_checkpoint_transaction_timeout_is_a_setting(monkeypatch, client, key):
    """10 s by default (a restarted static learner waits out its killed self's open transaction
    before it can read the state), and a setting of the user's wins (a very large model)."""
    from types import SimpleNamespace

    from streambayes.config import Settings
    from streambayes.runtime.loops import learn_exactly_once

    made = []
    monkeypatch.setattr(learn_exactly_once, "TransactionalSink",
                        lambda *args, **kwargs: made.append(kwargs["options"]))
    store = SimpleNamespace(log=SimpleNamespace(chunk_bytes=1 << 20, bootstrap="b:9092"))
    learn_exactly_once.sink_factory(store, Settings(kafka_client=client))("tid")
    assert made[0][key] == learn_exactly_once.LEARN_TRANSACTION_TIMEOUT_MS == 10_000
    option = "STREAMBAYES_KAFKA_PRODUCER_OPTIONS"
    monkeypatch.setenv(option, json.dumps({key: 90_000}))
    learn_exactly_once.sink_factory(store, Settings(kafka_client=client))("tid")
    assert made[1][key] == 90_000


def test_a_shard_whose_restore_fails_closes_its_producer(broker):
    """The producer is made (and fences) before the restore: a restore that fails must not leave
    it open."""
    from streambayes.errors import SnapshotError

    released = []

    class Broken:
        def __init__(self, child) -> None:
            self.child = child

        def __getattr__(self, name):
            if name in ("latest", "ids", "read", "load"):
                raise SnapshotError("damaged")
            return getattr(self.child, name)

        def release(self) -> None:
            released.append(True)

    group, store = FakeGroup({0: 10}), kafka_store(broker)
    a = FakeMember(group, "a")
    gl = GroupLearner(a, Decoder("jsonl"), store, lambda: make_model("nb"), "nb", every=10**9,
                      every_seconds=10**9, batch_size=13, calibrate=False,
                      shard_parts=lambda child: (Broken(_parts(child)[0]), None))
    a.pending.append(("assigned", [0]))
    with pytest.raises(SnapshotError):
        drive(gl, a, 1)
    assert released == [True]


def test_a_strict_read_inside_the_own_transaction_is_refused():
    """It would wait for the transaction it is part of until the broker aborts it."""
    log = TopicLog("nowhere:9", STATE)
    log.writer = object()
    with pytest.raises(RuntimeError, match="wait for itself"):
        log.refresh(strict=True)
