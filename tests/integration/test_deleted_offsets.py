"""A learner stopped longer than its input topic keeps records: on a real broker the records its
snapshot resumes at are deleted (DeleteRecords, as retention would), and the restarted learner
says which offsets it never learned, and counts them, instead of going on silently. A static
learner on kafka-python, a group learner on confluent (each client's own ``log_starts``). A
predictor group resuming past deleted records says which events got no posterior, on both
clients (kafka-python: its client's own reset, ``report_resets_past_deleted``; confluent:
librdkafka's own warning of that reset, read by
:class:`~streambayes.runtime.kafka.deleted.LoggedResets`), and so does a running one that falls
behind retention."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from streambayes.config import Settings
from streambayes.runtime.kafka import kafka_python
from streambayes.runtime.loops.learn import LearnJob
from streambayes.runtime.loops.learn_run import run_learn
from streambayes.runtime.loops.shards import newest_summary


def _send(bootstrap: str, topic: str, first: int, n: int) -> None:
    sink = kafka_python.KafkaSink(bootstrap)
    for i in range(first, first + n):
        sink.send(topic, f"k{i}", {"id": f"m{i}", "label": ("spam", "ham")[i % 2],
                                   "text": ("win cash prize now", "see you at lunch")[i % 2]})
    sink.close()


def _trim(bootstrap: str, topic: str, before: int) -> None:
    """DeleteRecords of everything below ``before`` in partition 0 (as retention would)."""
    from kafka import KafkaAdminClient, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_records({TopicPartition(topic, 0): before})
    finally:
        admin.close()


def _learn_until(job: LearnJob, settings: Settings, events: int):
    """Run the learner in a thread until its snapshots hold ``events`` events; its stats."""
    stop, out = threading.Event(), {}
    thread = threading.Thread(target=lambda: out.setdefault("stats", run_learn(job, settings, stop)),
                              daemon=True)
    thread.start()
    deadline, held = time.monotonic() + 90, None
    try:
        while time.monotonic() < deadline and thread.is_alive():
            summary = newest_summary(job.snapshots)
            held = summary and summary.get("events")
            if held == events:
                break
            time.sleep(0.3)
    finally:
        stop.set()
        thread.join(60)
    assert held == events, f"the snapshots hold {held} events, not {events}"
    assert not thread.is_alive()
    return out["stats"]


@pytest.mark.parametrize(("client", "partitions"), [("kafka-python", [0]), ("confluent", None)])
def test_a_learner_resuming_past_deleted_records_says_which_it_never_learned(
        bootstrap, new_topic, tmp_path, monkeypatch, caplog, client, partitions):
    monkeypatch.setenv("STREAMBAYES_KAFKA_CLIENT", client)
    settings = Settings()
    topic = new_topic(1, prefix="deleted")
    _send(bootstrap, topic, 0, 300)
    job = LearnJob(source=f"kafka://{bootstrap}/{topic}", snapshots=tmp_path / "state",
                   model="mnb", every=100, every_seconds=0.5, batch_size=100,
                   partitions=partitions)
    assert _learn_until(job, settings, 300).deleted == 0

    _send(bootstrap, topic, 300, 400)  # 700 records; the learner is away while 0..499 go
    _trim(bootstrap, topic, 500)
    with caplog.at_level(logging.WARNING):
        stats = _learn_until(job, settings, 300 + 200)
    assert stats.deleted == 200 and stats.events == 200
    assert f"{topic}[0]: offsets 300-499 were deleted from the topic" in caplog.text
    positions = json.loads(json.dumps(newest_summary(job.snapshots)["positions"]))
    assert positions == {topic: {"0": 700}}


@pytest.mark.parametrize(("client", "exactly_once"),
                         [("kafka-python", False), ("confluent", False), ("confluent", True)])
def test_a_predictor_group_resuming_past_deleted_records_says_which_got_no_posterior(
        bootstrap, new_topic, tmp_path, monkeypatch, caplog, client, exactly_once):
    from streambayes.cli import main
    from streambayes.devtools.predict_kills import _Committed
    from streambayes.runtime.loops.predict import PredictJob, run_predict

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STREAMBAYES_KAFKA_CLIENT", client)
    settings = Settings()
    (tmp_path / "train.jsonl").write_text("".join(
        json.dumps({"id": f"t{i}", "label": ("spam", "ham")[i % 2],
                    "text": ("win cash prize now", "see you at lunch")[i % 2]}) + "\n"
        for i in range(100)))
    assert main(["learn", "--source", "train.jsonl", "--snapshots", "state", "--model", "mnb"]) == 0
    topic = new_topic(1, prefix="deleted-in")
    _send(bootstrap, topic, 0, 300)
    if exactly_once:  # posteriors in a topic, one transaction a batch; read as committed
        outbox = new_topic(1, prefix="deleted-out")
        sink, committed = f"kafka://{bootstrap}/{outbox}", _Committed(bootstrap, outbox)
        posted = lambda: [json.loads(r.value)["id"] for r in committed.records]  # noqa: E731

        def count() -> int:
            committed.read()
            return len(committed.records)
    else:
        out = tmp_path / "posteriors.jsonl"
        sink = str(out)
        posted = lambda: [json.loads(line)["id"] for line in out.read_text().splitlines()]  # noqa: E731

        def count() -> int:
            return len(out.read_text().splitlines()) if out.exists() else 0
    job = PredictJob(source=f"kafka://{bootstrap}/{topic}", sink=sink, batch_size=100,
                     snapshots=(tmp_path / "state",), exactly_once=exactly_once,
                     transactional_id=f"{topic}-tid" if exactly_once else None)

    def serve_until(lines: int):
        stop, got = threading.Event(), {}
        thread = threading.Thread(
            target=lambda: got.setdefault("stats", run_predict(job, settings, stop)), daemon=True)
        thread.start()
        deadline, n = time.monotonic() + 90, 0
        try:
            while time.monotonic() < deadline and thread.is_alive():
                n = count()
                if n >= lines:
                    break
                time.sleep(0.3)
        finally:
            stop.set()
            thread.join(60)
        assert n == lines and not thread.is_alive(), f"{n} posteriors, not {lines}"
        return got["stats"]

    try:
        assert serve_until(300).deleted == 0
        _send(bootstrap, topic, 300, 400)  # 700 records; the predictors are away while 0..499 go
        _trim(bootstrap, topic, 500)
        with caplog.at_level(logging.WARNING):
            stats = serve_until(300 + 200)
        assert stats.deleted == 200 and stats.posteriors == 200
        assert f"{topic}[0]: offsets 300-499 were deleted from the topic" in caplog.text
        assert posted()[300:] == [f"m{i}" for i in range(500, 700)]
    finally:
        if exactly_once:
            committed.close()


def test_a_running_learner_behind_retention_says_which_offsets_it_never_read(
        bootstrap, new_topic, tmp_path, caplog):
    """kafka-python's consumer (in process: it fetches only when polled) reads 300 records in one
    fetch and the learner takes them 100 at a time; while it learns them, 400 more arrive and
    DeleteRecords removes everything below 500. Its next fetch (offset 300) is out of range: the
    client goes on from 500, and the learner says that 300-499 were never read."""
    from streambayes.models import make_model
    from streambayes.runtime.loops.learn import LearnLoop
    from streambayes.runtime.records.decode import Decoder
    from streambayes.snapshot import SnapshotStore

    topic = new_topic(1, prefix="behind")
    _send(bootstrap, topic, 0, 300)
    gate, held = threading.Event(), threading.Event()

    class Paused(kafka_python.AssignedSource):
        def poll(self, max_records: int = 500, timeout: float = 0.0):
            if self._next.get(0, 0) >= 100 and not gate.is_set():
                held.set()
                gate.wait(60)
            return super().poll(max_records, timeout)

    source = Paused(bootstrap, topic, partitions=[0])
    stop = threading.Event()
    loop = LearnLoop(source, Decoder("jsonl"), SnapshotStore(tmp_path / "state"),
                     lambda: make_model("mnb"), "mnb", batch_size=100, every=10**9,
                     stop_at_end=False, stop=stop)
    loop.restore()
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("stats", loop.run()), daemon=True)
    try:
        with caplog.at_level(logging.WARNING):
            thread.start()
            assert held.wait(60), "the learner did not reach offset 100"
            _send(bootstrap, topic, 300, 400)
            _trim(bootstrap, topic, 500)
            gate.set()
            deadline = time.monotonic() + 60
            while loop.stats.events + loop.stats.deleted < 700 and time.monotonic() < deadline:
                time.sleep(0.2)
    finally:
        gate.set()
        stop.set()
        thread.join(60)
        source.close()
    stats = out["stats"]
    assert (stats.events, stats.deleted) == (500, 200), stats
    assert f"{topic}[0]: offsets 300-499 were deleted from the topic (retention or DeleteRecords) " \
           "while this learner was behind" in caplog.text


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_running_predictor_member_behind_retention_says_which_offsets_it_never_read(
        bootstrap, new_topic, caplog, client):
    """A member of a predictor group reads 300 records; its partition is paused (as a member that
    falls behind stops fetching) while 400 more arrive and DeleteRecords removes everything below
    500; resumed, its fetch at 300 is out of range, its client goes on from 500 and the member
    says that 300-499 got no posterior, and counts them (each client's own reset, read as it
    happens: no question to the broker)."""
    import uuid

    from streambayes.runtime.kafka import confluent

    topic = new_topic(1, prefix="behind-group")
    _send(bootstrap, topic, 0, 300)
    module = kafka_python if client == "kafka-python" else confluent
    source = module.GroupSource(bootstrap, topic, group=f"g-{uuid.uuid4().hex[:8]}")
    offsets: list[int] = []

    def read_until(last: int) -> None:
        deadline = time.monotonic() + 60
        while (not offsets or offsets[-1] < last) and time.monotonic() < deadline:
            offsets.extend(r.offset for r in source.poll(100, 0.2))

    try:
        with caplog.at_level(logging.WARNING):
            read_until(299)
            assert offsets == list(range(300))
            _pause(source, client, topic, True)  # a member whose fetches stopped
            _send(bootstrap, topic, 300, 400)
            _trim(bootstrap, topic, 500)
            _pause(source, client, topic, False)
            read_until(699)
        assert offsets[300:] == list(range(500, 700))
        assert source.deleted == 200
        assert f"{topic}[0]: offsets 300-499 were deleted from the topic" in caplog.text
    finally:
        source.close()


def _pause(source, client: str, topic: str, pause: bool) -> None:
    """Pause (or resume) fetching partition 0 on a group source's own client (private)."""
    consumer = source._consumer
    if client == "kafka-python":  # kafka-python takes *partitions
        from kafka import TopicPartition

        (consumer.pause if pause else consumer.resume)(TopicPartition(topic, 0))
    else:
        from confluent_kafka import TopicPartition

        (consumer.pause if pause else consumer.resume)([TopicPartition(topic, 0)])
