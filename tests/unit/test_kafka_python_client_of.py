"""``client_of``: a kafka-python client whose construction fails (no broker answers its bootstrap)
leaves no I/O thread behind; kafka-python 3.0.12 itself leaves one per attempt."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from kafka import KafkaAdminClient
from kafka.errors import KafkaError

from streambayes.runtime.kafka.kafka_python import client_of, new_consumer


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def threads_after(make, attempts: int = 2) -> int:
    before = threading.active_count()
    for _ in range(attempts):
        with pytest.raises(KafkaError):
            make()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)  # a stopped I/O thread ends on its own
    return threading.active_count() - before


def test_a_client_that_cannot_bootstrap_leaves_no_io_thread():
    where = f"127.0.0.1:{closed_port()}"
    assert threads_after(lambda: client_of(KafkaAdminClient, bootstrap_servers=where,
                                           bootstrap_timeout_ms=300)) == 0
    assert threads_after(lambda: new_consumer(bootstrap_servers=where,
                                              bootstrap_timeout_ms=300)) == 0
