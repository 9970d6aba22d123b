"""``bounded`` and ``close_producer``: librdkafka calls that can block for good get a time limit
(``Producer.close()`` itself flushes with no time limit)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import Producer

from streambayes.runtime.kafka import bounded
from streambayes.runtime.kafka.bounded import bounded as limited
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
    assert limited(lambda: None, 1.0, "nothing")
    with pytest.raises(ZeroDivisionError):  # the call's own error, raised in the caller
        limited(lambda: 1 / 0, 1.0, "a failure")
    gate = threading.Event()
    start = time.monotonic()
    assert not limited(lambda: gate.wait(30), 0.2, "a stuck call")
    assert time.monotonic() - start < 2.0
    gate.set()


class _StuckConsumer:
    """A consumer whose synchronous commit never returns."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.closed = False

    def assignment(self) -> list:
        from confluent_kafka import TopicPartition

        return [TopicPartition("t", 0)]

    def commit(self, offsets: list, asynchronous: bool) -> None:
        self.gate.wait(30)

    def close(self) -> None:
        self.closed = True


def test_a_group_source_whose_commit_hangs_is_not_closed_under_it(monkeypatch):
    """The predictor's final commit is given up on after the time limit; the handle is then not
    destroyed while the commit still runs in its thread."""
    from streambayes.runtime.kafka import confluent

    monkeypatch.setattr(confluent, "_TIMEOUT", 0.2)
    source = confluent.GroupSource.__new__(confluent.GroupSource)
    source.topic, source.group, source._abandoned = "t", "g", False
    source._consumer = stuck = _StuckConsumer()
    source._deleted = SimpleNamespace(close=lambda: None)  # (its deleted-records watch)
    start = time.monotonic()
    source.commit({"t": {"0": 5}})
    assert time.monotonic() - start < 2.0 and source._abandoned
    source.close()
    assert not stuck.closed
    stuck.gate.set()


def test_a_call_thread_runs_calls_in_turn_and_is_stuck_for_good_after_a_hang():
    from streambayes.runtime.kafka.bounded import CallThread, Stuck

    calls = CallThread("test")
    assert calls(lambda: 41 + 1, 1.0, "a sum") == 42
    with pytest.raises(ZeroDivisionError):
        calls(lambda: 1 / 0, 1.0, "a failure")
    gate = threading.Event()
    with pytest.raises(Stuck, match="did not return within 0.2 s"):
        calls(lambda: gate.wait(30), 0.2, "a stuck call")
    assert calls.stuck
    start = time.monotonic()
    with pytest.raises(Stuck, match="never returned"):
        calls(lambda: 1, 5.0, "the next call")
    assert time.monotonic() - start < 1.0
    gate.set()
    calls.close()
