"""Kafka client options split by role, and the group timeouts (issue 10, item 7): no broker."""

from __future__ import annotations

import pytest

from streambayes.cli import main
from streambayes.config import Settings
from streambayes.errors import UsageError
from streambayes.runtime.kafka import confluent as kafka_confluent
from streambayes.runtime.kafka import connect, kafka_python
from streambayes.runtime.kafka.options import split


@pytest.mark.parametrize("client, shared, role, expected", [
    ("kafka-python", {"session_timeout_ms": 6000, "client_id": "c"}, "consumer",
     {"session_timeout_ms": 6000, "client_id": "c"}),
    ("kafka-python", {"session_timeout_ms": 6000, "client_id": "c"}, "producer", {"client_id": "c"}),
    ("kafka-python", {"linger_ms": 5, "client_id": "c"}, "consumer", {"client_id": "c"}),
    ("kafka-python", {"linger_ms": 5, "session_timeout_ms": 1}, "admin", {}),
    ("confluent", {"session.timeout.ms": 6000, "client.id": "c"}, "producer", {"client.id": "c"}),
    ("confluent", {"linger.ms": 5, "client.id": "c"}, "consumer", {"client.id": "c"}),
    ("confluent", {"linger.ms": 5, "group.id": "g", "socket.timeout.ms": 9}, "admin",
     {"socket.timeout.ms": 9}),
])
def test_shared_options_reach_only_the_clients_that_know_them(client, shared, role, expected):
    assert split(client, shared, {}, role) == expected


def test_role_options_are_added_and_checked():
    assert split("kafka-python", {"client_id": "c"}, {"linger_ms": 7}, "producer") == \
        {"client_id": "c", "linger_ms": 7}
    with pytest.raises(UsageError, match="STREAMBAYES_KAFKA_PRODUCER_OPTIONS: 'session_timeout_ms'"):
        split("kafka-python", {}, {"session_timeout_ms": 6000}, "producer")
    with pytest.raises(UsageError, match="'bogus_option' is not an option of any"):
        split("kafka-python", {"bogus_option": 1}, {}, "consumer")


def test_the_default_client_is_confluent(monkeypatch):
    monkeypatch.delenv("STREAMBAYES_KAFKA_CLIENT", raising=False)
    assert Settings().kafka_client == "confluent"
    assert connect.backend(Settings()) is kafka_confluent


def test_settings_read_the_role_options_from_the_environment(monkeypatch):
    monkeypatch.setenv("STREAMBAYES_KAFKA_CLIENT", "kafka-python")
    monkeypatch.setenv("STREAMBAYES_KAFKA_OPTIONS", '{"session_timeout_ms": 6000}')
    monkeypatch.setenv("STREAMBAYES_KAFKA_PRODUCER_OPTIONS", '{"linger_ms": 9}')
    settings = Settings()
    assert connect.client_options(settings, "producer") == {"linger_ms": 9}
    assert connect.client_options(settings, "consumer") == {"session_timeout_ms": 6000}


class Captured:
    """Stands in for a source or sink class: keeps the options it was made with."""

    made: list[dict] = []

    def __init__(self, bootstrap, *args, **kwargs) -> None:
        Captured.made.append(kwargs)


@pytest.mark.parametrize("module, session", [(kafka_python, "session_timeout_ms"),
                                             (kafka_confluent, "session.timeout.ms")])
def test_predict_gets_the_group_timeouts_and_its_producer_no_consumer_option(monkeypatch, module,
                                                                             session):
    monkeypatch.setattr(Captured, "made", [])
    monkeypatch.setattr(connect, "wait_for_broker", lambda *args: None)  # no broker behind h:1
    monkeypatch.setattr(module, "GroupSource", Captured)
    monkeypatch.setattr(module, "KafkaSink", Captured)
    shared = {session: 9000}
    settings = Settings(kafka_client=module.NAME, kafka_options=shared)
    connect.open_source("kafka://h:1/t", settings, role="predict")
    connect.open_sink("kafka://h:1/out", settings)
    group, sink = Captured.made
    assert group["options"][session] == 9000  # an explicit option wins over the setting
    heartbeat = session.replace("session", "heartbeat").replace("timeout", "interval")
    assert group["options"][heartbeat] == 2000
    assert session not in sink["options"]
    assert sink["deadline"] == 120.0

    monkeypatch.setattr(Captured, "made", [])
    connect.open_source("kafka://h:1/t", Settings(kafka_client=module.NAME), role="predict")
    assert Captured.made[0]["options"][session] == 6000  # the default hands over within 10 s


def test_confluent_refuses_an_unknown_property_as_bad_usage():
    with pytest.raises(UsageError, match="No such configuration property"):
        kafka_confluent.KafkaSink("127.0.0.1:9", options={"no.such.property": 1})


def test_an_option_no_client_knows_exits_2_naming_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("STREAMBAYES_KAFKA_CLIENT", "kafka-python")
    monkeypatch.setenv("STREAMBAYES_KAFKA_OPTIONS", '{"sesion_timeout_ms": 6000}')
    status = main(["learn", "--source", "kafka://127.0.0.1:9/t", "--snapshots", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 2 and "'sesion_timeout_ms'" in err and len(err.strip().splitlines()) == 1


def test_producer_options_may_set_what_the_sink_sets_itself(monkeypatch):
    """linger_ms or acks in STREAMBAYES_KAFKA_PRODUCER_OPTIONS used to raise TypeError (the same
    keyword twice); the user's value wins."""
    from streambayes.runtime.kafka import kafka_python_sink

    made = []

    class FakeProducer:
        DEFAULT_CONFIG = {"max_request_size": 1_048_576}

        def __init__(self, **kwargs):
            made.append(kwargs)

    monkeypatch.setattr(kafka_python_sink, "KafkaProducer", FakeProducer)
    kafka_python.KafkaSink("h:1", options={"linger_ms": 20, "acks": 1})
    assert made[-1]["linger_ms"] == 20 and made[-1]["acks"] == 1


@pytest.mark.parametrize("module", ["kafka_python_sink", "confluent_sink", "confluent_admin",
                                    "kafka_python", "confluent"])
def test_each_kafka_module_imports_first(module):
    """The sinks were split out of their client modules: importing either first must work."""
    import subprocess
    import sys

    code = (f"import streambayes.runtime.kafka.{module}; "
            "from streambayes.runtime.kafka import confluent, kafka_python; "
            "assert confluent.KafkaSink and kafka_python.KafkaSink and kafka_python.never_succeeds")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def test_confluent_consumers_look_again_soon_at_a_full_queue_and_the_user_can_say_otherwise():
    """librdkafka's default fetch.queue.backoff.ms (1 s) starved a reader faster than 100,000
    records a second: the bare client read 200,000 records at 113,000/s or 590,000/s, run by run."""
    from streambayes.runtime.kafka.confluent import QUEUE_BACKOFF_MS, _consumer_config, _ErrorLog

    ours = _consumer_config("b:9092", "g", None, _ErrorLog("c"), "earliest")
    assert ours["fetch.queue.backoff.ms"] == QUEUE_BACKOFF_MS <= 100
    theirs = _consumer_config("b:9092", "g", {"fetch.queue.backoff.ms": 1000}, _ErrorLog("c"),
                              "earliest")
    assert theirs["fetch.queue.backoff.ms"] == 1000
