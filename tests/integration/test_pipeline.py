"""Learner → snapshot → predictor on a real broker: round trip, hot reload, scale-out, replay."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest

from streambayes.cli import main
from streambayes.config import Settings
from streambayes.models import model_from_state
from streambayes.runtime.kafka import kafka_python
from streambayes.runtime.loops.learn import LearnJob
from streambayes.runtime.loops.learn_run import run_learn
from streambayes.runtime.loops.predict import PredictJob, run_predict
from streambayes.runtime.loops.shards import (
    latest_all,
    merge_snapshots,
    newest_state,
    newest_summary,
    open_stores,
)
from streambayes.snapshot import SnapshotStore
from tests.integration.helpers import (
    BAD_RECORDS,
    BAD_UNLABELLED,
    GROUP_OPTIONS,
    Background,
    assert_states_equal,
    canonical_state,
    encode,
    sms_events,
    wait_until,
)

SETTINGS = Settings()


def produce(bootstrap: str, topic: str, values: list[tuple[str | None, bytes]]) -> None:
    sink = kafka_python.KafkaSink(bootstrap)
    for key, value in values:
        sink.send(topic, key, value)
    sink.close()


def learner(bootstrap, topic, directory, *, partitions=None, dead=None, every=1000, model="nb"):
    stop = threading.Event()
    job = LearnJob(source=f"kafka://{bootstrap}/{topic}", snapshots=directory, model=model,
                   every=every, every_seconds=0.5, partitions=partitions,
                   dead_letter=f"kafka://{bootstrap}/{dead}" if dead else None)
    return stop, Background(lambda: run_learn(job, SETTINGS, stop))


def learned(directory) -> int:
    header = newest_summary(directory)  # a group learner's shards, summed
    return 0 if header is None else header["events"]


def test_round_trip_sms(bootstrap, new_topic, tmp_path):
    events_in, unlabelled_in, posteriors, dlq = (new_topic(2), new_topic(2), new_topic(2),
                                                 new_topic(1))
    train = sms_events(3000)
    test = sms_events(5574, labelled=False)[3000:]
    produce(bootstrap, events_in, [(e["id"], encode(e)) for e in train] +
            [(None, raw) for raw, _ in BAD_RECORDS])
    snaps = tmp_path / "snaps"
    stop, loop = learner(bootstrap, events_in, snaps, dead=dlq)
    wait_until(lambda: learned(snaps) == len(train), 60, "the learner to learn every event")
    stop.set()
    stats = loop.result()
    assert stats.events == len(train)
    assert sum(stats.dead_letters.values()) == len(BAD_RECORDS)

    produce(bootstrap, unlabelled_in, [(e["id"], encode(e)) for e in test] +
            [(None, raw) for raw, _ in BAD_UNLABELLED])
    stop = threading.Event()
    job = PredictJob(source=f"kafka://{bootstrap}/{unlabelled_in}",
                     sink=f"kafka://{bootstrap}/{posteriors}", snapshots=(snaps,),
                     dead_letter=f"kafka://{bootstrap}/{dlq}")
    serving = Background(lambda: run_predict(job, SETTINGS, stop, group_options=GROUP_OPTIONS))
    out = kafka_python.wait_for_records(bootstrap, posteriors, len(test), timeout=90)
    time.sleep(1.0)  # anything extra (a duplicate) would arrive now
    stop.set()
    serving.result()
    out = kafka_python.wait_for_records(bootstrap, posteriors, len(test), timeout=10)
    ids = Counter(json.loads(r.value)["id"] for r in out)
    assert ids == Counter(e["id"] for e in test), "exactly one posterior per event id"
    newest = newest_summary(snaps)["id"]
    first = json.loads(out[0].value)
    assert first["snapshot"] == newest and first["model"] == "nb"
    assert set(first["posterior"]) == {"ham", "spam"} and first["decision"] in ("ham", "spam")
    assert {r.key.decode() for r in out} == set(ids)  # keyed by the event id (no key given)
    accuracy = sum(json.loads(r.value)["decision"] == lab for r, lab in
                   zip(sorted(out, key=lambda r: json.loads(r.value)["id"]),
                       [e["label"] for e in sms_events(5574)[3000:]], strict=True)) / len(out)
    assert accuracy > 0.95

    letters = [json.loads(r.value) for r in
               kafka_python.wait_for_records(bootstrap, dlq, len(BAD_RECORDS) + len(BAD_UNLABELLED))]
    assert Counter(d["reason"] for d in letters) == Counter(
        reason for _, reason in BAD_RECORDS + BAD_UNLABELLED)
    by_topic = Counter(d["source"]["topic"] for d in letters)
    assert by_topic == {events_in: len(BAD_RECORDS), unlabelled_in: len(BAD_UNLABELLED)}
    undecodable = next(d for d in letters if d["reason"] == "undecodable")
    assert undecodable["payload_encoding"] == "base64"
    assert all(isinstance(d["source"]["offset"], int) for d in letters)


def test_hot_reload_within_ten_seconds(bootstrap, new_topic, tmp_path):
    inbox, posteriors = new_topic(1), new_topic(1)
    snaps = tmp_path / "snaps"
    from streambayes.models import make_model

    store = SnapshotStore(snaps)
    first = make_model("mnb")
    first.learn_many([{"text": "win cash prize"}, {"text": "see you at lunch"}], ["spam", "ham"])
    store.write(first.to_state(), model="mnb", positions={}, events=2)
    stop = threading.Event()
    job = PredictJob(source=f"kafka://{bootstrap}/{inbox}", sink=f"kafka://{bootstrap}/{posteriors}",
                     snapshots=(snaps,), reload_seconds=0.5)
    serving = Background(lambda: run_predict(job, SETTINGS, stop, group_options=GROUP_OPTIONS))
    sink = kafka_python.KafkaSink(bootstrap)
    sent = 0

    def send_one() -> None:
        nonlocal sent
        sink.send(inbox, None, encode({"id": f"u-{sent}", "text": "cash for lunch"}))
        sink.flush()
        sent += 1

    send_one()
    kafka_python.wait_for_records(bootstrap, posteriors, 1, timeout=60)  # joined and serving
    second = make_model("mnb")
    second.learn_many([{"text": "lunch lunch cash"}] * 5, ["ham"] * 5)
    newer = store.write(second.to_state(), model="mnb", positions={}, events=5)
    written = time.monotonic()
    seen = None
    while time.monotonic() - written < 10 and seen is None:
        send_one()
        time.sleep(0.1)
        for r in kafka_python.wait_for_records(bootstrap, posteriors, 1, timeout=10):
            post = json.loads(r.value)
            if post["snapshot"] == newer.id:
                seen = time.monotonic() - written
    stop.set()
    serving.result()
    assert seen is not None and seen < 10, "the predictor did not serve the newer snapshot in 10 s"
    assert serving.value.reloads >= 1


def test_two_learners_merged_equal_one_on_all_partitions(bootstrap, new_topic, tmp_path):
    topic = new_topic(4)
    events = sms_events(4000)
    produce(bootstrap, topic, [(e["id"], encode(e)) for e in events])
    per_partition = Counter(r.partition for r in
                            kafka_python.wait_for_records(bootstrap, topic, len(events)))
    assert len(per_partition) == 4, "keys should spread over the 4 partitions"
    dirs = {name: tmp_path / name for name in ("a", "b", "all")}
    runs = {"a": learner(bootstrap, topic, dirs["a"], partitions=(0, 1)),
            "b": learner(bootstrap, topic, dirs["b"], partitions=(2, 3)),
            "all": learner(bootstrap, topic, dirs["all"])}
    expected = {"a": per_partition[0] + per_partition[1], "b": per_partition[2] + per_partition[3],
                "all": len(events)}
    for name, count in expected.items():
        wait_until(lambda d=dirs[name], c=count: learned(d) == c, 60, f"learner {name}")
    for stop, loop in runs.values():
        stop.set()
        loop.result()
    assert main(["snapshot", "merge", str(dirs["a"]), str(dirs["b"]),
                 "--to", str(tmp_path / "merged")]) == 0
    merged = SnapshotStore(tmp_path / "merged").latest()
    whole = newest_state(dirs["all"])  # a group learner: its partition shards, merged
    assert merged.events == whole.events == len(events)
    assert merged.positions == whole.positions
    # nb's alpha="auto" is fitted at fixed event counts while learning and on the merged counts by
    # a merge: the whole learner's model, refitted on all its counts, is what the merge must equal
    whole_model = model_from_state(whole.state)
    whole_model.refit_alpha()
    whole_state = canonical_state(whole_model.to_state())
    assert_states_equal(canonical_state(merged.state), whole_state)
    # the predictor's own shard merge gives the same model
    served = merge_snapshots(latest_all(open_stores([dirs["a"], dirs["b"]])))
    assert_states_equal(canonical_state(served.model.to_state()), whole_state)


def test_replay_from_topic_by_offsets_and_time(bootstrap, new_topic, tmp_path, capsys):
    topic = new_topic(1)
    events = sms_events(600)
    produce(bootstrap, topic, [(e["id"], encode(e)) for e in events[:400]])
    time.sleep(0.05)
    middle = time.time()
    time.sleep(0.05)
    produce(bootstrap, topic, [(e["id"], encode(e)) for e in events[400:]])
    kafka_python.wait_for_records(bootstrap, topic, len(events))
    report = tmp_path / "report"
    uri = f"kafka://{bootstrap}/{topic}?from=100&to=500"
    assert main(["replay", uri, "--model", "mnb,bnb", "--report", str(report)]) == 0
    metrics = json.loads((report / "metrics.json").read_text())
    assert metrics["events"] == 400 and set(metrics["models"]) == {"mnb", "bnb"}
    assert (report / "learning_curves.png").is_file()
    from datetime import UTC, datetime

    iso = datetime.fromtimestamp(middle, UTC).isoformat().replace("+00:00", "Z")
    assert main(["replay", f"kafka://{bootstrap}/{topic}?from={iso}", "--model", "mnb",
                 "--report", str(report)]) == 0
    assert json.loads((report / "metrics.json").read_text())["events"] == 200
    assert main(["replay", f"kafka://{bootstrap}/{topic}", "--model", "mnb",
                 "--report", str(report)]) == 0
    assert json.loads((report / "metrics.json").read_text())["events"] == 600


@pytest.mark.parametrize("bad", ["kafka://host/t", "kafka://h:1/", "kafka://h:1/t?at=3",
                                 "http://x/y"])
def test_bad_kafka_uris_are_usage_errors(bad, capsys):
    assert main(["replay", bad]) == 2
    assert "error" in capsys.readouterr().err


def test_confluent_backend_learns_the_same_state_and_replays(bootstrap, new_topic, tmp_path,
                                                               monkeypatch):
    """``STREAMBAYES_KAFKA_CLIENT=confluent`` runs the same loops with librdkafka, same result."""
    topic = new_topic(2)
    events = sms_events(2000)
    produce(bootstrap, topic, [(e["id"], encode(e)) for e in events])
    results = {}
    for client in ("kafka-python", "confluent"):
        settings = Settings(kafka_client=client)
        snaps = tmp_path / client
        stop = threading.Event()
        job = LearnJob(source=f"kafka://{bootstrap}/{topic}", snapshots=snaps, model="nb",
                       every=500, every_seconds=0.5)
        loop = Background(lambda job=job, s=settings, st=stop: run_learn(job, s, st))
        wait_until(lambda d=snaps: learned(d) == len(events), 60, f"the {client} learner")
        stop.set()
        loop.result()
        results[client] = newest_state(snaps)
    assert results["confluent"].positions == results["kafka-python"].positions
    assert_states_equal(canonical_state(results["confluent"].state),
                        canonical_state(results["kafka-python"].state))
    monkeypatch.setenv("STREAMBAYES_KAFKA_CLIENT", "confluent")
    report = tmp_path / "report"
    assert main(["replay", f"kafka://{bootstrap}/{topic}?to=300", "--model", "mnb",
                 "--report", str(report)]) == 0
    assert json.loads((report / "metrics.json").read_text())["events"] == 600  # 300 per partition
