"""A kafka-python predictor's group source refreshes its metadata every 5 s unless the user sets
another age: a leader that assigned before its topic's metadata arrived gives every member
nothing until a refresh shows the partitions (kafka-python's own default is 5 minutes)."""

from streambayes.runtime.kafka import kafka_python


class FakeConsumer:
    made: list = []

    def __init__(self, **config):
        FakeConsumer.made.append(config)

    def subscribe(self, topics, listener=None):
        pass


def test_the_predictor_group_source_refreshes_metadata_every_5_s(monkeypatch):
    FakeConsumer.made = []
    monkeypatch.setattr(kafka_python, "KafkaConsumer", FakeConsumer)
    kafka_python.GroupSource("b:9092", "events", group="g")
    kafka_python.GroupSource("b:9092", "events", group="g", options={"metadata_max_age_ms": 60000})
    assert [c["metadata_max_age_ms"] for c in FakeConsumer.made] == [5000, 60000]
