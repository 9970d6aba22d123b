"""Open sources and sinks from URIs (DESIGN §6): a file path, or ``kafka://HOST:PORT/TOPIC``.

The Kafka client backend comes from settings (``STREAMBAYES_KAFKA_CLIENT``): ``confluent``
(default: librdkafka) or ``kafka-python``; both are installed. Both give the
same :class:`~streambayes.runtime.records.sources.Source` and
:class:`~streambayes.runtime.records.sinks.Sink`.

One deadline policy for every command: before a Kafka client is made, a broker of the bootstrap
list must accept a connection within ``STREAMBAYES_KAFKA_CONNECT_DEADLINE`` seconds (default 30;
retried with backoff, a warning on the first failure); past it the command fails with one line
and exit 1 (a service under a supervisor is restarted). Once connected, an outage is ridden out
by the sources (backoff, nothing skipped), and a delivery that keeps failing gives up after
``STREAMBAYES_KAFKA_DELIVERY_DEADLINE`` (120 s).
"""

from __future__ import annotations

import importlib
import socket
import threading
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from streambayes.config import Settings
from streambayes.errors import UsageError
from streambayes.runtime.kafka.options import Role, group_timeouts, split
from streambayes.runtime.records.sinks import FileSink, Sink
from streambayes.runtime.records.sources import FileSource, Format, Source
from streambayes.runtime.records.uri import KafkaURI, parse_uri

BACKENDS = {"kafka-python": "streambayes.runtime.kafka.kafka_python",
            "confluent": "streambayes.runtime.kafka.confluent"}
MEMBER_BACKENDS = {"kafka-python": "streambayes.runtime.kafka.member_kafka_python",
                   "confluent": "streambayes.runtime.kafka.member_confluent"}
DEFAULT_GROUPS = {"learn": "streambayes-learn", "predict": "streambayes-predict",
                  "replay": None}


def wait_for_broker(bootstrap: str, settings: Settings, stop: threading.Event | None = None) -> None:
    """Return once a broker of ``bootstrap`` (``host:port[,host:port...]``) accepts a TCP
    connection; NetworkUnavailable after ``settings.kafka_connect_deadline`` seconds or when
    ``stop`` is set."""
    from streambayes.runtime.retry import retrying

    def connect() -> None:
        errors = []
        for address in bootstrap.split(","):
            host, _, port = address.strip().rpartition(":")
            try:
                socket.create_connection((host.strip("[]"), int(port)), timeout=5.0).close()
                return
            except (OSError, ValueError) as exc:
                errors.append(f"{address.strip()}: {exc}")
        raise OSError("; ".join(errors))

    retrying(connect, f"connect to {bootstrap}", (OSError,), stop,
             deadline=settings.kafka_connect_deadline)


def backend(settings: Settings) -> ModuleType:
    """The client backend module named by ``settings.kafka_client``."""
    name = settings.kafka_client
    try:
        return importlib.import_module(BACKENDS[name])
    except ImportError as exc:
        extra = " (it is a dependency of streambayes: reinstall it)"
        raise UsageError(f"Kafka client {name!r} is not installed{extra}: {exc}") from None


def client_options(settings: Settings, role: Role = "admin") -> dict[str, Any]:
    """The backend's options for a ``role``'s client: security settings mapped, plus the shared
    ``STREAMBAYES_KAFKA_OPTIONS`` that client knows and the role's own options
    (:mod:`~streambayes.runtime.kafka.options`)."""
    specific = {"consumer": settings.kafka_consumer_options,
                "producer": settings.kafka_producer_options,
                "admin": settings.kafka_admin_options}[role]
    extra = split(settings.kafka_client, settings.kafka_options, specific, role)
    return backend(settings).client_options(settings.kafka_security(), extra)


def open_source(
    uri: str | KafkaURI | Path,
    settings: Settings,
    *,
    role: Literal["learn", "predict", "replay"],
    partitions: Sequence[int] | None = None,
    fmt: Format | None = None,
    stop: threading.Event | None = None,
    group_options: dict[str, Any] | None = None,
    follow: bool = False,
) -> Source:
    """A file source, or a Kafka source: assigned partitions for learn/replay, a group for predict."""
    target = parse_uri(uri) if isinstance(uri, str) else uri
    if isinstance(target, Path):
        if partitions is not None:
            raise UsageError("--partitions applies to Kafka sources only (a file has one partition)")
        return FileSource(target, fmt, follow=follow, max_line_bytes=settings.max_record_bytes)
    module = backend(settings)
    options = client_options(settings, "consumer")
    group = settings.kafka_group or DEFAULT_GROUPS[role]
    if role == "predict":
        if partitions is not None:
            raise UsageError("predict reads in a consumer group; --partitions is for learn")
        timeouts = group_timeouts(settings.kafka_client, settings.kafka_session_timeout_ms,
                                  settings.kafka_heartbeat_interval_ms,
                                  settings.kafka_max_poll_interval_ms)
        options = {**timeouts, **options, **(group_options or {})}  # explicit options win
        wait_for_broker(target.bootstrap, settings, stop)
        return module.GroupSource(target.bootstrap, target.topic, group=group, options=options,
                                  stop=stop)
    wait_for_broker(target.bootstrap, settings, stop)
    kind, more = module.AssignedSource, {}
    if settings.kafka_client == "kafka-python" and settings.kafka_fetch_ahead > 0:
        from streambayes.runtime.kafka.kafka_python_fetch import FetchedSource

        kind, more = FetchedSource, {"ahead": settings.kafka_fetch_ahead}
    return kind(target.bootstrap, target.topic, partitions=partitions, group=group,
                options=options, stop=stop, connect_deadline=settings.kafka_connect_deadline,
                **more)


def open_sink(uri: str | KafkaURI | Path, settings: Settings, *, stop: threading.Event | None = None,
              mode: Literal["w", "a"] = "a",
              defaults: dict[str, Any] | None = None) -> tuple[Sink, str]:
    """A sink and the topic to send to (for a file, its path: one file, one stream).

    A file sink writes lines of at most ``STREAMBAYES_SINK_MAX_LINE_BYTES``; a Kafka sink gives
    up on a failing delivery after ``STREAMBAYES_KAFKA_DELIVERY_DEADLINE`` seconds."""
    target = parse_uri(uri, allowed_query=()) if isinstance(uri, str) else uri
    if isinstance(target, Path):
        return FileSink(target, mode=mode, max_line_bytes=settings.sink_max_line_bytes), str(target)
    module = backend(settings)
    options = {**(defaults or {}), **client_options(settings, "producer")}
    wait_for_broker(target.bootstrap, settings, stop)
    return module.KafkaSink(target.bootstrap, options=options,
                            stop=stop, deadline=settings.kafka_delivery_deadline), target.topic


def open_member_source(uri: str | KafkaURI, settings: Settings, *,
                       stop: threading.Event | None = None) -> Any:
    """A learner's consumer-group member (cooperative-sticky; eager range with kafka-python); its
    ``listener`` hears which partitions it gains and gives up
    (:mod:`streambayes.runtime.loops.group`)."""
    target = parse_uri(uri) if isinstance(uri, str) else uri
    if isinstance(target, Path):
        raise UsageError("a consumer group reads a Kafka topic, not a file")
    backend(settings)  # checks that the client is installed
    module = importlib.import_module(MEMBER_BACKENDS[settings.kafka_client])
    timeouts = group_timeouts(settings.kafka_client, settings.kafka_session_timeout_ms,
                              settings.kafka_heartbeat_interval_ms,
                              settings.kafka_max_poll_interval_ms)
    options = {**timeouts, **client_options(settings, "consumer")}
    group = settings.kafka_group or DEFAULT_GROUPS["learn"]
    wait_for_broker(target.bootstrap, settings, stop)
    return module.MemberSource(target.bootstrap, target.topic, group=group, options=options,
                               stop=stop)
