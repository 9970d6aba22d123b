"""The local test broker itself: the same broker restarts on its port, stalls and resumes."""

from __future__ import annotations

import json
import signal
import uuid

from streambayes.runtime.kafka import kafka_python
from tests.integration.helpers import wait_until


def _send(address: str, topic: str, first: int, last: int) -> None:
    sink = kafka_python.KafkaSink(address)
    for n in range(first, last):
        sink.send(topic, None, {"i": n})
    sink.close()


def _numbers(address: str, topic: str, count: int) -> list[int]:
    return sorted(json.loads(r.value)["i"] for r in
                  kafka_python.wait_for_records(address, topic, count, timeout=60))


def test_the_same_broker_restarts_after_sigkill_on_its_port(own_broker):
    """Apache Kafka keeps what it acknowledged (log directory on disk); Tansu starts empty."""
    address, topic = own_broker.bootstrap, f"restart-{uuid.uuid4().hex[:8]}"
    assert kafka_python.create_topic(address, topic, 2)
    _send(address, topic, 0, 20)
    before = own_broker.process
    own_broker.restart(kill=True)
    assert before.returncode == -signal.SIGKILL
    assert own_broker.process.pid != before.pid and own_broker.bootstrap == address
    if own_broker.persistent:
        assert not kafka_python.create_topic(address, topic, 2)  # still there
        _send(address, topic, 20, 25)
        assert _numbers(address, topic, 25) == list(range(25))
    else:
        assert kafka_python.create_topic(address, topic, 2)  # memory storage: gone


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(") ", 1)[1][0]  # R running, S sleeping, T stopped, ...


def test_a_paused_broker_answers_again_after_resume(own_broker):
    address, topic = own_broker.bootstrap, f"stall-{uuid.uuid4().hex[:8]}"
    kafka_python.create_topic(address, topic, 1)
    own_broker.pause()
    try:
        wait_until(lambda: _state(own_broker.process.pid) == "T", 10, "the broker to stop")
    finally:
        own_broker.resume()
    _send(address, topic, 0, 5)
    assert _numbers(address, topic, 5) == list(range(5))
