"""A kafka-python predictor's group source refreshes its metadata every 5 s unless the user sets
another age (kafka-python's own default is 5 minutes); a member that holds no partition checks
that some member does, and joins again when twice in a row none does (no broker here: a fake
consumer and admin client)."""

import pytest

from streambayes.runtime.kafka import kafka_python


class FakeConsumer:
    made: list = []

    def __init__(self, **config):
        FakeConsumer.made.append(config)

    def subscribe(self, topics, listener=None):
        pass

    def partitions_for_topic(self, topic):
        return {0, 1}  # known at once: the source does not wait for the topic before joining


def test_the_predictor_group_source_refreshes_metadata_every_5_s(monkeypatch):
    FakeConsumer.made = []
    monkeypatch.setattr(kafka_python, "KafkaConsumer", FakeConsumer)
    kafka_python.GroupSource("b:9092", "events", group="g")
    kafka_python.GroupSource("b:9092", "events", group="g", options={"metadata_max_age_ms": 60000})
    assert [c["metadata_max_age_ms"] for c in FakeConsumer.made] == [5000, 60000]


class Member(FakeConsumer):
    """A group member that holds ``held`` partitions and counts the joins it is asked for."""

    def __init__(self, **config):
        super().__init__(**config)
        self.held: list = []
        self.joins = 0

    def poll(self, timeout_ms=0, max_records=None):
        return {}

    def assignment(self):
        return self.held

    def unsubscribe(self):
        self.joins += 1


class Admin:
    """Answers describe_topics/describe_groups from ``answers`` (an exception is raised)."""

    made = 0
    answers: dict = {}
    DEFAULT_CONFIG = kafka_python.KafkaAdminClient.DEFAULT_CONFIG

    def __init__(self, **config):
        Admin.made += 1
        if "fail" in Admin.answers:
            raise Admin.answers["fail"]
        self.config = config
        self.closed = False

    def describe_topics(self, topics):
        return [{"name": "events", "error_code": 0, "partitions": [{"partition_index": 0},
                                                            {"partition_index": 1}]}]

    def describe_groups(self, groups):
        answer = Admin.answers["group"]
        if isinstance(answer, Exception):
            raise answer
        return {"g": answer}

    def close(self):
        self.closed = True


def group(state="Stable", assignment=None):
    assignment = {"assigned_partitions": []} if assignment is None else assignment
    return {"group_state": state, "members": [{"member_assignment": assignment}]}


def source(monkeypatch, answer, **options):
    now = [0.0]
    Admin.made, Admin.answers = 0, {"group": answer}
    monkeypatch.setattr(kafka_python, "KafkaConsumer", Member)
    monkeypatch.setattr(kafka_python, "KafkaAdminClient", Admin)
    src = kafka_python.GroupSource("b:9092", "events", group="g",
                                   options={"request_timeout_ms": 60000, **options})
    src.clock = lambda: now[0]
    return src, now


def polls(src, now, seconds):
    for _ in range(int(seconds)):
        now[0] += 1.0
        src.poll()


def test_an_idle_member_joins_again_after_two_checks_that_find_nobody_holding_a_partition(
        monkeypatch, caplog):
    src, now = source(monkeypatch, group())
    polls(src, now, 9)
    assert src.checks == 1 and src._consumer.joins == 0  # once is not enough
    polls(src, now, 5)
    assert src.checks == 2 and src._consumer.joins == 1
    assert "gave no member any of the 2 partitions of events" in caplog.text
    assert src._admin.config["request_timeout_ms"] == 5000
    assert "metadata_max_age_ms" not in src._admin.config
    admin = src._admin
    src._consumer.close = lambda autocommit: None
    src.close()
    assert admin.closed


@pytest.mark.parametrize("answer", [
    group(assignment={"assigned_partitions": [{"topic": "events", "partitions": [0, 1]}]}),
    group(state="PreparingRebalance"),
    group(assignment=""),  # a broker that does not describe assignments (Tansu)
    {"error": "NOT_COORDINATOR", "group_state": "Stable", "members": []},
])
def test_a_member_stays_put_when_another_holds_a_partition_or_the_answer_is_unclear(
        monkeypatch, answer):
    src, now = source(monkeypatch, answer)
    polls(src, now, 30)
    assert src.checks >= 5 and src._consumer.joins == 0


def test_a_member_that_holds_a_partition_never_asks(monkeypatch):
    src, now = source(monkeypatch, group())
    src._consumer.held = ["events-0"]
    polls(src, now, 30)
    assert src.checks == 0 and Admin.made == 0


def test_a_static_member_is_not_checked_and_failures_never_end_the_run(monkeypatch, caplog):
    src, now = source(monkeypatch, group(), group_instance_id="p-1")
    polls(src, now, 30)
    assert src.checks == 0

    src, now = source(monkeypatch, RuntimeError("the admin's loop crashed"))
    polls(src, now, 30)  # logged, the admin made again at each check
    assert src.checks >= 5 and Admin.made == src.checks and src._consumer.joins == 0

    src, now = source(monkeypatch, group())
    Admin.answers["fail"] = OSError("no broker")
    polls(src, now, 30)
    assert src.checks == 1 and Admin.made == 1  # turned off after the first failure
    assert "cannot check the assignment of group g" in caplog.text


class _Fetcher:
    """kafka-python's fetcher as far as :func:`wake_on_landed_fetch` sees it."""

    def __init__(self, answers):
        self.answers = list(answers)
        self._completed_fetches: list = []

    def fetch_records(self, max_records=None, update_offsets=True, timeout_ms=None):
        records, idle, landed = self.answers.pop(0)
        self._completed_fetches = ["a fetch"] if landed else []
        return records, idle


def test_a_poll_that_finds_a_fetch_landed_meanwhile_is_not_idle():
    fetcher = _Fetcher([({}, True, True), ({}, True, False), ({"tp": [1]}, False, True),
                        ({}, False, False)])
    consumer = type("C", (), {"_fetcher": fetcher})()
    assert kafka_python.wake_on_landed_fetch(consumer)
    wrapped = consumer._fetcher.fetch_records
    assert wrapped(10, timeout_ms=5) == ({}, False)  # buffered: drain now, do not sleep
    assert wrapped(10) == ({}, True)  # truly nothing: kafka-python may sleep
    assert wrapped(10) == ({"tp": [1]}, False)
    assert wrapped(10) == ({}, False)


def test_a_client_without_those_parts_is_left_alone():
    consumer = type("C", (), {"_fetcher": object()})()
    assert not kafka_python.wake_on_landed_fetch(consumer)
    assert not kafka_python.wake_on_landed_fetch(object())


def test_a_fetcher_answering_otherwise_is_passed_through():
    """A later kafka-python whose fetch_records answers in another shape: returned as it is."""
    fetcher = _Fetcher([])
    fetcher.fetch_records = lambda *a, **k: {"tp": []}
    consumer = type("C", (), {"_fetcher": fetcher})()
    assert kafka_python.wake_on_landed_fetch(consumer)
    assert consumer._fetcher.fetch_records() == {"tp": []}
