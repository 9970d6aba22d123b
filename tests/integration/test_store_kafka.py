"""The Kafka topic snapshot store on the session's broker: the conformance suite, and what only
a topic can get wrong (chunks, a write that dies between chunks, a lost chunk, a non-compacted
topic), and the command line end to end with no shared disk. Every test runs with each client
reading the topic (``STREAMBAYES_KAFKA_CLIENT``: confluent, the default, and kafka-python)."""

import itertools
import json
import os

import numpy as np
import pytest

from streambayes.cli import main
from streambayes.errors import SnapshotError
from streambayes.runtime.kafka import kafka_python
from streambayes.runtime.stores import kafka_topic, open_store
from streambayes.runtime.stores.kafka_readers import ConfluentReader, KafkaPythonReader
from streambayes.runtime.stores.kafka_topic import KafkaSnapshotStore, TopicLog
from streambayes.snapshot.store import parse_id
from tests.store_conformance import STATE, Backend, StoreConformance, flipped

_names = itertools.count()
READERS = {"confluent": ConfluentReader, "kafka-python": KafkaPythonReader}


@pytest.fixture(autouse=True, params=sorted(READERS))
def client(request, monkeypatch):
    """The client that reads the state topic, in stores made here and by the command line."""
    monkeypatch.setattr(kafka_topic, "DEFAULT_CLIENT", request.param)
    monkeypatch.setenv("STREAMBAYES_KAFKA_CLIENT", request.param)
    return request.param


def _topic() -> str:
    return f"state-{os.getpid()}-{next(_names)}"


def kafka_backend(bootstrap: str, topic: str) -> Backend:
    logs: list[TopicLog] = []

    def open_(keep=5, **kw):  # a new TopicLog per store: a fresh reader, as another host has
        logs.append(TopicLog(bootstrap, topic))
        return KafkaSnapshotStore(logs[-1], keep, **kw)

    def damage(store, snapshot_id):
        name = store._name(parse_id(snapshot_id))
        store.log.refresh()
        first = f"{name}:{json.loads(store.log.values([name])[0])['write']}:000000"
        store.log.send([(first, flipped(store.log.values([first])[0]))])

    return Backend("kafka", open_, damage), logs


@pytest.fixture
def backend(bootstrap):
    made, logs = kafka_backend(bootstrap, _topic())
    yield made
    for log in logs:
        log.close()


class TestKafkaStore(StoreConformance):
    pass


def _write(store, n):
    return store.write({**STATE, "counts": STATE["counts"] + n}, model="mnb",
                       positions={"events": {"0": n}}, events=n)


def test_a_snapshot_is_chunked_to_the_topics_message_size(bootstrap):
    topic = _topic()
    kafka_python.create_topic(bootstrap, topic, config={"cleanup.policy": "compact",
                                                       "max.message.bytes": "8000"})
    store = open_store(f"kafka://{bootstrap}/{topic}")
    info = _write(store, 1)
    chunks = [k for k in store.log.records if k.startswith("snapshot-000001.sbs:")]
    assert info.size > 40_000 and len(chunks) == -(-info.size // store.log.chunk_bytes) > 5
    np.testing.assert_array_equal(open_store(f"kafka://{bootstrap}/{topic}").latest().state["counts"],
                                  STATE["counts"] + 1)


def test_a_reader_keeps_only_the_newest_snapshots_chunks_and_fetches_older_ones(bootstrap):
    topic = _topic()
    kafka_python.create_topic(bootstrap, topic, config={"cleanup.policy": "compact",
                                                       "max.message.bytes": "8000"})
    writer = open_store(f"kafka://{bootstrap}/{topic}")
    for n in (1, 2, 3):
        _write(writer, n)
    _write(writer.child("partition-events-0"), 7)
    reader = open_store(f"kafka://{bootstrap}/{topic}")
    assert reader.ids() == ["000001", "000002", "000003"]
    held = {key.split(":")[0]: isinstance(value, bytes) for key, value in reader.log.records.items()
            if ":" in key}
    assert held == {"snapshot-000001.sbs": False, "snapshot-000002.sbs": False,
                    "snapshot-000003.sbs": True, "partition-events-0/snapshot-000001.sbs": True}
    for n in (1, 2, 3):
        np.testing.assert_array_equal(reader.load(n).state["counts"], STATE["counts"] + n)


def test_a_write_that_dies_between_chunks_is_never_a_snapshot(bootstrap, monkeypatch, client):
    topic = _topic()
    kafka_python.create_topic(bootstrap, topic, config={"cleanup.policy": "compact",
                                                       "max.message.bytes": "8000"})
    store = open_store(f"kafka://{bootstrap}/{topic}")
    _write(store, 1)
    real = TopicLog.send

    def die_after_two_chunks(self, items):
        real(self, items[:2])
        raise SnapshotError("killed between chunks")

    monkeypatch.setattr(TopicLog, "send", die_after_two_chunks)
    with pytest.raises(SnapshotError, match="killed"):
        _write(store, 2)
    monkeypatch.setattr(TopicLog, "send", real)
    reader = open_store(f"kafka://{bootstrap}/{topic}")
    assert reader.ids() == ["000001"] and reader.latest().events == 1
    assert isinstance(reader.log._reader, READERS[client])
    orphans = {k for k in reader.log.records if k.startswith("snapshot-000002.sbs:")}
    assert len(orphans) == 2
    assert _write(reader, 3).id == "000002"  # the id taken by a whole snapshot; the orphans are
    assert orphans < set(reader.log.records)  # young: maybe another writer's write under way
    again = KafkaSnapshotStore(TopicLog(bootstrap, topic), stale_after=0)  # any age is stale
    assert again.latest().events == 3 and again.ids() == ["000001", "000002"]
    assert _write(again, 4).id == "000003" and not orphans & set(again.log.records)
    manifest = json.loads(again.log.records["snapshot-000002.sbs"])
    assert sum(k.startswith("snapshot-000002.sbs:") for k in again.log.records) == manifest["chunks"]
    assert all(k.startswith(f"snapshot-000002.sbs:{manifest['write']}:")
               for k in again.log.records if k.startswith("snapshot-000002.sbs:"))
    again.log.close()


def test_two_writers_of_one_number_keep_both_snapshots(bootstrap, monkeypatch):
    """A learner that has just lost a shard checkpoints it while its new owner writes there:
    both take the next number; the one whose manifest comes second takes the number after."""
    topic = _topic()
    kafka_python.create_topic(bootstrap, topic, config={"cleanup.policy": "compact",
                                                       "max.message.bytes": "8000"})
    old_owner, new_owner = (KafkaSnapshotStore(TopicLog(bootstrap, topic)) for _ in range(2))
    _write(old_owner, 1)
    real, crossed = TopicLog.send, []

    def send(self, items):  # the new owner writes a whole snapshot between the old owner's chunks
        real(self, items)  # and its manifest
        if self is old_owner.log and not crossed and items[0][0].startswith("snapshot-000002.sbs:"):
            crossed.append(_write(new_owner, 20).id)

    monkeypatch.setattr(TopicLog, "send", send)
    assert _write(old_owner, 10).id == "000003" and crossed == ["000002"]
    reader = KafkaSnapshotStore(TopicLog(bootstrap, topic), stale_after=0)
    assert reader.ids() == ["000001", "000002", "000003"]
    assert [reader.load(n).events for n in (1, 2, 3)] == [1, 20, 10]
    _write(reader, 30)  # the old owner's chunks under 000002 were deleted at once, by itself
    assert sum(k.startswith("snapshot-000002.sbs:") for k in reader.log.records) == \
        json.loads(reader.log.records["snapshot-000002.sbs"])["chunks"]
    for store in (old_owner, new_owner, reader):
        store.log.close()


def test_manifests_that_cross_leave_one_whole_snapshot(bootstrap, monkeypatch):
    """Two writers pass the look before their manifests at the same time: the later manifest is
    the snapshot, whole (each names its own chunks), never a mix of the two writes' chunks."""
    topic = _topic()
    kafka_python.create_topic(bootstrap, topic, config={"cleanup.policy": "compact",
                                                       "max.message.bytes": "8000"})
    first, second = (KafkaSnapshotStore(TopicLog(bootstrap, topic)) for _ in range(2))
    real_refresh, real_send = TopicLog.refresh, TopicLog.send
    holding = []

    def refresh(self):  # the look before the manifest sees nothing new
        if not any(key.endswith(".sbs") for key, _ in getattr(self, "_last", [])):
            real_refresh(self)

    def send(self, items):
        self._last = items
        if self is first.log and items[0][0] == "snapshot-000001.sbs" and not holding:
            holding.append(_write(second, 2).id)  # the second's whole write, then the first's manifest
        real_send(self, items)

    monkeypatch.setattr(TopicLog, "refresh", refresh)
    monkeypatch.setattr(TopicLog, "send", send)
    assert _write(first, 1).id == "000001" and holding == ["000001"]
    monkeypatch.undo()
    reader = open_store(f"kafka://{bootstrap}/{topic}")
    assert reader.ids() == ["000001"] and reader.latest().events == 1  # the later manifest's
    assert reader.list()[0].ok
    for store in (first, second):
        store.log.close()


def test_a_lost_chunk_makes_the_snapshot_corrupt(bootstrap):
    uri = f"kafka://{bootstrap}/{_topic()}"
    store = open_store(uri)
    _write(store, 1)
    _write(store, 2)
    write = json.loads(store.log.records["snapshot-000002.sbs"])["write"]
    store.log.send([(f"snapshot-000002.sbs:{write}:000000", None), ("not-a-snapshot", b"x" * 100),
                    ("../snapshot-000009.sbs", b"{}")])
    reader = open_store(uri)
    assert reader.latest().id == "000001" and reader.ids() == ["000001", "000002"]
    assert not {"not-a-snapshot", "../snapshot-000009.sbs"} & set(reader.log.records)
    assert "misses chunk" in reader.list()[-1].error


def test_a_topic_that_deletes_old_records_is_refused(bootstrap):
    topic = _topic()
    kafka_python.create_topic(bootstrap, topic)  # cleanup.policy=delete
    with pytest.raises(SnapshotError, match="compacted"):
        _write(open_store(f"kafka://{bootstrap}/{topic}"), 1)


def test_a_reader_of_a_topic_not_yet_written_sees_an_empty_store_and_creates_nothing(bootstrap):
    topic = _topic()
    store = open_store(f"kafka://{bootstrap}/{topic}")
    assert (store.ids(), store.latest(), store.children()) == ([], None, [])
    assert topic not in kafka_python_topics(bootstrap)
    _write(store, 1)
    assert store.latest().id == "000001" and topic in kafka_python_topics(bootstrap)


def kafka_python_topics(bootstrap):
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, allow_auto_create_topics=False)
    try:
        return consumer.topics()
    finally:
        consumer.close()


def test_the_store_creates_a_compacted_topic(bootstrap):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    topic = _topic()
    _write(open_store(f"kafka://{bootstrap}/{topic}"), 1)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                           config_filter="all")
    finally:
        admin.close()
    assert "cleanup.policy': {'value': 'compact'" in str(described)


def test_learn_then_predict_through_the_state_topic(bootstrap, tmp_path, monkeypatch, capsys):
    """No 'kafka:' directory any more: learn writes the topic, predict and snapshot read it."""
    monkeypatch.chdir(tmp_path)
    lines = [json.dumps({"id": f"m{n}", "text": ("win cash prize now", "see you at lunch")[n % 2],
                         "label": ("spam", "ham")[n % 2]}) for n in range(300)]
    (tmp_path / "train.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "q.jsonl").write_text('{"id": "q1", "text": "win a prize"}\n')
    uri = f"kafka://{bootstrap}/{_topic()}"
    assert main(["learn", "--source", "train.jsonl", "--snapshots", uri, "--model", "mnb",
                 "--every", "100", "--batch-size", "100", "--keep", "2"]) == 0
    assert main(["predict", "--source", "q.jsonl", "--sink", "out.jsonl", "--snapshots", uri]) == 0
    (post,) = map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())
    assert post["decision"] == "spam" and post["snapshot"] == "000003"
    capsys.readouterr()
    assert main(["snapshot", "ls", uri]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == ["000002", "000003"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "q.jsonl", "train.jsonl"]


def test_a_predictor_on_another_host_follows_the_learners_new_snapshots(bootstrap):
    from streambayes.models import make_model
    from streambayes.runtime.loops.predict import ModelWatcher

    uri = f"kafka://{bootstrap}/{_topic()}"
    learner_store, predictor_store = open_store(uri), open_store(uri)  # two clients, no shared disk
    watcher = ModelWatcher([predictor_store])
    assert watcher.check() is False and watcher.current is None  # no topic yet: waits
    model = make_model("mnb")
    for n, text in enumerate(("win cash", "lunch at noon", "claim the prize")):
        model.learn_many(model.featurize([{"text": text}]), [("spam", "ham")[n % 2]])
        learner_store.write(model.to_state(), model="mnb", positions={"events": {"0": n + 1}}, events=n + 1)
        assert watcher.check() and watcher.current.ids == (f"{n + 1:06d}",)
        assert watcher.current.events == n + 1
    assert watcher.check() is False


def test_group_learners_keep_their_partition_shards_in_the_state_topic(bootstrap, new_topic,
                                                                         tmp_path, monkeypatch,
                                                                         capsys):
    """Group-managed learners (no --partitions) with a kafka:// state: one shard per partition in
    the topic, and a predictor with no shared disk serves their merge."""
    import threading
    import time

    from streambayes.config import Settings
    from streambayes.runtime.loops.learn import LearnJob
    from streambayes.runtime.loops.learn_run import run_learn
    from streambayes.runtime.loops.shards import expand_shards

    monkeypatch.chdir(tmp_path)
    topic = new_topic(2)
    sink = kafka_python.KafkaSink(bootstrap)
    for n in range(400):
        sink.send(topic, f"k{n}", {"id": f"m{n}", "text": ("win cash prize now", "see you at lunch")[n % 2],
                                   "label": ("spam", "ham")[n % 2]})
    sink.close()
    uri = f"kafka://{bootstrap}/{_topic()}"
    job = LearnJob(source=f"kafka://{bootstrap}/{topic}", snapshots=uri, model="mnb", every=100,
                   every_seconds=0.5, batch_size=100)
    stop = threading.Event()
    learner = threading.Thread(target=run_learn, args=(job, Settings(), stop), daemon=True)
    learner.start()
    deadline = time.monotonic() + 90
    events = 0
    try:
        while time.monotonic() < deadline:
            shards = expand_shards([open_store(uri)])
            heads = [s.latest_header() for s in shards]
            events = sum(h["events"] for h in heads if h) if len(shards) == 2 else 0
            if events == 400:
                break
            time.sleep(0.5)
    finally:
        stop.set()
        learner.join(60)
    assert events == 400 and not learner.is_alive()
    names = [f"partition-{topic}-0", f"partition-{topic}-1"]
    assert sorted(open_store(uri).children()) == names
    assert not any(p.name.startswith("kafka") for p in tmp_path.iterdir())  # no local state
    capsys.readouterr()
    assert main(["snapshot", "show", uri]) == 0  # each shard by its name (not the store's repr)
    shown = json.loads(capsys.readouterr().out)
    assert sorted(shown) == names and sum(head["events"] for head in shown.values()) == 400
    assert main(["snapshot", "ls", uri]) == 0
    listed = {line.split("/")[0] for line in capsys.readouterr().out.splitlines()}
    assert listed == set(names)
    (tmp_path / "q.jsonl").write_text('{"id": "q1", "text": "win a prize"}\n')
    assert main(["predict", "--source", "q.jsonl", "--sink", "out.jsonl", "--snapshots", uri]) == 0
    (post,) = map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())
    assert post["decision"] == "spam"


def test_a_reader_skips_aborted_records_and_reads_past_transaction_markers(bootstrap, client):
    """Records of an aborted transaction are no snapshot, and a log that ends with a transaction
    marker (no record at its last offset) is read to its end, not until the read's deadline."""
    from confluent_kafka import Producer

    uri = f"kafka://{bootstrap}/{_topic()}"
    writer = open_store(uri)
    _write(writer, 1)
    topic = writer.log.topic
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"snapshot-000007.sbs", value=b"{}", partition=0)
    assert producer.flush(30) == 0  # in the log, then aborted
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"not-a-snapshot", value=b"x", partition=0)
    producer.commit_transaction(30)
    reader = KafkaSnapshotStore(TopicLog(bootstrap, topic, timeout=20), 5)
    try:
        assert reader.ids() == ["000001"] and reader.latest().events == 1
        _write(writer, 2)
        assert reader.ids() == ["000001", "000002"] and reader.latest().events == 2
    finally:
        reader.log.close()


def test_snapshots_of_chunks_without_write_ids_are_still_read(bootstrap, monkeypatch):
    """Snapshots written before chunks had write ids (``snapshot-000001.sbs:000000``)."""
    topic = _topic()
    kafka_python.create_topic(bootstrap, topic, config={"cleanup.policy": "compact",
                                                       "max.message.bytes": "8000"})
    old = KafkaSnapshotStore(TopicLog(bootstrap, topic))
    monkeypatch.setattr(kafka_topic, "_write_id", lambda: None)
    _write(old, 1)
    monkeypatch.undo()
    assert "snapshot-000001.sbs:000000" in old.log.records
    reader = KafkaSnapshotStore(TopicLog(bootstrap, topic))
    assert reader.ids() == ["000001"] and reader.latest().events == 1
    assert _write(reader, 2).id == "000002" and reader.latest().events == 2
    assert [info.ok for info in reader.list()] == [True, True]
    for store in (old, reader):
        store.log.close()
