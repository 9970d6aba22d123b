"""Hostile records through learn and predict on a real broker (issue 10, bounded for CI).

Every kind of hostile record of :mod:`streambayes.devtools.hostile` (including a 2 MB record over
the broker's default message size and an 800 KB record that is not UTF-8, whose base64 dead
letter would pass 1 MB) is produced between good SMS events. The learner and the predictor must
not crash or hang, and every record must come out learned (or published) or as a dead letter
with a reason; the dead letters of the big records are truncated to fit, with the size and the
checksum of the original.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter

from kafka import KafkaProducer

from streambayes.config import Settings
from streambayes.devtools.hostile import hostile_records
from streambayes.errors import BrokerError
from streambayes.runtime.kafka import kafka_python
from streambayes.runtime.loops.learn import LearnJob
from streambayes.runtime.loops.learn_run import run_learn
from streambayes.runtime.loops.predict import PredictJob, run_predict
from streambayes.runtime.loops.shards import newest_summary
from tests.integration.helpers import GROUP_OPTIONS, Background, encode, sms_events, wait_until

SETTINGS = Settings()


def _holds(bootstrap: str, topic: str, count: int) -> bool:
    """Whether ``topic`` holds ``count`` records yet (False, not an error, while it does not)."""
    try:
        return len(kafka_python.wait_for_records(bootstrap, topic, count, timeout=1)) >= count
    except BrokerError:
        return False


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=4 << 20, acks="all")
    for value in values:
        producer.send(topic, value)
    producer.flush()
    producer.close()


def _mixed(good: list[bytes], bad: list[bytes]) -> list[bytes]:
    return [r for pair in zip(good, bad, strict=False) for r in pair] + good[len(bad):] + bad[len(good):]


def _accounted_position(directory) -> int:
    header = newest_summary(directory)
    return 0 if header is None else sum(sum(p.values()) for p in header["positions"].values())


def test_hostile_records_through_kafka_learn_and_predict(bootstrap, new_topic, tmp_path):
    big = {"max.message.bytes": "4194304"}  # input topics take the 2 MB record; the others 1 MB
    train_topic, test_topic = new_topic(1, config=big), new_topic(1, config=big)
    posteriors, dlq = new_topic(1), new_topic(1)
    bad = hostile_records(120, big_max=1)
    big = hostile_records(1000, big_max=1)
    bad += [big[499], big[999]]  # the 2 MB record and the 800 KB non-UTF-8 one
    train = _mixed([encode(e) for e in sms_events(400)], bad)
    _produce(bootstrap, train_topic, train)

    snaps = tmp_path / "snaps"
    stop = threading.Event()
    job = LearnJob(source=f"kafka://{bootstrap}/{train_topic}", snapshots=snaps, model="nb",
                   every=100, every_seconds=0.5, dead_letter=f"kafka://{bootstrap}/{dlq}")
    loop = Background(lambda: run_learn(job, SETTINGS, stop))
    wait_until(lambda: _accounted_position(snaps) == len(train) or not loop.is_alive(), 120,
               "the learner to get past every record")
    stop.set()
    stats = loop.result(60)
    letters = [json.loads(r.value) for r in kafka_python.wait_for_records(
        bootstrap, dlq, sum(stats.dead_letters.values()), timeout=30)]
    header = newest_summary(snaps)
    assert header["events"] + len(letters) == len(train)
    assert header["events"] >= 400 and all(d["reason"] for d in letters)
    truncated = [d for d in letters if d.get("truncated")]
    assert len(truncated) >= 2, "the dead letters of the two big records are truncated to fit"
    originals = {hashlib.sha256(r).hexdigest(): len(r) for r in bad}
    for d in truncated:
        assert originals.get(d["payload_sha256"]) == d["payload_bytes"]

    test = _mixed([encode(e) for e in sms_events(200, labelled=False, prefix="u")], bad)
    _produce(bootstrap, test_topic, test)
    stop = threading.Event()
    pjob = PredictJob(source=f"kafka://{bootstrap}/{test_topic}", sink=f"kafka://{bootstrap}/{posteriors}",
                      snapshots=(snaps,), dead_letter=f"kafka://{bootstrap}/{dlq}")
    serving = Background(lambda: run_predict(pjob, SETTINGS, stop, group_options=GROUP_OPTIONS))
    wait_until(lambda: serving.value is not None or not serving.is_alive() or
               _holds(bootstrap, posteriors, 200),
               120, "the predictor to publish the good events")
    stop.set()
    pstats = serving.result(60)
    assert pstats.posteriors + sum(pstats.dead_letters.values()) == len(test)
    out = kafka_python.wait_for_records(bootstrap, posteriors, pstats.posteriors, timeout=30)
    ids = Counter(json.loads(r.value)["id"] for r in out)
    assert all(ids[f"u-{i:06d}"] == 1 for i in range(200))
