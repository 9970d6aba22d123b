"""Dead letters too large for the producer, and role-split client options, on a real broker
(issue 10, items 2 and 7)."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from types import ModuleType

import pytest

from streambayes.config import Settings
from streambayes.runtime.kafka import confluent as kafka_confluent
from streambayes.runtime.kafka import kafka_python
from streambayes.runtime.loops.learn import LearnJob
from streambayes.runtime.loops.learn_run import run_learn
from streambayes.runtime.loops.predict import PredictJob, run_predict
from streambayes.runtime.loops.shards import newest_summary
from tests.integration.helpers import Background, encode, sms_events, wait_until, write_jsonl

BIG_JSON = b'{"id": "big", "label": "spam", "text": "' + b"a" * 1_500_000  # 1.5 MB: over the record limit
BIG_BINARY = bytes(range(128, 256)) * 6_400  # 800 KB, not UTF-8: its base64 passes 1 MB
BIG_FETCH = {"kafka-python": {"max_partition_fetch_bytes": 4_000_000},
             "confluent": {"max.partition.fetch.bytes": 4_000_000,
                           "fetch.message.max.bytes": 4_000_000}}
BIG_PRODUCE = {"kafka-python": {"max_request_size": 4_000_000},
               "confluent": {"message.max.bytes": 4_000_000}}


@pytest.fixture(params=[kafka_python, kafka_confluent], ids=lambda module: module.NAME)
def backend(request) -> ModuleType:
    return request.param


def test_dead_letters_of_huge_records_are_truncated_and_the_learner_finishes(backend, bootstrap,
                                                                            new_topic, tmp_path):
    # the input topic takes records of 4 MB (as a user's may); the dead-letter topic has the
    # broker's default limit (1 MB), which the dead letters of these records would pass
    events_in, dlq = new_topic(1, config={"max.message.bytes": "4194304"}), new_topic(1)
    good = sms_events(50)
    sender = backend.KafkaSink(bootstrap, options=BIG_PRODUCE[backend.NAME])
    for e in good[:25]:
        sender.send(events_in, None, encode(e))
    sender.send(events_in, None, BIG_JSON)
    sender.send(events_in, None, BIG_BINARY)
    for e in good[25:]:
        sender.send(events_in, None, encode(e))
    sender.close()

    settings = Settings(kafka_client=backend.NAME, kafka_consumer_options=BIG_FETCH[backend.NAME],
                        kafka_delivery_deadline=30)
    stop = threading.Event()
    job = LearnJob(source=f"kafka://{bootstrap}/{events_in}", snapshots=tmp_path / "snaps",
                   every=10, every_seconds=0.5, dead_letter=f"kafka://{bootstrap}/{dlq}")
    learning = Background(lambda: run_learn(job, settings, stop))
    letters = kafka_python.wait_for_records(bootstrap, dlq, 2, timeout=60,
                                            options=BIG_FETCH["kafka-python"])
    wait_until(lambda: (newest_summary(tmp_path / "snaps") or {}).get("events") == 50,
               60, "the learner to learn every good event")
    stop.set()
    stats = learning.result(timeout=60)
    assert stats.events == len(good) and sum(stats.dead_letters.values()) == 2
    assert stats.snapshots, "the learner snapshots after its dead letters are delivered"

    docs = sorted((json.loads(r.value) for r in letters), key=lambda d: d["source"]["offset"])
    for doc, raw, reason, record in zip(docs, (BIG_JSON, BIG_BINARY), ("limit", "undecodable"),
                                        sorted(letters, key=lambda r: r.offset), strict=True):
        assert len(record.value) <= 1_048_576
        assert doc["reason"] == reason and doc["truncated"] is True
        assert doc["payload_bytes"] == len(raw)
        assert doc["payload_sha256"] == hashlib.sha256(raw).hexdigest()
        head = (base64.b64decode(doc["payload"]) if doc["payload_encoding"] == "base64"
                else doc["payload"].encode())
        assert raw.startswith(head) and len(head) > 500_000
    assert [d["source"]["offset"] for d in docs] == [25, 26]


def test_predict_with_a_consumer_option_in_the_shared_options(bootstrap, new_topic, tmp_path):
    """``STREAMBAYES_KAFKA_OPTIONS='{"session_timeout_ms":6000}'`` once crashed the producer."""
    snaps = tmp_path / "snaps"
    train = write_jsonl(tmp_path / "train.jsonl", sms_events(200))
    run_learn(LearnJob(source=str(train), snapshots=snaps), Settings())
    inbox, posteriors = new_topic(1), new_topic(1)
    events = sms_events(30, labelled=False, prefix="u")
    sender = kafka_python.KafkaSink(bootstrap)
    for e in events:
        sender.send(inbox, None, encode(e))
    sender.close()

    settings = Settings(kafka_client="kafka-python", kafka_options={"session_timeout_ms": 6000})
    stop = threading.Event()
    job = PredictJob(source=f"kafka://{bootstrap}/{inbox}", sink=f"kafka://{bootstrap}/{posteriors}",
                     snapshots=(snaps,))
    serving = Background(lambda: run_predict(job, settings, stop))
    try:
        out = kafka_python.wait_for_records(bootstrap, posteriors, len(events), timeout=60)
    finally:
        stop.set()
        stats = serving.result(timeout=30)
    assert {json.loads(r.value)["id"] for r in out} == {e["id"] for e in events}
    assert stats.posteriors == len(events)
