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
