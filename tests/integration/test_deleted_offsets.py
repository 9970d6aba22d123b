"""A learner stopped longer than its input topic keeps records: on a real broker the records its
snapshot resumes at are deleted (DeleteRecords, as retention would), and the restarted learner
says which offsets it never learned, and counts them, instead of going on silently. A static
learner on kafka-python, a group learner on confluent (each client's own ``log_starts``)."""

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
    from kafka import KafkaAdminClient, TopicPartition

    monkeypatch.setenv("STREAMBAYES_KAFKA_CLIENT", client)
    settings = Settings()
    topic = new_topic(1, prefix="deleted")
    _send(bootstrap, topic, 0, 300)
    job = LearnJob(source=f"kafka://{bootstrap}/{topic}", snapshots=tmp_path / "state",
                   model="mnb", every=100, every_seconds=0.5, batch_size=100,
                   partitions=partitions)
    assert _learn_until(job, settings, 300).deleted == 0

    _send(bootstrap, topic, 300, 400)  # 700 records; the learner is away while 0..499 go
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_records({TopicPartition(topic, 0): 500})
    finally:
        admin.close()
    with caplog.at_level(logging.WARNING):
        stats = _learn_until(job, settings, 300 + 200)
    assert stats.deleted == 200 and stats.events == 200
    assert f"{topic}[0]: offsets 300-499 were deleted from the topic" in caplog.text
    positions = json.loads(json.dumps(newest_summary(job.snapshots)["positions"]))
    assert positions == {topic: {"0": 700}}
