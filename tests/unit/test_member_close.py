"""Leaving the consumer group is best effort: the learner checkpointed before it closes, so a
client error while leaving (a revoke callback or a LeaveGroup after the broker went away) is
logged, and the learner still exits 0 (CI once saw exit 1 after broker restarts)."""

from __future__ import annotations

import logging

import pytest


class _Failing:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self.calls = 0

    def close(self, **kwargs) -> None:
        self.calls += 1
        raise self.exc


def test_kafka_python_member_close_logs_a_client_error(caplog):
    from kafka.errors import KafkaConnectionError

    from streambayes.runtime.kafka.member_kafka_python import MemberSource

    member = object.__new__(MemberSource)
    member.topic, member._consumer = "t", _Failing(KafkaConnectionError("111 ECONNREFUSED"))
    with caplog.at_level(logging.WARNING):
        member.close()
    assert member._consumer.calls == 1
    assert "closing the group member of t" in caplog.text and "ECONNREFUSED" in caplog.text


def test_confluent_member_close_logs_a_client_error(caplog):
    import confluent_kafka

    from streambayes.runtime.kafka.member_confluent import MemberSource

    member = object.__new__(MemberSource)
    error = confluent_kafka.KafkaException(confluent_kafka.KafkaError(confluent_kafka.KafkaError._TRANSPORT))
    member.topic, member._consumer = "t", _Failing(error)
    with caplog.at_level(logging.WARNING):
        member.close()
    assert member._consumer.calls == 1
    assert "closing the group member of t" in caplog.text


def test_a_programming_error_in_close_is_not_swallowed():
    from streambayes.runtime.kafka.member_kafka_python import MemberSource

    member = object.__new__(MemberSource)
    member.topic, member._consumer = "t", _Failing(AttributeError("bug"))
    with pytest.raises(AttributeError):
        member.close()
