"""A one-node Apache Kafka broker (KRaft, combined broker and controller) in a local JVM.

:class:`KafkaBroker` runs ``java -cp <jars> kafka.Kafka server.properties`` with the jars of
:mod:`streambayes.devtools.kafka_dist`, its log directory on disk in a work directory, listeners
on free loopback ports (``PLAINTEXT`` for clients, ``CONTROLLER`` for the quorum) and settings for
tests: every internal topic with replication 1 and few partitions, no initial rebalance delay,
topics created on first use, small segments, log4j2 at WARN into ``<workdir>/broker.log``.

The log directory is formatted once per Kafka version (``kafka.tools.StorageTool format``, one
JVM start) into a template in the cache, and each new broker copies it: the quorum is static
(``controller.quorum.voters``), so nothing in the formatted files names a port.

The same broker (same directories, same ports) can be stopped and started again
(:meth:`KafkaBroker.restart`, ``kill=True`` for SIGKILL), or stalled with :meth:`pause` /
:meth:`resume` (SIGSTOP / SIGCONT); :attr:`KafkaBroker.process` is the JVM's handle.
"""

from __future__ import annotations

import base64
import fcntl
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from streambayes.devtools import kafka_dist
from streambayes.devtools.lifecycle import BrokerProcess
from streambayes.errors import BrokerError

NODE_ID = 1
# A small heap for tests (two brokers run at once: 128 MB at first, 512 MB at most).
# ``STREAMBAYES_BROKER_HEAP_OPTS`` replaces it (not Kafka's own ``KAFKA_HEAP_OPTS``, which a
# developer may have set for a real broker): bench/predict_latency.py gives Kafka's stock
# -Xmx1G -Xms1G, because with 128 MB the young collections came every ~3 s at 2,000 events/s,
# 11-17 ms each.
HEAP_OPTIONS = ("-Xms128m", "-Xmx512m")
JVM_OPTIONS = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError",
               "-Djava.awt.headless=true")


def heap_options() -> tuple[str, ...]:
    """The broker JVM's heap options: ``STREAMBAYES_BROKER_HEAP_OPTS`` split on spaces when set,
    else ours."""
    given = os.environ.get("STREAMBAYES_BROKER_HEAP_OPTS", "").split()
    return tuple(given) if given else HEAP_OPTIONS

_SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": str(NODE_ID),
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "auto.create.topics.enable": "true",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "offsets.topic.segment.bytes": "10485760",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "transaction.state.log.segment.bytes": "10485760",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "log.segment.bytes": "10485760",
    "log.retention.check.interval.ms": "60000",
    "log.cleaner.dedupe.buffer.size": "8388608",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
}

_LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_properties(log_dir: Path, port: int, controller_port: int,
                      extra: dict[str, str] | None = None) -> str:
    """The broker's ``server.properties`` text (one node, loopback listeners; ``extra`` over the
    test defaults)."""
    settings = {
        **_SETTINGS,
        **(extra or {}),
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.quorum.voters": f"{NODE_ID}@127.0.0.1:{controller_port}",
        "log.dirs": str(log_dir),
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def cpu_seconds(process: subprocess.Popen | None) -> float | None:
    """User + system CPU seconds a running process has used so far (Linux ``/proc``), or None."""
    if process is None or process.poll() is not None:
        return None
    try:
        with open(f"/proc/{process.pid}/stat") as stat:
            fields = stat.read().rsplit(") ", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def formatted_template(java: str, classpath: str, version: str) -> Path:
    """A log directory formatted once for ``version`` (meta.properties + bootstrap.checkpoint)."""
    root = kafka_dist.dist_dir(version)
    template = root / "formatted"
    if (template / "meta.properties").is_file():
        return template
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (template / "meta.properties").is_file():
            return template
        work = Path(tempfile.mkdtemp(prefix="format-", dir=root))
        try:
            (work / "server.properties").write_text(server_properties(work / "data", 9092, 9093))
            cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            command = [java, "-cp", classpath, "kafka.tools.StorageTool", "format",
                       "-t", cluster, "-c", str(work / "server.properties")]
            done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                                  check=False)
            if done.returncode != 0:
                output = " | ".join((done.stdout + done.stderr).strip().splitlines()[-6:])
                raise BrokerError(f"kafka StorageTool format failed (exit {done.returncode}): "
                                  f"{output}")
            os.replace(work / "data", template)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return template


class KafkaBroker(BrokerProcess):
    """One Apache Kafka broker process on loopback; a context manager (start ... close).

    ``workdir`` (default: a new temporary directory, removed by :meth:`close`) holds
    ``data/`` (the log directory), ``server.properties``, ``log4j2.properties``,
    ``broker.log`` and ``console.log``.
    """

    STOP_SECONDS = 30.0
    START_SECONDS = 120.0

    persistent = True  # the log directory is on disk: topics and records survive a restart

    def __init__(self, *, version: str | None = None, port: int | None = None,
                 controller_port: int | None = None, workdir: str | Path | None = None,
                 settings: dict[str, str] | None = None) -> None:
        self.settings = dict(settings or {})  # server.properties over the test defaults
        self.version = version or kafka_dist.kafka_version()
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="sb-kafka-"))
        self.log_dir = self.workdir / "data"
        self.process: subprocess.Popen | None = None
        self.start_seconds: float | None = None  # how long the last start took

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def describe(self) -> str:
        return f"Apache Kafka {self.version} (KRaft, one node, local JVM) at {self.bootstrap}"

    def _command(self) -> list[str]:
        java = kafka_dist.java_command()
        if java is None:
            raise BrokerError("cannot start Apache Kafka: no `java` (JAVA_HOME or PATH)")
        classpath = os.pathsep.join(str(j) for j in kafka_dist.fetch(self.version))
        if not (self.log_dir / "meta.properties").is_file():
            template = formatted_template(java, classpath, self.version)
            shutil.copytree(template, self.log_dir, dirs_exist_ok=True)
        (self.workdir / "server.properties").write_text(
            server_properties(self.log_dir, self.port, self.controller_port, self.settings))
        (self.workdir / "log4j2.properties").write_text(
            _LOG4J2.format(log=self.workdir / "broker.log"))
        return [java, *heap_options(), *JVM_OPTIONS,
                f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
                "-cp", classpath, "kafka.Kafka", str(self.workdir / "server.properties")]

    def start(self, timeout: float = 120.0) -> None:
        """Start the JVM and return once the broker answers a metadata request."""
        if self.process is not None and self.process.poll() is None:
            raise BrokerError(f"{self.describe()} is already running")
        started = time.monotonic()
        command = self._command()
        with open(self.workdir / "console.log", "ab") as console:
            self.process = subprocess.Popen(command, stdout=console, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        try:
            self._wait_ready(started + timeout)
        except BaseException:
            self.kill()
            raise
        self.start_seconds = time.monotonic() - started

    def _wait_ready(self, deadline: float) -> None:
        from kafka import KafkaAdminClient

        last = "no answer"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerError(f"Apache Kafka exited with status {self.process.returncode} at "
                                  f"start: {self._log_tail()}")
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5000,
                                         bootstrap_timeout_ms=1000)
                try:
                    brokers = admin.describe_cluster()["brokers"]
                finally:
                    admin.close()
                if any(b["broker_id"] == NODE_ID and not b.get("is_fenced") for b in brokers):
                    return
                last = f"brokers {brokers}"
            except Exception as exc:  # noqa: BLE001 (not up yet: any client error means retry)
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.25)
        raise BrokerError(f"Apache Kafka did not answer on {self.bootstrap} in time ({last}): "
                          f"{self._log_tail()}")

    def _log_tail(self) -> str:
        return _tail(self.workdir / "broker.log") or _tail(self.workdir / "console.log") \
            or f"no log in {self.workdir}"

    def close(self) -> None:
        """Stop the broker and remove its work directory if this object made it."""
        try:
            self.stop()
        finally:
            if self._own_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
