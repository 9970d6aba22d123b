"""The test broker's order of preference and its failure rules (no broker is started here)."""

from __future__ import annotations

import pytest

from streambayes.devtools import broker as broker_module
from streambayes.devtools import kafka_broker, kafka_dist
from streambayes.errors import BrokerError

_ENV = ("STREAMBAYES_TEST_BROKER", "KAFKA_BOOTSTRAP_SERVERS", "CI", "STREAMBAYES_KAFKA_VERSION")


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """A machine with java and mvn, no Docker, no broker variables; flip parts per test."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("STREAMBAYES_CACHE_DIR", str(tmp_path / "cache"))
    tools = {"java": "/usr/bin/java", "mvn": "/usr/bin/mvn", "docker": False}
    monkeypatch.setattr(kafka_dist, "java_command", lambda: tools["java"])
    monkeypatch.setattr(kafka_dist, "maven_command", lambda: tools["mvn"])
    monkeypatch.setattr(broker_module, "docker_answers", lambda: tools["docker"])
    return tools


@pytest.mark.parametrize(("change", "expected"), [
    ({}, "kafka"),
    ({"docker": True}, "testcontainers"),
    ({"env": {"KAFKA_BOOTSTRAP_SERVERS": "h:9092"}, "docker": True}, "env"),
    ({"mvn": None}, "tansu"),
    ({"java": None}, "tansu"),
    ({"java": None, "env": {"CI": "true"}}, "tansu"),
    ({"mvn": None, "env": {"CI": "true"}}, "kafka"),  # required under CI: fails loudly later
    ({"env": {"STREAMBAYES_TEST_BROKER": "tansu", "KAFKA_BOOTSTRAP_SERVERS": "h:1"}}, "tansu"),
    ({"java": None, "env": {"STREAMBAYES_TEST_BROKER": "kafka"}}, "kafka"),
])
def test_the_order_of_preference(machine, monkeypatch, change, expected):
    for name, value in change.pop("env", {}).items():
        monkeypatch.setenv(name, value)
    machine.update(change)
    kind, reason = broker_module.choose_broker()
    assert kind == expected and reason
    assert broker_module.describe_choice().startswith("broker: ")


def test_a_cached_distribution_is_enough_without_maven(machine, monkeypatch):
    machine["mvn"] = None
    monkeypatch.setattr(kafka_dist, "cached_classpath", lambda version=None: ["kafka.jar"])
    assert broker_module.choose_broker()[0] == "kafka"


def test_an_unknown_forced_broker_is_a_clear_error(machine, monkeypatch):
    monkeypatch.setenv("STREAMBAYES_TEST_BROKER", "redpanda")
    with pytest.raises(BrokerError, match="expected 'kafka' or 'tansu'"):
        broker_module.choose_broker()


class _Started:
    """Stands in for a local broker process: start/close record that they were called."""

    def __init__(self, *args, **kwargs) -> None:
        self.port, self.start_seconds, self.closed = 1234, 0.0, False

    bootstrap = property(lambda self: f"127.0.0.1:{self.port}")

    def describe(self) -> str:
        return "stand-in"

    def start(self, timeout: float = 0.0) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _failing_start(self, timeout: float = 0.0) -> None:
    raise BrokerError("Maven could not fetch org.apache.kafka:kafka_2.13:4.1.1 (exit 1)")


def test_under_ci_a_broken_kafka_fails_loudly(machine, monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(broker_module.KafkaBroker, "start", _failing_start)
    monkeypatch.setattr(broker_module, "TansuBroker", _Started)
    with pytest.raises(BrokerError, match=r"Apache Kafka was required .*CI=true.*Maven could not"):
        with broker_module.broker_info():
            pass


def test_a_forced_kafka_fails_loudly_outside_ci(machine, monkeypatch):
    monkeypatch.setenv("STREAMBAYES_TEST_BROKER", "kafka")
    monkeypatch.setattr(broker_module.KafkaBroker, "start", _failing_start)
    monkeypatch.setattr(broker_module, "TansuBroker", _Started)
    with pytest.raises(BrokerError, match="Apache Kafka was required"):
        with broker_module.broker_info():
            pass


def test_outside_ci_a_broken_kafka_falls_back_to_tansu_and_says_so(machine, monkeypatch):
    monkeypatch.setattr(broker_module.KafkaBroker, "start", _failing_start)
    monkeypatch.setattr(broker_module, "TansuBroker", _Started)
    with broker_module.broker_info() as info:
        assert info.kind == "tansu" and info.bootstrap == "127.0.0.1:1234"
        assert "fell back to Tansu" in info.reason and "Maven could not" in info.reason


def test_a_started_kafka_is_reported_with_its_handle_and_closed(machine, monkeypatch):
    monkeypatch.setattr(broker_module, "KafkaBroker", _Started)
    with broker_module.broker_info() as info:
        assert (info.kind, info.bootstrap, info.reason) == ("kafka", "127.0.0.1:1234",
                                                             "java and mvn found")
        handle = info.handle
    assert handle.closed


def test_fetch_uses_the_cache_and_never_calls_maven_then(machine, monkeypatch, tmp_path):
    lib = kafka_dist.dist_dir("4.1.1") / "lib"
    lib.mkdir(parents=True)
    jar = lib / "kafka_2.13-4.1.1.jar"
    jar.write_bytes(b"")
    (lib.parent / "classpath.txt").write_text(f"{jar}\n")
    monkeypatch.setattr(kafka_dist.subprocess, "run", lambda *a, **k: pytest.fail("ran Maven"))
    assert kafka_dist.fetch("4.1.1") == [jar]
    jar.unlink()  # a jar gone: the cache is incomplete and Maven is needed again
    machine["mvn"] = None
    with pytest.raises(BrokerError, match="no `mvn`"):
        kafka_dist.fetch("4.1.1")


def test_a_failed_maven_run_names_the_artifact_and_its_output(machine, monkeypatch):
    class Done:
        returncode, stdout, stderr = 1, "", "[ERROR] Could not resolve dependencies\n"

    monkeypatch.setattr(kafka_dist.subprocess, "run", lambda *a, **k: Done())
    with pytest.raises(BrokerError, match=r"kafka_2\.13:4\.9\.9 \(exit 1\): .*Could not resolve"):
        kafka_dist.fetch("4.9.9")
    assert kafka_dist.cached_classpath("4.9.9") is None


def test_server_properties_for_a_one_node_test_broker(tmp_path):
    text = kafka_broker.server_properties(tmp_path / "data", 19092, 19093)
    settings = dict(line.split("=", 1) for line in text.splitlines())
    assert settings["process.roles"] == "broker,controller"
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert settings["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19092"
    assert settings["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert settings["log.dirs"] == str(tmp_path / "data")
    for name in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                 "transaction.state.log.min.isr"):
        assert settings[name] == "1"
    assert settings["group.initial.rebalance.delay.ms"] == "0"
    assert settings["auto.create.topics.enable"] == "true"


def test_the_cache_directory_and_version_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("STREAMBAYES_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("STREAMBAYES_KAFKA_VERSION", "4.0.1")
    assert kafka_dist.dist_dir() == tmp_path / "kafka-4.0.1"
    monkeypatch.delenv("STREAMBAYES_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kafka_dist.cache_root() == tmp_path / "xdg" / "streambayes"


def test_the_broker_heap_is_the_heap_opts_given(monkeypatch):
    monkeypatch.delenv("STREAMBAYES_BROKER_HEAP_OPTS", raising=False)
    assert kafka_broker.heap_options() == ("-Xms128m", "-Xmx512m")
    monkeypatch.setenv("STREAMBAYES_BROKER_HEAP_OPTS", " -Xmx1G  -Xms1G ")
    assert kafka_broker.heap_options() == ("-Xmx1G", "-Xms1G")
    monkeypatch.setenv("STREAMBAYES_BROKER_HEAP_OPTS", "")
    assert kafka_broker.heap_options() == ("-Xms128m", "-Xmx512m")
