"""Kafka client options by role: which options reach the consumer, the producer and the admin
client, and the consumer-group timeouts (settings ``STREAMBAYES_KAFKA_*OPTIONS``, DESIGN §6).

The shared options (``STREAMBAYES_KAFKA_OPTIONS``) go to each client that knows them, so one
``{"session_timeout_ms": 6000}`` no longer breaks the producer next to the consumer:

- kafka-python: an option goes to a client when it is a key of that client's ``DEFAULT_CONFIG``
  (``KafkaConsumer``, ``KafkaProducer``, ``KafkaAdminClient``); an option no client knows is a
  :class:`~streambayes.errors.UsageError` naming it, and so is a role's own option
  (``STREAMBAYES_KAFKA_CONSUMER_OPTIONS``...) that its client does not know.
- librdkafka (``confluent``): properties are shared by every client except the consumer-only
  and producer-only ones (``C``/``P`` in its CONFIGURATION.md); the common ones are listed here
  and kept from the other role. An unknown property is refused by librdkafka when the client
  is made, which the backend reports as a usage error.

>>> split("kafka-python", {"session_timeout_ms": 6000, "client_id": "x"}, {}, "producer")
{'client_id': 'x'}
>>> split("confluent", {"session.timeout.ms": 6000, "client.id": "x"}, {"linger.ms": 1}, "producer")
{'client.id': 'x', 'linger.ms': 1}
>>> split("kafka-python", {"no_such_option": 1}, {}, "consumer")  # doctest: +ELLIPSIS
Traceback (most recent call last):
  ...
streambayes.errors.UsageError: STREAMBAYES_KAFKA_OPTIONS: 'no_such_option' is not an option ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from streambayes.errors import UsageError

Role = Literal["consumer", "producer", "admin"]
ROLES: tuple[Role, ...] = ("consumer", "producer", "admin")
SETTING = {"consumer": "STREAMBAYES_KAFKA_CONSUMER_OPTIONS",
           "producer": "STREAMBAYES_KAFKA_PRODUCER_OPTIONS",
           "admin": "STREAMBAYES_KAFKA_ADMIN_OPTIONS"}

# librdkafka properties of one role only (CONFIGURATION.md, column C/P): the common ones
CONFLUENT_CONSUMER_ONLY = frozenset({
    "group.id", "group.instance.id", "partition.assignment.strategy", "session.timeout.ms",
    "heartbeat.interval.ms", "group.protocol.type", "group.protocol", "group.remote.assignor",
    "coordinator.query.interval.ms", "max.poll.interval.ms", "enable.auto.commit",
    "auto.commit.interval.ms", "enable.auto.offset.store", "queued.min.messages",
    "queued.max.messages.kbytes", "fetch.wait.max.ms", "fetch.queue.backoff.ms",
    "fetch.message.max.bytes", "max.partition.fetch.bytes", "fetch.max.bytes", "fetch.min.bytes",
    "fetch.error.backoff.ms", "isolation.level", "enable.partition.eof", "check.crcs",
    "auto.offset.reset", "consume.callback.max.messages", "on_commit", "offset_commit_cb"})
CONFLUENT_PRODUCER_ONLY = frozenset({
    "transactional.id", "transaction.timeout.ms", "enable.idempotence", "enable.gapless.guarantee",
    "queue.buffering.max.messages", "queue.buffering.max.kbytes", "queue.buffering.max.ms",
    "linger.ms", "message.send.max.retries", "retries", "queue.buffering.backpressure.threshold",
    "compression.codec", "compression.type", "compression.level", "batch.num.messages",
    "batch.size", "delivery.report.only.error", "sticky.partitioning.linger.ms", "acks",
    "request.required.acks", "request.timeout.ms", "message.timeout.ms", "delivery.timeout.ms",
    "partitioner", "on_delivery"})


def _kafka_python_known() -> dict[Role, Mapping[str, Any]]:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    return {"consumer": KafkaConsumer.DEFAULT_CONFIG, "producer": KafkaProducer.DEFAULT_CONFIG,
            "admin": KafkaAdminClient.DEFAULT_CONFIG}


def _confluent_keeps(role: Role, name: str) -> bool:
    if role == "consumer":
        return name not in CONFLUENT_PRODUCER_ONLY
    if role == "producer":
        return name not in CONFLUENT_CONSUMER_ONLY
    return name not in CONFLUENT_CONSUMER_ONLY and name not in CONFLUENT_PRODUCER_ONLY


def split(client: str, shared: Mapping[str, Any], specific: Mapping[str, Any],
          role: Role) -> dict[str, Any]:
    """The options of ``client``'s ``role``: the shared ones it knows, then its own ones."""
    if client == "confluent":
        out = {name: value for name, value in shared.items() if _confluent_keeps(role, name)}
        out.update(specific)
        return out
    known = _kafka_python_known()
    for name in shared:
        if not any(name in config for config in known.values()):
            raise UsageError(f"STREAMBAYES_KAFKA_OPTIONS: {name!r} is not an option of any "
                             "kafka-python client (consumer, producer or admin)")
    for name in specific:
        if name not in known[role]:
            raise UsageError(f"{SETTING[role]}: {name!r} is not an option of kafka-python's "
                             f"{role} client")
    out = {name: value for name, value in shared.items() if name in known[role]}
    out.update(specific)
    return out


def group_timeouts(client: str, session_ms: int, heartbeat_ms: int,
                   max_poll_ms: int) -> dict[str, int]:
    """The consumer-group timeouts in ``client``'s option names.

    >>> group_timeouts("confluent", 6000, 2000, 300000)["session.timeout.ms"]
    6000
    """
    if heartbeat_ms >= session_ms:
        raise UsageError(f"STREAMBAYES_KAFKA_HEARTBEAT_INTERVAL_MS ({heartbeat_ms}) must be less "
                         f"than STREAMBAYES_KAFKA_SESSION_TIMEOUT_MS ({session_ms})")
    names = ("session_timeout_ms", "heartbeat_interval_ms", "max_poll_interval_ms")
    if client == "confluent":
        names = ("session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms")
    return dict(zip(names, (session_ms, heartbeat_ms, max(max_poll_ms, session_ms)), strict=True))


# The predictor's latency defaults per backend and role (issue 13): under any option the user
# gives. librdkafka leaves Nagle's algorithm on (``socket.nagle.disable=false``): a small produce
# or fetch request can then wait for the peer's delayed ACK (tens of ms on Linux); kafka-python
# sets TCP_NODELAY itself. A fetch returns as soon as one byte is there (``fetch.min.bytes`` 1,
# both clients), so the fetch wait only bounds an idle long poll: kept short so that a stop or a
# commit is not held behind it. Acknowledgements are pipelined, so librdkafka lingers 1 ms (its
# batching costs no Python); kafka-python keeps 5 ms: each new batch wakes its sender thread
# through a socket and takes locks in the caller, which at 1 ms cost more CPU than it saved.
LOW_LATENCY: dict[str, dict[Role, dict[str, Any]]] = {
    "confluent": {"consumer": {"socket.nagle.disable": True, "fetch.wait.max.ms": 50,
                               "fetch.min.bytes": 1},
                  "producer": {"socket.nagle.disable": True, "linger.ms": 1}},
    "kafka-python": {"consumer": {"fetch_max_wait_ms": 100, "fetch_min_bytes": 1},
                     "producer": {}},
}


def low_latency(client: str, role: Role, given: Mapping[str, Any]) -> dict[str, Any]:
    """The predictor's latency defaults of ``client``'s ``role`` that ``given`` does not set.

    >>> low_latency("confluent", "producer", {"linger.ms": 0})
    {'socket.nagle.disable': True}
    >>> low_latency("kafka-python", "producer", {})
    {}
    """
    return {k: v for k, v in LOW_LATENCY.get(client, {}).get(role, {}).items() if k not in given}
