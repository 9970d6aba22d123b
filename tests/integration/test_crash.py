"""Exactly-once state: ``kill -9`` the learner process three times while it consumes 30,000 events.

Events are produced at a steady pace while the learner runs, so every kill lands mid-stream; the
learner is restarted at once each time. Its final snapshot must equal, array for array, the
state of one uninterrupted learn of the same events from a file: nothing lost, nothing counted
twice.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

from streambayes.config import Settings
from streambayes.runtime import kafka_python
from streambayes.runtime.learn import LearnJob, run_learn
from streambayes.snapshot import SnapshotStore
from tests.integration.helpers import (
    Background,
    assert_states_equal,
    encode,
    sms_events,
    wait_until,
    write_jsonl,
)

N_EVENTS = 30_000
RATE = 3_000  # events/s offered while the learner runs


def _start_learner(bootstrap: str, topic: str, snaps, log) -> subprocess.Popen:
    command = [sys.executable, "-m", "streambayes", "learn", "--source",
               f"kafka://{bootstrap}/{topic}", "--snapshots", str(snaps), "--model", "nb",
               "--every", "2000", "--every-seconds", "0.5", "--batch-size", "500"]
    return subprocess.Popen(command, stdout=log, stderr=log, env={**os.environ, "PYTHONHASHSEED": "random"})


def _events_in(snaps) -> int:
    header = SnapshotStore(snaps).latest_header()
    return 0 if header is None else header["events"]


def test_kill_9_three_times_loses_and_doubles_nothing(bootstrap, new_topic, tmp_path):
    rng = random.Random(int(os.environ.get("CRASH_SEED", time.time_ns() % 10_000)))
    topic = new_topic(1)
    events = sms_events(N_EVENTS, prefix="c")
    snaps = tmp_path / "snaps"
    log = open(tmp_path / "learner.log", "ab")  # noqa: SIM115 (closed below)

    def pace() -> None:
        sink = kafka_python.KafkaSink(bootstrap)
        start = time.monotonic()
        for i in range(0, N_EVENTS, 500):
            for e in events[i:i + 500]:
                sink.send(topic, e["id"], encode(e))
            sink.flush()
            ahead = (i + 500) / RATE - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
        sink.close()

    proc = _start_learner(bootstrap, topic, snaps, log)
    producer = Background(pace)
    kills = []
    try:
        for _ in range(3):
            # a random moment while the learner is consuming (not before it has learned anything new)
            seen = _events_in(snaps)
            wait_until(lambda s=seen: _events_in(snaps) > s, 60, "progress before a kill")
            time.sleep(rng.uniform(0.0, 0.6))
            assert proc.poll() is None, f"learner exited early: see {tmp_path / 'learner.log'}"
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills.append(_events_in(snaps))
            proc = _start_learner(bootstrap, topic, snaps, log)
        producer.result(timeout=60)
        wait_until(lambda: _events_in(snaps) >= N_EVENTS, 120, "the learner to catch up")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    assert all(0 < k < N_EVENTS for k in kills), f"kills must land mid-stream: {kills}"

    crashed = SnapshotStore(snaps).latest()
    assert crashed.events == N_EVENTS
    assert crashed.positions == {topic: {"0": N_EVENTS}}
    reference = write_jsonl(tmp_path / "events.jsonl", events)
    ref_snaps = tmp_path / "reference"
    Background(lambda: run_learn(LearnJob(source=str(reference), snapshots=ref_snaps, model="nb"),
                                 Settings())).result(120)
    uninterrupted = SnapshotStore(ref_snaps).latest()
    assert uninterrupted.events == N_EVENTS
    assert_states_equal(crashed.state, uninterrupted.state)
