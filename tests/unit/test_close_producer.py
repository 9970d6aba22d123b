"""``bounded`` and ``close_producer``: librdkafka calls that can block for good get a time limit
(``Producer.close()`` itself flushes with no time limit)."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from streambayes.runtime.kafka import bounded
from streambayes.runtime.kafka.bounded import close_producer


def test_a_producer_with_an_undeliverable_message_closes_at_once():
    """The broker never answers: Producer.close() would wait out message.timeout.ms (300 s)."""
    producer = Producer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    producer.produce("t", b"never delivered")
    start = time.monotonic()
    assert close_producer(producer, 0.2)
    assert time.monotonic() - start < 4.0


class _Stuck:
    """A producer whose close never returns and whose flush leaves messages behind."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.release = threading.Event()

    def flush(self, timeout: float) -> int:
        self.calls.append(f"flush {timeout:g}")
        return 3

    def purge(self) -> None:
        self.calls.append("purge")

    def close(self) -> None:
        self.calls.append("close")
        self.release.wait(30)


def test_a_close_that_never_returns_is_left_behind(monkeypatch):
    monkeypatch.setattr(bounded, "CLOSE_SECONDS", 0.2)
    stuck = _Stuck()
    start = time.monotonic()
    assert not close_producer(stuck, 0.1)
    assert time.monotonic() - start < 2.0
    assert stuck.calls == ["flush 0.1", "purge", "flush 0", "close"]
    stuck.release.set()


def test_bounded_returns_raises_or_leaves_behind():
    from streambayes.runtime.kafka.bounded import bounded

    assert bounded(lambda: None, 1.0, "nothing")
    try:
        bounded(lambda: 1 / 0, 1.0, "a failure")
    except ZeroDivisionError:
        pass
    else:
        raise AssertionError("the call's own error is raised in the caller")
    gate = threading.Event()
    start = time.monotonic()
    assert not bounded(lambda: gate.wait(30), 0.2, "a stuck call")
    assert time.monotonic() - start < 2.0
    gate.set()
