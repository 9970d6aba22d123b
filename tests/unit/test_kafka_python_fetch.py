"""The fetch helper's wire format (no broker): records packed as arrays and unpacked exactly,
several partitions in one body, frames of any size over a socket pair, and a closed peer."""

from __future__ import annotations

import random
import socket
import threading
from types import SimpleNamespace

import pytest

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
