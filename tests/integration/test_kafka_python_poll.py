"""kafka-python 3's poll on a real broker: a fetch response that lands between the client's drain
of its buffer and its next fetch request must be handed out at once, not after a sleep of
``retry_backoff_ms`` (:func:`~streambayes.runtime.kafka.kafka_python.wake_on_landed_fetch`; the
predictor's 100 ms stalls of issue 13)."""

from __future__ import annotations

import time

from kafka import TopicPartition

from streambayes.runtime.kafka import kafka_python

BACKOFF_MS = 3000  # the client's sleep when it finds nothing in flight: long, to be seen


def landed_between_drain_and_send(bootstrap: str, topic: str, consumer) -> float:
    """Make the race happen in one poll and return how long that poll took to hand the records
    out: the records are produced after the poll drained its (empty) buffer, and its next fetch
    request is held until the fetch already in flight has brought them in."""
    fetcher = consumer._fetcher
    send = fetcher.send_fetches
    armed = [True]

    def send_fetches():  # noqa: ANN202
        if armed[0]:
            armed[0] = False
            sink = kafka_python.KafkaSink(bootstrap)
            for i in range(10):
                sink.send(topic, None, {"i": i})
            sink.close()
            deadline = time.monotonic() + 10
            while fetcher.in_flight_fetches() and time.monotonic() < deadline:
                time.sleep(0.005)  # the in-flight fetch returns with the records: buffered
            assert not fetcher.in_flight_fetches(), "the fetch in flight did not return"
        return send()

    deadline = time.monotonic() + 20
    while not fetcher.in_flight_fetches():  # the position is found, then a fetch waits there
        assert not consumer.poll(timeout_ms=50)
        assert time.monotonic() < deadline, "no fetch went out"
    fetcher.send_fetches = send_fetches
    start = time.monotonic()
    got: list = []
    while len(got) < 10 and time.monotonic() - start < 20:
        for messages in consumer.poll(timeout_ms=5000).values():
            got += messages
    assert [m.offset for m in got] == list(range(10))
    assert not armed[0]
    return time.monotonic() - start


def test_a_fetch_landing_between_drain_and_send_is_handed_out_at_once(bootstrap, new_topic):
    topic = new_topic()
    consumer = kafka_python.new_consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
        retry_backoff_ms=BACKOFF_MS, fetch_max_wait_ms=5000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        assert landed_between_drain_and_send(bootstrap, topic, consumer) < 1.0
    finally:
        consumer.close()


def test_without_the_wrapper_the_client_sleeps_with_the_records_in_hand(bootstrap, new_topic):
    """The race is real in the kafka-python installed: the same poll, on a consumer made without
    :func:`new_consumer`, sleeps ``retry_backoff_ms`` (when a kafka-python release fixes it, this
    fails and the wrapper can go)."""
    from kafka import KafkaConsumer

    topic = new_topic()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, retry_backoff_ms=BACKOFF_MS,
                             fetch_max_wait_ms=5000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        assert landed_between_drain_and_send(bootstrap, topic, consumer) >= BACKOFF_MS / 1000 * 0.9
    finally:
        consumer.close()


def test_every_kafka_python_source_is_made_by_new_consumer(bootstrap, new_topic):
    topic = new_topic()
    for source in (kafka_python.AssignedSource(bootstrap, topic),
                   kafka_python.GroupSource(bootstrap, topic, group=f"g-{topic}")):
        try:
            assert getattr(source._consumer._fetcher.fetch_records, "wakes_on_landed_fetch", False)
        finally:
            source.close()
