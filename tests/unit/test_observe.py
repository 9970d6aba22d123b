"""The Observer: progress lines with counts, rate, lag and snapshot age; Prometheus metrics
served over HTTP from its own registry."""

import logging
import urllib.request

import pytest

from streambayes.runtime.observe import Observer, quiet_client_logs


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_progress_lines_come_every_interval_with_rate_lag_and_snapshot_age(caplog):
    clock = Clock()
    obs = Observer("learn", every=10.0, clock=clock)
    obs.records(1200)
    obs.events(1000)
    obs.dead_letter("undecodable", 2)
    clock.now += 5
    assert obs.tick() is None  # not yet
    obs.lag({("events", 0): 300, ("events", 1): 20})
    obs.snapshot("000007")
    clock.now += 5
    with caplog.at_level(logging.INFO, logger="streambayes.progress"):
        line = obs.tick()
    assert line == ("learn: 1,000 events from 1,200 records, 100 events/s, 2 dead letters, "
                    "lag 320 over 2 partitions, snapshot 000007 5 s old")
    assert line in caplog.text
    obs.events(50)
    clock.now += 1
    assert obs.tick(force=True).split(", ")[1] == "50 events/s"


def test_metrics_endpoint_serves_counters_gauges_and_the_latency_histogram():
    obs = Observer("predict", port=0, addr="127.0.0.1", every=1.0)
    try:
        obs.records(10)
        obs.events(9)
        obs.dead_letter("invalid_event")
        obs.latencies([0.003, 0.004, 0.2])
        obs.lag({("queries", 3): 42})
        obs.snapshot("000002", age_seconds=30)
        body = urllib.request.urlopen(f"http://127.0.0.1:{obs.port}/metrics", timeout=5).read().decode()
    finally:
        obs.close()
    expected = ['streambayes_events_total{role="predict"} 9.0',
                'streambayes_records_total{role="predict"} 10.0',
                'streambayes_dead_letters_total{reason="invalid_event",role="predict"} 1.0',
                'streambayes_lag{partition="3",role="predict",topic="queries"} 42.0',
                'streambayes_latency_seconds_bucket{le="0.005",role="predict"} 2.0',
                'streambayes_latency_seconds_count{role="predict"} 3.0',
                'streambayes_snapshot_age_seconds{role="predict"} 30.0',
                'streambayes_snapshots_total{role="predict"} 1.0']
    for line in expected:
        assert line in body, line


def test_two_observers_do_not_share_metrics_and_a_bad_interval_is_refused():
    a, b = Observer("learn"), Observer("learn")
    a.events(5)
    assert b.registry.get_sample_value("streambayes_events_total", {"role": "learn"}) is None
    assert a.registry.get_sample_value("streambayes_events_total", {"role": "learn"}) == 5
    with pytest.raises(ValueError, match="progress interval"):
        Observer("learn", every=0)


def test_client_logs_are_quieted_to_warnings():
    logging.getLogger("kafka").setLevel(logging.DEBUG)
    quiet_client_logs()
    assert logging.getLogger("kafka").level == logging.WARNING
    assert logging.getLogger("confluent_kafka").level == logging.WARNING


def test_the_learn_loop_reports_records_events_dead_letters_and_snapshots():
    from streambayes.models import make_model
    from streambayes.runtime.loops.learn import LearnLoop
    from streambayes.runtime.records.decode import Decoder
    from streambayes.runtime.records.sources import MemorySource
    from streambayes.snapshot.store import MemorySnapshotStore

    records = [b'{"text": "win cash", "label": "spam"}', b"{broken",
               b'{"text": "lunch", "label": "ham"}'] * 20
    obs = Observer("learn", every=1e9, lag_probe=lambda: {("in", 0): 7})
    loop = LearnLoop(MemorySource({"in": records}), Decoder("jsonl"), MemorySnapshotStore(),
                     lambda: make_model("nb"), None, every=25, observer=obs)
    stats = loop.run()
    assert (obs.records_total, obs.events_total, obs.dead_total) == (60, 40, 20)
    assert stats.events == 40 and sum(stats.dead_letters.values()) == 20
    value = obs.registry.get_sample_value
    assert value("streambayes_dead_letters_total", {"role": "learn", "reason": "bad_json"}) == 20
    assert value("streambayes_snapshots_total", {"role": "learn"}) == len(stats.snapshots) >= 2
    line = obs.tick(force=True)
    assert "40 events from 60 records" in line and "lag 7 over 1 partitions" in line
    assert f"snapshot {stats.snapshots[-1].id}" in line


def test_learn_on_the_command_line_logs_progress(tmp_path, caplog):
    from streambayes.cli import main

    path = tmp_path / "train.jsonl"
    path.write_text('{"text": "win cash", "label": "spam"}\n{"text": "lunch", "label": "ham"}\n' * 50)
    with caplog.at_level(logging.INFO, logger="streambayes.progress"):
        assert main(["learn", "--source", str(path), "--snapshots", str(tmp_path / "s"),
                     "--progress-seconds", "0.001"]) == 0
    assert "learn: 100 events from 100 records" in caplog.text
    assert main(["learn", "--source", str(path), "--snapshots", str(tmp_path / "s"),
                 "--progress-seconds", "0"]) == 2


def test_the_predict_loop_reports_posteriors_latency_dead_letters_and_the_snapshot(tmp_path):
    from streambayes.models import make_model
    from streambayes.runtime.loops.predict import ModelWatcher, PredictLoop
    from streambayes.runtime.records.decode import Decoder
    from streambayes.runtime.records.sinks import MemorySink
    from streambayes.runtime.records.sources import MemorySource
    from streambayes.snapshot.store import MemorySnapshotStore

    model = make_model("nb")
    model.learn_many(model.featurize([{"text": "win cash"}, {"text": "lunch"}]), ["spam", "ham"])
    store = MemorySnapshotStore()
    store.write(model.to_state(), model="nb", positions={}, events=2)
    records = [b'{"id": "a", "text": "win"}', b"{bad", b'{"id": "b", "text": "lunch"}']
    obs = Observer("predict", every=1e9)
    loop = PredictLoop(MemorySource({"q": records}), Decoder("jsonl", require_label=False),
                       ModelWatcher([store]), (MemorySink(), "out"), observer=obs)
    stats = loop.run()
    assert stats.posteriors == 2 and (obs.records_total, obs.events_total, obs.dead_total) == (3, 2, 1)
    value = obs.registry.get_sample_value
    assert value("streambayes_latency_seconds_count", {"role": "predict"}) == 2
    assert value("streambayes_snapshots_total", {"role": "predict"}) == 1
    assert "snapshot 000001" in obs.tick(force=True)


def test_a_partition_no_longer_read_leaves_the_lag_line_and_the_gauge():
    """A rebalance moved partition 1 to another member: its last figure is not shown for good."""
    from prometheus_client import generate_latest

    clock = Clock()
    obs = Observer("learn", every=1.0, clock=clock)
    obs.lag({("events", 0): 300, ("events", 1): 20})
    obs.lag({("events", 0): 250})
    clock.now += 1
    assert obs.tick().endswith("lag 250 over 1 partitions")
    metrics = generate_latest(obs.registry).decode()
    assert 'partition="0"' in metrics and 'partition="1"' not in metrics
    obs.lag({})  # holds nothing now
    clock.now += 1
    assert "lag" not in obs.tick()
