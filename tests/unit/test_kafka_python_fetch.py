"""The fetch helper's wire format (no broker): records packed as arrays and unpacked exactly,
several partitions in one body, frames of any size over a socket pair, and a closed peer."""

from __future__ import annotations

import random
import socket
import threading
from types import SimpleNamespace

import pytest
from kafka.structs import TopicPartition

from streambayes.errors import UsageError
from streambayes.runtime.kafka import kafka_python_fetch as kf
from streambayes.runtime.records.sources import Record


def messages(rng: random.Random, n: int, first: int) -> list[SimpleNamespace]:
    out = []
    for i in range(n):
        value = rng.choice([None, b"", b"x" * rng.randrange(1, 300), rng.randbytes(70_000)])
        key = rng.choice([None, b"", f"k{i}".encode(), rng.randbytes(5)])
        stamp = rng.choice([None, 0, 1_700_000_000_000 + i])
        out.append(SimpleNamespace(offset=first + i, timestamp=stamp, key=key, value=value))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_partitions_packed_into_one_body_come_back_exactly(seed):
    rng = random.Random(seed)
    parts = {p: messages(rng, rng.randrange(1, 40), rng.randrange(10**9)) for p in range(3)}
    if seed == 0:
        parts[1] = [SimpleNamespace(offset=5, timestamp=1, key=None, value=b"v")]  # no key at all
    heads, bodies = zip(*(kf.pack(p, ms) for p, ms in parts.items()), strict=True)
    body = b"".join(bodies)
    got: list[Record] = []
    start = 0
    for head in heads:
        records, start = kf.unpack(head, body, "topic", start)
        got += records
    assert start == len(body)
    expected = [Record(m.value if m.value is not None else b"", m.key, "topic", p, m.offset,
                       m.timestamp) for p, ms in parts.items() for m in ms]
    assert got == expected


def test_frames_of_any_size_cross_a_socket_pair_and_a_closed_peer_reads_as_none():
    a, b = socket.socketpair()
    big = bytes(range(256)) * 20_000  # 5 MB: larger than the socket buffers
    sender = threading.Thread(target=lambda: (kf._send(a, b"R", big), kf._send(a, b""),
                                              kf._send(a, kf._json({"op": "stop"}))))
    sender.start()
    assert kf._recv(b) == b"R" + big
    assert kf._recv(b) == b""
    assert kf._recv(b) == b'{"op":"stop"}'
    sender.join()
    assert not kf._readable(b, 0.0)
    a.close()
    assert kf._readable(b, 0.0)  # the end of the stream is readable
    assert kf._recv(b) is None
    b.close()


def test_reading_ahead_needs_at_least_one_batch_of_one_record():
    with pytest.raises(UsageError):
        kf.FetchedSource("127.0.0.1:1", "t", ahead=0)
    with pytest.raises(UsageError):
        kf.FetchedSource("127.0.0.1:1", "t", batch=0)


def test_timestamps_of_minus_one_and_none_stay_apart():
    head, body = kf.pack(0, [SimpleNamespace(offset=0, timestamp=-1, key=None, value=b"a"),
                             SimpleNamespace(offset=1, timestamp=None, key=None, value=b"b")])
    records, _ = kf.unpack(head, body, "t")
    assert [r.timestamp for r in records] == [-1, None]


# -- the helper's loop, driven over a socket pair with a fake consumer (no broker) ----------------
class FakeConsumer:
    """Serves records of one partition, ``per_poll`` at a time; the first ``refusals`` makes fail
    as if no broker answered."""

    refusals = 0
    made: list[FakeConsumer] = []

    def __init__(self, **options) -> None:
        if FakeConsumer.refusals > 0:
            FakeConsumer.refusals -= 1
            from kafka.errors import KafkaTimeoutError

            raise KafkaTimeoutError("Unable to bootstrap from 127.0.0.1:1")
        self.options = options
        self.position: dict[int, int] = {}
        self.closed = False
        self.polls = 0
        FakeConsumer.made.append(self)

    def assign(self, tps) -> None:
        self.position = {tp.partition: 0 for tp in tps}

    def seek_to_beginning(self, tp) -> None:
        self.position[tp.partition] = 0

    def seek(self, tp, offset) -> None:
        self.position[tp.partition] = offset

    def poll(self, timeout_ms: int, max_records: int):
        self.polls += 1
        out = {}
        for p, at in self.position.items():
            out[TopicPartition("t", p)] = [
                SimpleNamespace(offset=o, timestamp=o, key=None, value=b"v%d" % o)
                for o in range(at, at + min(max_records, 10))]
            self.position[p] = at + min(max_records, 10)
        return out

    def assignment(self):
        return [SimpleNamespace(partition=p) for p in self.position]

    def highwater(self, tp):
        return 10**6

    def close(self, autocommit: bool = True) -> None:
        self.closed = True


@pytest.fixture
def helper():
    """(learner's socket, helper thread running ``_helper`` with the fake consumer)."""
    FakeConsumer.made.clear()
    mine, theirs = socket.socketpair()
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(kf._helper(theirs, FakeConsumer)),
                              daemon=True)
    kf._send(mine, kf._json({"topic": "t", "batch": 10, "options": {"x": 1}}))
    thread.start()
    yield mine, thread, result
    mine.close()
    thread.join(5)
    theirs.close()


def frames(sock: socket.socket, wait: float = 0.3) -> list[bytes]:
    """Every frame that arrives within ``wait`` s of the previous one (at most 20)."""
    out: list[bytes] = []
    while len(out) < 20 and kf._readable(sock, wait):
        frame = kf._recv(sock)
        if frame is None:
            break
        out.append(frame)
    return out


def batches(found: list[bytes]) -> list[tuple[int, list[int]]]:
    """(generation, offsets) of each records frame."""
    out = []
    for frame in found:
        if frame[:1] != kf._RECORDS:
            continue
        size = kf._LENGTH.unpack(frame[1:5])[0]
        header = kf.json.loads(frame[5:5 + size])
        records, _ = kf.unpack(header["parts"][0], frame, "t", 5 + size)
        out.append((header["generation"], [r.offset for r in records]))
    return out


def test_the_helper_sends_no_more_batches_than_its_credits_and_tags_each_generation(helper):
    sock, thread, result = helper
    assert frames(sock) == [kf._READY]
    kf._send(sock, kf._json({"op": "assign", "generation": 1, "starts": {"0": None}}))
    assert frames(sock) == []  # no credit: nothing read
    kf._send(sock, kf._json({"op": "credit", "n": 2}))
    assert batches(frames(sock)) == [(1, list(range(10))), (1, list(range(10, 20)))]
    kf._send(sock, kf._json({"op": "credit", "n": 1}))
    assert batches(frames(sock)) == [(1, list(range(20, 30)))]
    kf._send(sock, kf._json({"op": "assign", "generation": 2, "starts": {"0": 5}}))
    kf._send(sock, kf._json({"op": "credit", "n": 1}))
    assert batches(frames(sock)) == [(2, list(range(5, 15)))]
    kf._send(sock, kf._json({"op": "stop"}))
    thread.join(5)
    assert result == [0] and FakeConsumer.made[0].closed
    assert FakeConsumer.made[0].options == {"x": 1}


def test_a_helper_waiting_for_a_broker_keeps_the_learners_commands():
    FakeConsumer.made.clear()
    mine, theirs = socket.socketpair()
    FakeConsumer.refusals = 3  # delays 0.1 + 0.2 + 0.4 s
    done: list[int] = []
    waiting = threading.Thread(target=lambda: done.append(kf._helper(theirs, FakeConsumer)))
    kf._send(mine, kf._json({"topic": "t", "batch": 10, "options": {}}))
    waiting.start()
    kf._send(mine, kf._json({"op": "assign", "generation": 7, "starts": {"0": 100}}))
    kf._send(mine, kf._json({"op": "credit", "n": 1}))
    found = frames(mine, wait=2.0)
    logs = [f for f in found if f[:1] == kf._LOG]
    assert len(logs) == 3 and b"connect failed" in logs[0]
    assert kf._READY in found
    assert batches(found) == [(7, list(range(100, 110)))]  # the assignment made while it waited
    mine.close()  # the learner is gone: the helper ends
    waiting.join(5)
    assert done == [0]
    theirs.close()


def test_a_helper_told_to_stop_while_it_waits_for_a_broker_ends_at_once():
    mine, theirs = socket.socketpair()
    FakeConsumer.refusals = 100
    done: list[int] = []
    waiting = threading.Thread(target=lambda: done.append(kf._helper(theirs, FakeConsumer)))
    kf._send(mine, kf._json({"topic": "t", "batch": 10, "options": {}}))
    waiting.start()
    frames(mine, wait=0.5)
    kf._send(mine, kf._json({"op": "stop"}))
    waiting.join(2)
    assert done == [0]
    FakeConsumer.refusals = 0
    mine.close()
    theirs.close()


def test_a_group_member_asks_for_the_topics_partitions_before_it_joins():
    import threading
    import time

    from streambayes.runtime.kafka.kafka_python import _await_topic

    class Consumer:
        def __init__(self, answers):
            self.answers, self.asked = list(answers), 0

        def partitions_for_topic(self, topic):
            self.asked += 1
            answer = self.answers.pop(0) if self.answers else set()
            if isinstance(answer, Exception):
                raise answer
            return answer

    known = Consumer([set(), RuntimeError("no broker answer"), {0, 1}])
    _await_topic(known, "t", threading.Event(), seconds=5)
    assert known.asked == 3  # until the partitions were known, a failure in between
    unknown, start = Consumer([]), time.monotonic()
    _await_topic(unknown, "t", threading.Event(), seconds=0.6)
    assert 0.5 < time.monotonic() - start < 3 and unknown.asked >= 2  # then joins all the same
    stop = threading.Event()
    stop.set()
    stopped = Consumer([])
    _await_topic(stopped, "t", stop, seconds=60)
    assert stopped.asked == 0
