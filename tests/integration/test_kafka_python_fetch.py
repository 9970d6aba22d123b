"""kafka-python's fetch helper process (:mod:`streambayes.runtime.kafka.kafka_python_fetch`) on a
real broker: a seek drops what it read ahead, a helper that dies is started again at the
positions handed out, it ends with its learner, and ``learn --partitions`` through it learns the
same state as fetching in the learner's process. (The assigned-source behaviours it shares with
kafka-python and confluent run in ``test_backends.py``.)"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from streambayes.config import Settings
from streambayes.errors import BrokerError
from streambayes.runtime.kafka import kafka_python
from streambayes.runtime.kafka import kafka_python_fetch as kf
from streambayes.runtime.kafka.kafka_python_fetch import FetchedSource
from streambayes.runtime.loops.learn import LearnJob
from streambayes.runtime.loops.learn_run import run_learn
from streambayes.snapshot import SnapshotStore
from tests.integration.helpers import (
    Background,
    assert_states_equal,
    canonical_state,
    sms_events,
    wait_until,
)

NONE = SimpleNamespace(events=0)


def fill(bootstrap: str, topic: str, n: int) -> None:
    sink = kafka_python.KafkaSink(bootstrap)
    for i in range(n):
        sink.send(topic, None, {"i": i})
    sink.close()
    kafka_python.wait_for_records(bootstrap, topic, n)


def offsets(source, count: int, timeout: float = 20.0) -> list[int]:
    out: list[int] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        out += [r.offset for r in source.poll(min(300, count - len(out)), timeout=0.2)]
    return out


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie no one reaps counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def test_a_seek_drops_what_the_helper_read_ahead(bootstrap, new_topic):
    topic = new_topic(1)
    fill(bootstrap, topic, 3000)
    source = FetchedSource(bootstrap, topic, ahead=3, batch=200)
    try:
        assert offsets(source, 250) == list(range(250))
        time.sleep(0.5)  # the helper reads its batches ahead meanwhile
        source.seek({topic: {"0": 10}})
        assert offsets(source, 100) == list(range(10, 110))
        source.seek({topic: {"0": 2500}})
        assert offsets(source, 500) == list(range(2500, 3000))
        assert source.poll(100, timeout=0.5) == []
        assert source.positions() == {topic: {"0": 3000}}
        assert source.known_ends() == {0: 3000}
    finally:
        source.close()


def test_a_helper_that_dies_is_started_again_at_the_positions(bootstrap, new_topic, caplog):
    topic = new_topic(1)
    fill(bootstrap, topic, 3000)
    source = FetchedSource(bootstrap, topic, ahead=2, batch=200)
    try:
        first = offsets(source, 500)
        old = source._proc
        old.send_signal(signal.SIGKILL)
        with caplog.at_level(logging.WARNING, logger=kafka_python.__name__):
            rest = offsets(source, 2500)
        assert first + rest == list(range(3000))  # nothing lost, nothing twice, in order
        new = source._proc
        assert new is not None and new is not old and new.poll() is None
        assert "ended (exit -9); starting it again at the positions handed out" in caplog.text
    finally:
        source.close()
    assert new.returncode == 0


def test_close_ends_a_helper_blocked_sending_what_it_read_ahead(bootstrap, new_topic):
    """Its batches (2,000 records of 2 kB) are larger than the socket's buffer: it is blocked
    sending when the learner closes, and still ends at once, cleanly."""
    topic = new_topic(1)
    sink = kafka_python.KafkaSink(bootstrap)
    for i in range(12_000):
        sink.send(topic, None, {"i": i, "pad": "x" * 2000})
    sink.close()
    kafka_python.wait_for_records(bootstrap, topic, 12_000)
    source = FetchedSource(bootstrap, topic)
    assert offsets(source, 10) == list(range(10))
    time.sleep(1.0)  # it reads ahead until its send blocks
    helper = source._proc
    started = time.monotonic()
    source.close()
    assert time.monotonic() - started < 2.0
    assert helper.returncode == 0


def test_a_helper_that_cannot_start_or_fails_is_a_clear_error(bootstrap, new_topic, monkeypatch):
    topic = new_topic(1)
    fill(bootstrap, topic, 5)
    monkeypatch.setattr(kf, "helper_command",
                        lambda fd: [sys.executable, "-c", "import sys; sys.exit(3)"])
    with pytest.raises(BrokerError, match=r"ended \(exit 3\) before it connected.*"
                                          r"STREAMBAYES_KAFKA_FETCH_AHEAD=0"):
        FetchedSource(bootstrap, topic)
    fatal = ("import socket, sys\n"
             "from streambayes.runtime.kafka import kafka_python_fetch as k\n"
             "s = socket.socket(fileno=int(sys.argv[1]))\n"
             "k._recv(s)\n"
             "k._send(s, k._FATAL, k._json({'message': 'kafka-python refused the options: x'}))\n"
             "k._recv(s)\n")
    monkeypatch.setattr(kf, "helper_command", lambda fd: [sys.executable, "-c", fatal, str(fd)])
    with pytest.raises(BrokerError, match="refused the options: x"):
        FetchedSource(bootstrap, topic)


def test_the_helper_ends_with_its_learner(bootstrap, new_topic, tmp_path):
    """close() ends it; so does a learner's process killed outright (its socket closes)."""
    topic = new_topic(1)
    fill(bootstrap, topic, 10)
    source = FetchedSource(bootstrap, topic)
    assert len(offsets(source, 10)) == 10
    helper = source._proc
    source.close()
    assert helper.returncode == 0

    script = tmp_path / "learner.py"
    script.write_text(
        "import sys, time\n"
        "from streambayes.runtime.kafka.kafka_python_fetch import FetchedSource\n"
        f"s = FetchedSource({bootstrap!r}, {topic!r})\n"
        "while not s.poll(10, timeout=0.2):\n    pass\n"
        "print(s._proc.pid, flush=True)\n"
        "time.sleep(120)\n")
    learner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                               cwd=Path(__file__).parents[2])
    try:
        pid = int(learner.stdout.readline())
        assert not gone(pid)
        learner.send_signal(signal.SIGKILL)
        learner.wait(10)
        wait_until(lambda: gone(pid), 15, "the helper to end after its learner was killed")
    finally:
        learner.kill()
        learner.wait()


def test_learn_partitions_through_the_helper_learns_what_in_process_fetching_learns(
        bootstrap, new_topic, tmp_path, caplog):
    topic = new_topic(2)
    sink = kafka_python.KafkaSink(bootstrap)
    events = sms_events(3000)
    for i, event in enumerate(events):
        sink.send(topic, f"k{i % 7}", event)
    sink.close()
    kafka_python.wait_for_records(bootstrap, topic, len(events))
    states = {}
    for ahead in (4, 0):
        settings = Settings(kafka_client="kafka-python", kafka_fetch_ahead=ahead)
        snaps = tmp_path / f"ahead-{ahead}"
        job = LearnJob(source=f"kafka://{bootstrap}/{topic}", snapshots=snaps, model="nb",
                       every=1000, every_seconds=0.5, partitions=(0, 1), batch_size=250)
        stop = threading.Event()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=kafka_python.__name__):
            loop = Background(lambda job=job, settings=settings, stop=stop:
                              run_learn(job, settings, stop))
            wait_until(lambda snaps=snaps: (SnapshotStore(snaps).latest() or NONE).events
                       == len(events), 60, "the learner to learn every event")
            stop.set()
            assert loop.result().events == len(events)
        assert ("through a fetch helper process" in caplog.text) == (ahead > 0)
        learned = SnapshotStore(snaps).latest()
        assert sum(learned.positions[topic].values()) == len(events)
        states[ahead] = canonical_state(learned.state)
    # the same events; the two partitions interleave differently, so compare the counts
    assert_states_equal(states[4]["components"], states[0]["components"])
