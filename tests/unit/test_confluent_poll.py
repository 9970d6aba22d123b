"""confluent's ``_poll``: one ``consume`` made into records (errors logged, end-of-partition events
skipped, next offsets kept), without a broker: a stand-in consumer hands over stand-in messages."""

from __future__ import annotations

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_NOT_AVAILABLE, KafkaError

from streambayes.runtime.kafka.confluent import _ErrorLog, _poll
from streambayes.runtime.records.sources import Record
from streambayes.runtime.retry import Backoff


class Message:
    def __init__(self, partition, offset, value=b"v", key=None, ts=(TIMESTAMP_CREATE_TIME, 7),
                 error=None):
        self._p, self._o, self._v, self._k, self._ts, self._e = partition, offset, value, key, ts, error

    def error(self):
        return self._e

    def partition(self):
        return self._p

    def offset(self):
        return self._o

    def value(self):
        return self._v

    def key(self):
        return self._k

    def timestamp(self):
        return self._ts


class Consumer:
    def __init__(self, messages):
        self.messages = messages

    def consume(self, n, timeout):
        out, self.messages = self.messages[:n], self.messages[n:]
        return out


def test_poll_makes_the_records_a_named_tuple_makes_and_keeps_the_next_offsets():
    messages = [Message(0, 5, b'{"a":1}', b"k", (TIMESTAMP_CREATE_TIME, 1700000000000)),
                Message(1, 9, None, None, (TIMESTAMP_NOT_AVAILABLE, 0)),  # a tombstone: b""
                Message(0, 6, error=KafkaError(KafkaError._PARTITION_EOF)),  # skipped, not logged
                Message(0, 6, b"x")]
    errors, nexts = _ErrorLog("test"), {}
    got = _poll(Consumer(messages), 10, 0.0, "t", nexts, errors, Backoff())
    assert got == [Record(b'{"a":1}', b"k", "t", 0, 5, 1700000000000),
                   Record(b"", None, "t", 1, 9, None),
                   Record(b"x", None, "t", 0, 6, 7)]
    assert all(type(r) is Record for r in got)
    assert [(r.line, r.size) for r in got] == [(None, None)] * 3
    assert got[0]._replace(offset=1).offset == 1  # a full named tuple, every field in place
    assert nexts == {0: 7, 1: 10}
    assert errors.last == {}


def test_an_error_message_is_logged_and_the_good_records_around_it_kept():
    bad = Message(0, 0, error=KafkaError(KafkaError._TRANSPORT))
    errors, nexts = _ErrorLog("test"), {}
    got = _poll(Consumer([Message(2, 3), bad]), 10, 0.0, "t", nexts, errors, Backoff())
    assert [r.offset for r in got] == [3] and nexts == {2: 4}
    assert set(errors.last) == {KafkaError._TRANSPORT}
