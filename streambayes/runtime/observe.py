"""What a running service shows: periodic progress lines and a Prometheus endpoint.

One :class:`Observer` per service (``learn``, ``predict``, ``replay``). The loops tell it what
happened (events, dead letters by reason, latencies, lag per partition, snapshots written or
loaded); it keeps

- Prometheus metrics (``prometheus-client``) in its own registry, served on
  ``--metrics-port`` (``/metrics``) when one is given:

  ========================================  =========  =================================
  ``streambayes_events_total``              counter    events processed (``role``)
  ``streambayes_records_total``             counter    records read
  ``streambayes_dead_letters_total``        counter    by ``reason``
  ``streambayes_events_per_second``         gauge      over the last progress interval
  ``streambayes_lag``                       gauge      records behind, per ``topic``/``partition``
  ``streambayes_latency_seconds``           histogram  input to posterior (predict)
  ``streambayes_snapshot_age_seconds``      gauge      since the newest snapshot written/served
  ``streambayes_snapshots_total``           counter    snapshots written (learn) or loaded
  ========================================  =========  =================================

- one progress line every ``--progress-seconds`` (default 10) on the log, with counts, rate and
  lag, so that a service is never silent while it works.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

logger = logging.getLogger("streambayes.progress")

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
CLIENT_LOGGERS = ("kafka", "confluent_kafka")


def quiet_client_logs(level: int = logging.WARNING) -> None:
    """The Kafka clients log at ``level`` and above only (kafka-python floods ERROR lines while
    a broker is away; the runtime says what matters itself)."""
    for name in CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))


class Observer:
    """Counts, rates, lag and latency of one service; progress lines; the metrics endpoint."""

    def __init__(self, role: str, *, port: int | None = None, every: float = 10.0,
                 clock: Callable[[], float] = time.monotonic, addr: str = "0.0.0.0",
                 lag_probe: Callable[[], Mapping[tuple[str, int], int]] | None = None) -> None:
        if every <= 0:
            raise ValueError(f"the progress interval must be positive, got {every}")
        self.role, self.every, self.clock = role, every, clock
        self.lag_probe = lag_probe  # asked once per progress line (a broker round trip)
        self.registry = CollectorRegistry()
        r, labels = self.registry, ["role"]
        self._events = Counter("streambayes_events", "events processed", labels, registry=r)
        self._records = Counter("streambayes_records", "records read", labels, registry=r)
        self._dead = Counter("streambayes_dead_letters", "dead letters by reason", ["role", "reason"],
                             registry=r)
        self._rate = Gauge("streambayes_events_per_second", "events/s over the last interval", labels,
                           registry=r)
        self._lag = Gauge("streambayes_lag", "records behind the end of the partition",
                          ["role", "topic", "partition"], registry=r)
        self._latency = Histogram("streambayes_latency_seconds", "input to posterior", labels,
                                  buckets=LATENCY_BUCKETS, registry=r)
        self._age = Gauge("streambayes_snapshot_age_seconds", "seconds since the newest snapshot",
                          labels, registry=r)
        self._snapshots = Counter("streambayes_snapshots", "snapshots written or loaded", labels,
                                  registry=r)
        self.events_total = self.records_total = self.dead_total = 0
        self.lag_now: dict[tuple[str, int], int] = {}
        self._snapshot_at: float | None = None
        self._snapshot_id: str | None = None
        self._last_time, self._last_events = clock(), 0
        self.server: Any = None
        if port is not None:
            self.server, _thread = start_http_server(port, addr=addr, registry=self.registry)
            logger.info("%s: metrics on http://%s:%d/metrics", role, addr, self.port)

    @property
    def port(self) -> int | None:
        """The port the endpoint listens on (an OS-chosen one for ``port=0``)."""
        return None if self.server is None else self.server.server_address[1]

    def records(self, n: int) -> None:
        self.records_total += n
        self._records.labels(self.role).inc(n)

    def events(self, n: int) -> None:
        self.events_total += n
        self._events.labels(self.role).inc(n)

    def dead_letter(self, reason: str, n: int = 1) -> None:
        self.dead_total += n
        self._dead.labels(self.role, reason).inc(n)

    def latencies(self, seconds: Iterable[float]) -> None:
        child = self._latency.labels(self.role)
        for s in seconds:
            child.observe(s)

    def lag(self, behind: Mapping[tuple[str, int], int]) -> None:
        """Records behind the end of each (topic, partition) read now; a partition no longer read
        (moved to another group member) is dropped from the line and the gauge, not shown with
        its last figure."""
        for topic, partition in set(self.lag_now) - set(behind):
            del self.lag_now[(topic, partition)]
            try:
                self._lag.remove(self.role, topic, str(partition))
            except KeyError:
                pass
        for (topic, partition), n in behind.items():
            self.lag_now[(topic, partition)] = n
            self._lag.labels(self.role, topic, str(partition)).set(n)

    def snapshot(self, snapshot_id: str, age_seconds: float = 0.0) -> None:
        """A snapshot was written (learn) or loaded (predict); ``age_seconds`` when it is older."""
        self._snapshot_id = snapshot_id
        self._snapshot_at = self.clock() - age_seconds
        self._snapshots.labels(self.role).inc()
        self._age.labels(self.role).set(age_seconds)

    def tick(self, force: bool = False) -> str | None:
        """Log (and return) a progress line when ``every`` seconds passed since the last one."""
        now = self.clock()
        if self._snapshot_at is not None:
            self._age.labels(self.role).set(now - self._snapshot_at)
        elapsed = now - self._last_time
        if not force and elapsed < self.every:
            return None
        if self.lag_probe is not None:
            try:
                self.lag(self.lag_probe())
            except Exception as exc:  # noqa: BLE001 (lag is a figure to show, never a failure)
                logger.debug("lag unavailable: %s", exc)
        rate = (self.events_total - self._last_events) / elapsed if elapsed > 0 else 0.0
        self._rate.labels(self.role).set(rate)
        self._last_time, self._last_events = now, self.events_total
        line = self.line(rate)
        logger.info("%s", line)
        return line

    def line(self, rate: float) -> str:
        parts = [f"{self.role}: {self.events_total:,} events from {self.records_total:,} records",
                 f"{rate:,.0f} events/s", f"{self.dead_total:,} dead letters"]
        if self.lag_now:
            parts.append(f"lag {sum(self.lag_now.values()):,} over {len(self.lag_now)} partitions")
        if self._snapshot_id is not None and self._snapshot_at is not None:
            parts.append(f"snapshot {self._snapshot_id} {self.clock() - self._snapshot_at:,.0f} s old")
        return ", ".join(parts)

    def __enter__(self) -> Observer:
        return self

    def __exit__(self, *exc: object) -> None:
        """The last progress line (the totals of the run), then the endpoint closes."""
        self.tick(force=True)
        self.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def source_lag(source: Any) -> Callable[[], dict[tuple[str, int], int]] | None:
    """A lag probe for a Kafka source (records between its next offsets and the end offsets its
    fetches last saw); None for a source that cannot tell (a file). It never sends a request: an
    offsets request from the loop's thread disturbed kafka-python's group after a broker restart
    (members stopped fetching; ``tests/integration/test_broker_faults.py``). A partition whose
    end no fetch has seen yet (just assigned, or after the stall guard's renewal) is left out
    until one has."""
    if not (hasattr(source, "known_ends") and hasattr(source, "positions")):
        return None

    def probe() -> dict[tuple[str, int], int]:
        ends = source.known_ends()  # what the fetches saw: no request to the broker
        read = source.positions().get(source.topic, {})
        return {(source.topic, p): max(0, end - int(read.get(str(p), end))) for p, end in ends.items()}

    return probe


def observer_for(job: Any, role: str, source: Any) -> Observer:
    """The Observer of a learn or predict job: ``job.metrics_port`` (None: no endpoint),
    ``job.progress_seconds`` between progress lines, the lag of ``source`` when it can tell."""
    return Observer(role, port=getattr(job, "metrics_port", None),
                    every=getattr(job, "progress_seconds", 10.0), lag_probe=source_lag(source))
