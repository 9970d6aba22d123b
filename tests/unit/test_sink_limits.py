"""Dead-letter sinks at their limits (issue 10, item 2): truncation to fit, errors that cannot
succeed raised at once, retriable ones bounded by a deadline (a fake clock, no timed asserts),
and a learner that cannot deliver its dead letters stopping with status 1. Fake producers stand
in for both Kafka clients: no broker here."""

from __future__ import annotations

import base64
import hashlib
import json
import threading

import pytest
from confluent_kafka import KafkaError as CKError
from confluent_kafka import KafkaException
from kafka.errors import KafkaTimeoutError, MessageSizeTooLargeError, TopicAuthorizationFailedError

from streambayes.cli import main
from streambayes.errors import BrokerError, NetworkUnavailable
from streambayes.models import make_model
from streambayes.runtime.kafka import confluent as kafka_confluent
from streambayes.runtime.kafka import confluent_sink as confluent_sink_module
from streambayes.runtime.kafka import connect, kafka_python, kafka_python_sink
from streambayes.runtime.loops.learn import LearnLoop
from streambayes.runtime.records.decode import Decoder, dead_letter
from streambayes.runtime.records.events import DeadLetter
from streambayes.runtime.records.sinks import FileSink, MessageTooLarge, truncate_dead_letter
from streambayes.runtime.records.sources import MemorySource, Record
from streambayes.snapshot.store import MemorySnapshotStore


def letter(raw: bytes, line: int | None = 9) -> DeadLetter:
    return dead_letter(Record(raw, None, "in", 2, 41, line=line), "bad_json", "Expecting value")


def check_truncated(data: bytes, raw: bytes, limit: int) -> dict:
    """The dead letter in ``data`` fits, keeps its fields, and describes ``raw`` exactly."""
    assert len(data) <= limit
    doc = json.loads(data)
    assert doc["truncated"] is True
    assert doc["reason"] == "bad_json" and doc["error"] == "Expecting value"
    assert doc["source"] == {"topic": "in", "partition": 2, "offset": 41}
    assert doc["payload_bytes"] == len(raw)
    assert doc["payload_sha256"] == hashlib.sha256(raw).hexdigest()
    head = (base64.b64decode(doc["payload"]) if doc["payload_encoding"] == "base64"
            else doc["payload"].encode("utf-8"))
    assert raw.startswith(head) and len(head) > limit // 3
    return doc


# -- truncation ------------------------------------------------------------------------------
@pytest.mark.parametrize("raw", [
    b'{"text": "' + b"x" * 30_000,  # plain text
    "{\"t\": \"\u00e9\u20ac\x01\"\n".encode() * 3000,  # multi-byte and escaped characters
    bytes(range(256)) * 100,  # not UTF-8: base64 (a third larger than the record)
])
def test_a_dead_letter_over_the_line_limit_is_truncated_with_size_and_checksum(tmp_path, raw):
    path = tmp_path / "dlq.jsonl"
    with FileSink(path, max_line_bytes=4096) as sink:
        sink.send("dlq", None, letter(raw))
    (line,) = path.read_bytes().splitlines()
    doc = check_truncated(line, raw, 4096)
    assert doc["line"] == 9


def test_a_dead_letter_that_fits_is_written_unchanged(tmp_path):
    small = letter(b"{oops")
    path = tmp_path / "dlq.jsonl"
    with FileSink(path, max_line_bytes=4096) as sink:
        sink.send("dlq", None, small)
    assert json.loads(path.read_bytes()) == json.loads(small.model_dump_json())
    assert "truncated" not in json.loads(path.read_bytes())


def test_a_truncated_letter_truncated_again_keeps_the_original_size_and_hash():
    raw = b"y" * 50_000
    once = DeadLetter.model_validate_json(truncate_dead_letter(letter(raw), 20_000))
    twice = truncate_dead_letter(once, 5_000)
    check_truncated(twice, raw, 5_000)


def test_a_posterior_over_the_line_limit_is_refused_not_truncated(tmp_path):
    with FileSink(tmp_path / "out.jsonl", max_line_bytes=1024) as sink, \
            pytest.raises(MessageTooLarge, match="over the 1024 bytes"):
        sink.send("out", None, {"id": "x" * 5000, "posterior": {"a": 1.0}})
    assert not (tmp_path / "out.jsonl").exists()


# -- kafka-python ----------------------------------------------------------------------------
class FakeFuture:
    def __init__(self, error: BaseException | None) -> None:
        self.is_done = True
        self.exception = error

    def succeeded(self) -> bool:
        return self.exception is None


class FakeKafkaProducer:
    """kafka-python's producer: refuses at ``send`` over max_request_size (as the real one
    does), and answers each message with ``answer(value)`` (None: acknowledged)."""

    DEFAULT_CONFIG = {"max_request_size": 1_048_576}
    answer = staticmethod(lambda value: None)

    def __init__(self, **config) -> None:
        self.config = config
        self.sent: list[bytes] = []
        self.delivered: list[bytes] = []

    def send(self, topic, key=None, value=b""):
        if len(value) > self.config.get("max_request_size", 1_048_576):
            raise MessageSizeTooLargeError(f"{len(value)} bytes")
        self.sent.append(value)
        error = self.answer(value)
        if error is None:
            self.delivered.append(value)
        return FakeFuture(error)

    def flush(self, timeout=None) -> None:
        pass

    def close(self, timeout=None) -> None:
        pass


class Clock:
    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def python_sink(monkeypatch, answer, **kwargs) -> kafka_python.KafkaSink:
    monkeypatch.setattr(FakeKafkaProducer, "answer", staticmethod(answer))
    monkeypatch.setattr(kafka_python_sink, "KafkaProducer", FakeKafkaProducer)
    return kafka_python.KafkaSink("fake:9092", backoff=(0.0, 0.0), **kwargs)


def test_kafka_python_truncates_to_the_producer_limit(monkeypatch):
    sink = python_sink(monkeypatch, lambda value: None)
    raw = b'{"a": "' + b"z" * 1_500_000
    sink.send("dlq", None, letter(raw))
    sink.flush()
    (data,) = sink._producer.delivered
    check_truncated(data, raw, 1_048_576 - 512)


def test_kafka_python_halves_a_dead_letter_the_broker_refuses_once(monkeypatch):
    broker_limit = 600_000
    sink = python_sink(monkeypatch, lambda value: MessageSizeTooLargeError()
                       if len(value) > broker_limit else None)
    raw = bytes(range(256)) * 3200  # 800 KB, not UTF-8: its base64 letter passes 1 MB
    sink.send("dlq", None, letter(raw))
    sink.flush()
    (data,) = sink._producer.delivered
    check_truncated(data, raw, broker_limit)
    assert len(sink._producer.sent) == 2


def test_kafka_python_gives_up_when_the_halved_letter_is_refused_too(monkeypatch):
    sink = python_sink(monkeypatch, lambda value: MessageSizeTooLargeError()
                       if len(value) > 100_000 else None)
    sink.send("dlq", None, letter(b"q" * 2_000_000))
    with pytest.raises(BrokerError, match="not retried"):
        sink.flush()
    assert len(sink._producer.sent) == 2


def test_kafka_python_never_retries_an_authorization_error(monkeypatch):
    sink = python_sink(monkeypatch, lambda value: TopicAuthorizationFailedError())
    sink.send("dlq", None, letter(b"{oops"))
    with pytest.raises(BrokerError, match="TOPIC_AUTHORIZATION_FAILED|not retried"):
        sink.flush()
    assert len(sink._producer.sent) == 1


def test_kafka_python_retries_a_timeout_until_the_deadline(monkeypatch):
    clock = Clock(step=7.0)
    sink = python_sink(monkeypatch, lambda value: KafkaTimeoutError(), deadline=120.0,
                       clock=clock)
    sink.send("dlq", None, letter(b"{oops"))
    with pytest.raises(BrokerError, match="kept failing"):
        sink.flush()
    assert 3 <= len(sink._producer.sent) <= 120 / 7 + 2  # retried, and only until the deadline


def test_kafka_python_refuses_a_posterior_over_the_limit(monkeypatch):
    sink = python_sink(monkeypatch, lambda value: None)
    with pytest.raises(MessageTooLarge):
        sink.send("out", "k", {"id": "x" * 2_000_000})
    assert sink._producer.sent == []


# -- confluent-kafka -------------------------------------------------------------------------
class FakeMessage:
    def __init__(self, topic: str, key, value: bytes) -> None:
        self._t, self._k, self._v = topic, key, value

    def topic(self):
        return self._t

    def key(self):
        return self._k

    def value(self):
        return self._v


class FakeProducer:
    """librdkafka's producer: delivery reports served by poll/flush; ``answer(value)`` gives
    the error code of each delivery (None: acknowledged)."""

    answer = staticmethod(lambda value: None)
    sent: list[bytes] = []
    delivered: list[bytes] = []

    def __init__(self, config) -> None:
        self.config = config
        self.queue: list[tuple] = []

    def produce(self, topic, value, key=None, on_delivery=None):
        if len(value) > self.config.get("message.max.bytes", 1_000_000):
            raise KafkaException(CKError(CKError.MSG_SIZE_TOO_LARGE))
        FakeProducer.sent.append(value)
        self.queue.append((topic, key, value, on_delivery))

    def poll(self, timeout=0):
        queue, self.queue = self.queue, []
        for topic, key, value, callback in queue:
            code = self.answer(value)
            if code is None:
                FakeProducer.delivered.append(value)
            callback(None if code is None else CKError(code), FakeMessage(topic, key, value))
        return len(queue)

    def flush(self, timeout=None):
        self.poll()
        return 0

    def purge(self):
        self.poll()


def confluent_sink(monkeypatch, answer, **kwargs) -> kafka_confluent.KafkaSink:
    monkeypatch.setattr(FakeProducer, "answer", staticmethod(answer))
    monkeypatch.setattr(FakeProducer, "sent", [])
    monkeypatch.setattr(FakeProducer, "delivered", [])
    monkeypatch.setattr(confluent_sink_module, "Producer", FakeProducer)
    return kafka_confluent.KafkaSink("fake:9092", backoff=(0.0, 0.0), **kwargs)


def test_confluent_truncates_to_message_max_bytes(monkeypatch):
    sink = confluent_sink(monkeypatch, lambda value: None)
    raw = b'{"a": "' + b"z" * 1_500_000
    sink.send("dlq", None, letter(raw))
    sink.flush()
    (data,) = FakeProducer.delivered
    check_truncated(data, raw, 1_000_000 - 512)


def test_confluent_halves_a_dead_letter_the_broker_refuses_once(monkeypatch):
    sink = confluent_sink(monkeypatch, lambda value: CKError.MSG_SIZE_TOO_LARGE
                          if len(value) > 600_000 else None)
    raw = bytes(range(256)) * 3200
    sink.send("dlq", None, letter(raw))
    sink.flush()
    (data,) = FakeProducer.delivered
    check_truncated(data, raw, 600_000)
    assert len(FakeProducer.sent) == 2


def test_confluent_never_retries_an_authorization_error(monkeypatch):
    sink = confluent_sink(monkeypatch, lambda value: CKError.TOPIC_AUTHORIZATION_FAILED)
    sink.send("dlq", None, letter(b"{oops"))
    with pytest.raises(BrokerError, match="not retried"):
        sink.flush()
    assert len(FakeProducer.sent) == 1


def test_confluent_retries_a_timeout_until_the_deadline(monkeypatch):
    clock = Clock(step=7.0)
    sink = confluent_sink(monkeypatch, lambda value: CKError._MSG_TIMED_OUT, deadline=120.0,
                          clock=clock)
    sink.send("dlq", None, letter(b"{oops"))
    with pytest.raises(BrokerError, match="kept failing"):
        sink.flush()
    assert 3 <= len(FakeProducer.sent) <= 120 / 7 + 2


# -- the learner ----------------------------------------------------------------------------
class FailingSink:
    """A dead-letter sink that cannot deliver: ``flush`` raises ``error`` (after ``before()``)."""

    def __init__(self, error: BrokerError, before=lambda: None) -> None:
        self.error, self.before, self.sent = error, before, 0

    def send(self, topic, key, value) -> None:
        self.sent += 1

    def flush(self) -> None:
        self.before()
        raise self.error

    def close(self) -> None:
        pass


RECORDS = [b'{"id": "a", "label": "spam", "text": "win cash"}', b"{oops",
           b'{"id": "b", "label": "ham", "text": "see you"}']


def learn_loop(sink, stop=None) -> tuple[LearnLoop, MemorySnapshotStore]:
    store = MemorySnapshotStore()
    loop = LearnLoop(MemorySource({"in": list(RECORDS)}), Decoder("jsonl"), store,
                     lambda: make_model("nb"), "nb", dead_letters=(sink, "dlq"), stop=stop)
    return loop, store


def test_a_learner_whose_dead_letters_fail_raises_and_writes_no_snapshot():
    loop, store = learn_loop(FailingSink(BrokerError("cannot deliver: MESSAGE_SIZE_TOO_LARGE")))
    with pytest.raises(BrokerError, match="the 3 records read since the beginning are not saved"):
        loop.run()
    assert store.ids() == []


def test_a_stop_during_a_stuck_flush_is_a_failure_not_nothing_to_save():
    """SIGTERM while the sink waits: the 'stopped while waiting' error must not pass as quiet."""
    stop = threading.Event()
    loop, store = learn_loop(FailingSink(NetworkUnavailable("send: stopped while retrying"),
                                         before=stop.set), stop=stop)
    with pytest.raises(BrokerError) as caught:
        loop.run()
    assert not isinstance(caught.value, NetworkUnavailable)
    assert "restart learns them again" in str(caught.value)


def test_learn_exits_1_with_one_line_when_dead_letters_cannot_be_delivered(monkeypatch, tmp_path,
                                                                          capsys):
    class Refusing(FailingSink):
        def __init__(self, bootstrap, **kwargs) -> None:
            super().__init__(BrokerError("cannot deliver to dlq: TOPIC_AUTHORIZATION_FAILED"))

    monkeypatch.setenv("STREAMBAYES_KAFKA_CLIENT", "kafka-python")  # the client patched here
    monkeypatch.setattr(kafka_python, "KafkaSink", Refusing)
    monkeypatch.setattr(connect, "wait_for_broker", lambda *args: None)  # nothing listens on :9
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(RECORDS) + b"\n")
    status = main(["learn", "--source", str(source), "--snapshots", str(tmp_path / "snaps"),
                   "--dead-letter", "kafka://127.0.0.1:9/dlq"])
    err = capsys.readouterr().err.strip()
    assert status == 1
    assert len(err.splitlines()) == 1 and "not saved" in err and "exactly once" in err
    snaps = tmp_path / "snaps"
    assert not snaps.exists() or not any(snaps.iterdir())


def test_predict_turns_a_posterior_over_the_line_limit_into_a_dead_letter(monkeypatch, tmp_path,
                                                                          capsys):
    train = tmp_path / "train.jsonl"
    train.write_bytes(b"\n".join(RECORDS) + b"\n")
    assert main(["learn", "--source", str(train), "--snapshots", str(tmp_path / "s")]) == 0
    events = tmp_path / "events.jsonl"
    # an id under the record limits (1,000 characters) whose posterior passes a 1 KiB line
    events.write_text('{"id": "ok", "text": "win cash"}\n{"id": "' + "i" * 990 + '", "text": "x"}\n')
    monkeypatch.setenv("STREAMBAYES_SINK_MAX_LINE_BYTES", "1024")
    status = main(["predict", "--source", str(events), "--sink", str(tmp_path / "out.jsonl"),
                   "--snapshots", str(tmp_path / "s"), "--dead-letter", str(tmp_path / "dlq.jsonl")])
    assert status == 0, capsys.readouterr().err
    (posterior,) = (tmp_path / "out.jsonl").read_text().splitlines()
    assert json.loads(posterior)["id"] == "ok"
    (dead,) = (tmp_path / "dlq.jsonl").read_bytes().splitlines()
    doc = json.loads(dead)
    assert doc["source"]["offset"] == 1 and "posterior not sent" in doc["error"]
    assert doc["truncated"] is True and len(dead) <= 1024
    assert "published 1 posteriors" in capsys.readouterr().out
