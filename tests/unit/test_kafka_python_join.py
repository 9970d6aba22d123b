"""kafka-python group members ask for their topic's metadata before they join (a leader that
assigns before the metadata arrives gives every member nothing), and a predictor's group source
refreshes its metadata every 5 s; a metadata error there is logged and the join goes on."""

import logging

import pytest
from kafka.errors import KafkaTimeoutError

from streambayes.runtime.kafka import kafka_python, member_kafka_python


class FakeConsumer:
    calls: list = []
    fail = False

    def __init__(self, **config):
        self.config = config
        FakeConsumer.calls.append(("new", config))

    def partitions_for_topic(self, topic):
        FakeConsumer.calls.append(("metadata", topic))
        if FakeConsumer.fail:
            raise KafkaTimeoutError("no metadata")
        return {0, 1}

    def subscribe(self, topics, listener=None):
        FakeConsumer.calls.append(("subscribe", topics))


@pytest.fixture
def fake(monkeypatch):
    FakeConsumer.calls, FakeConsumer.fail = [], False
    monkeypatch.setattr(kafka_python, "KafkaConsumer", FakeConsumer)
    monkeypatch.setattr(member_kafka_python, "KafkaConsumer", FakeConsumer)
    return FakeConsumer


@pytest.mark.parametrize("make", [
    lambda: kafka_python.GroupSource("b:9092", "events", group="g"),
    lambda: member_kafka_python.MemberSource("b:9092", "events", group="g"),
])
def test_members_know_the_topic_before_they_join(fake, make):
    make()
    assert [c[0] for c in fake.calls] == ["new", "metadata", "subscribe"]
    assert fake.calls[1] == ("metadata", "events")
    assert fake.calls[0][1]["metadata_max_age_ms"] == 5000


def test_the_predictor_source_keeps_a_metadata_age_the_user_gives(fake):
    kafka_python.GroupSource("b:9092", "events", group="g", options={"metadata_max_age_ms": 60000})
    assert fake.calls[0][1]["metadata_max_age_ms"] == 60000


def test_a_metadata_error_before_the_join_is_logged_and_the_join_goes_on(fake, caplog):
    fake.fail = True
    with caplog.at_level(logging.WARNING):
        kafka_python.GroupSource("b:9092", "events", group="g")
    assert fake.calls[-1] == ("subscribe", ["events"])
    assert "metadata for events unavailable before joining the group" in caplog.text
