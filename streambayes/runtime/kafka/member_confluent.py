"""A consumer-group member with the cooperative-sticky assignor, through confluent-kafka.

The same :class:`MemberSource` as :mod:`~streambayes.runtime.kafka.member_kafka_python`. librdkafka
calls the rebalance callbacks from inside ``consume`` on the caller's thread, so the listener's
checkpoint commits synchronously. New partitions are assigned with their start offsets in the
assignment (``incremental_assign``), which is librdkafka's way to seek at assignment.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupState,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from streambayes.errors import BrokerError
from streambayes.runtime.kafka.bounded import CLOSE_SECONDS, bounded
from streambayes.runtime.kafka.confluent import (
    _consumer_config,
    _ErrorLog,
    _poll,
    _usable,
    commit_for_lag,
    log_starts,
)
from streambayes.runtime.kafka.options import split
from streambayes.runtime.records.sources import Record
from streambayes.runtime.retry import Backoff

logger = logging.getLogger(__name__)
FRESH_SECONDS = 5.0  # for the end offsets of the stall guard


class MemberSource:
    """Records of ``topic`` for the partitions the group gives this member."""

    def __init__(self, bootstrap: str, topic: str, *, group: str,
                 options: Mapping[str, Any] | None = None,
                 stop: threading.Event | None = None, refresh_seconds: float = 5.0) -> None:
        self.topic = topic
        self.group = group
        self.stop = stop or threading.Event()
        self.listener: Any = None  # a Rebalance; set before the first poll
        self._errors = _ErrorLog(f"group {group} on {topic}")
        ours = {"partition.assignment.strategy": "cooperative-sticky",
                "topic.metadata.refresh.interval.ms": int(refresh_seconds * 1000)}
        self._config = _consumer_config(bootstrap, group, {**ours, **dict(options or {})},
                                        self._errors, "earliest")
        self._consumer = self._subscribed()
        self._next: dict[int, int] = {}
        self._backoff = Backoff(stop=self.stop)

    def _subscribed(self) -> Consumer:
        consumer = _usable(lambda: Consumer(self._config))
        consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                           on_lost=self._on_lost)
        return consumer

    def _mine(self, partitions: list[TopicPartition]) -> list[int]:
        return [tp.partition for tp in partitions if tp.topic == self.topic]

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if consumer is not self._consumer:  # one the stall guard replaced, whose close hung
            consumer.incremental_assign([])
            return
        mine = self._mine(partitions)
        offsets = self.listener.assigned(mine) if self.listener is not None and mine else {}
        for tp in partitions:
            start = offsets.get(tp.partition) if tp.topic == self.topic else None
            tp.offset = OFFSET_BEGINNING if start is None else start
        consumer.incremental_assign(partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._give_up("revoked", consumer, partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._give_up("lost", consumer, partitions)

    def _give_up(self, what: str, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if consumer is not self._consumer:  # one the stall guard replaced, whose close hung
            consumer.incremental_unassign(partitions)
            return
        mine = self._mine(partitions)
        try:
            if self.listener is not None and mine:
                getattr(self.listener, what)(mine)
        finally:
            for p in mine:
                self._next.pop(p, None)
            consumer.incremental_unassign(partitions)

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        return _poll(self._consumer, max_records, timeout, self.topic, self._next, self._errors,
                     self._backoff)

    def seek(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        """Read the named partitions this member holds on from the given offsets."""
        held = {tp.partition for tp in self._consumer.assignment() if tp.topic == self.topic}
        for p, offset in positions.get(self.topic, {}).items():
            if int(p) in held:
                try:
                    self._consumer.seek(TopicPartition(self.topic, int(p), int(offset)))
                except KafkaException as exc:  # reading on from elsewhere would not be exact
                    raise BrokerError(f"seek of {self.topic}[{p}] to {offset} failed: "
                                      f"{exc.args[0].str()}") from exc

    def commit(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        """Commit ``positions`` for lag monitoring (best effort)."""
        commit_for_lag(self._consumer, self.topic, positions)

    def positions(self) -> dict[str, dict[str, int]]:
        """{topic: {partition: next offset}} of the partitions held and read."""
        return {self.topic: {str(p): off for p, off in sorted(self._next.items())}}

    def known_ends(self) -> dict[int, int]:
        """End offsets of the held partitions as the last fetches saw them (for lag): no request,
        so a progress line never disturbs the group or waits on a broker that is away."""
        held = [tp for tp in self._consumer.assignment() if tp.topic == self.topic]
        ends = {tp.partition: self._consumer.get_watermark_offsets(tp, cached=True)[1] for tp in held}
        return {p: end for p, end in ends.items() if end is not None and end >= 0}

    def log_starts(self, partitions: list[int]) -> dict[int, int] | None:
        """:func:`~streambayes.runtime.kafka.confluent.log_starts` of ``partitions`` (a shard
        resuming from its snapshot), asked by this member's consumer."""
        return log_starts(self._consumer, self.topic, partitions)

    def fresh_ends(self, partitions: list[int], timeout: float = FRESH_SECONDS
                   ) -> dict[int, int] | None:
        """End offsets of ``partitions`` as a new, short-lived admin client gets them from the
        broker now ({} for none: the broker answered), or None when it does not answer within
        ``timeout`` s in all. Not this member's consumer: the stall guard asks because that one
        may be wedged; an admin client (ListOffsets), so no group of its own is looked up (no
        coordinator request, nothing for a group ACL to refuse)."""
        deadline = time.monotonic() + timeout
        config = {**split("confluent", self._config, {}, "admin"),
                  "error_cb": _ErrorLog(f"stall guard of {self.group} on {self.topic}")}
        held: list[AdminClient] = []  # the client, let go on a thread of its own (below)
        try:
            held.append(AdminClient(config))
            if not partitions:  # does the broker answer at all
                held[0].list_topics(self.topic, timeout=timeout)
                return {}
            futures = held[0].list_offsets({TopicPartition(self.topic, p): OffsetSpec.latest()
                                            for p in partitions}, request_timeout=timeout)
            ends = {}
            for tp, future in futures.items():
                ends[tp.partition] = future.result(timeout=max(0.0, deadline - time.monotonic())
                                                   ).offset
            return ends
        except (KafkaException, concurrent.futures.TimeoutError) as exc:
            why = exc.args[0].str() if isinstance(exc, KafkaException) and exc.args and \
                isinstance(exc.args[0], KafkaError) else f"no answer in {timeout:g} s"
            logger.info("the broker did not give the end offsets of %s: %s", self.topic, why)
            return None
        finally:  # librdkafka's destroy can wait for a broker that is away: not on this thread
            bounded(held.clear, CLOSE_SECONDS, "letting go of the stall guard's client")

    def unheld(self, timeout: float = FRESH_SECONDS) -> set[int] | None:
        """The partitions of the topic that no member of the (stable) group holds, as a new,
        short-lived admin client finds them now (:func:`unheld_partitions`); None when that is not
        clear, the broker does not answer within ``timeout`` s in all, or this member is static
        (its joining again would not make the group rebalance)."""
        if self._config.get("group.instance.id"):
            return None
        config = {**split("confluent", self._config, {}, "admin"),
                  "error_cb": _ErrorLog(f"assignment check of {self.group} on {self.topic}")}
        deadline = time.monotonic() + timeout
        held: list[AdminClient] = []
        try:
            held.append(AdminClient(config))
            topic = held[0].list_topics(self.topic, timeout=timeout).topics.get(self.topic)
            if topic is None or topic.error is not None:
                return None
            left = max(0.1, deadline - time.monotonic())  # one deadline for both requests
            described = held[0].describe_consumer_groups([self.group], request_timeout=left)
            group = described[self.group].result(timeout=max(0.1, deadline - time.monotonic()))
            return unheld_partitions(self.topic, set(topic.partitions), group)
        except (KafkaException, concurrent.futures.TimeoutError) as exc:
            logger.info("cannot describe group %s on %s: %s", self.group, self.topic, exc)
            return None
        finally:  # as fresh_ends: librdkafka's destroy can wait for a broker that is away
            bounded(held.clear, CLOSE_SECONDS, "letting go of the assignment check's client")

    def joined(self) -> bool:
        """Whether the consumer is a member of the group now (it has a member id)."""
        try:
            return bool(self._consumer.memberid())
        except (KafkaException, RuntimeError):
            return False

    def renew(self) -> None:
        """Leave the group and join it again with a new consumer (the group learner's stall guard:
        it checkpointed and dropped every shard first; the new consumer's assignment restores
        them). The old consumer is closed as :meth:`close` does."""
        listener = self.listener
        self.close()
        self._next.clear()
        self._consumer = self._subscribed()
        self.listener = listener

    def close(self) -> None:
        """Leave the group, for up to ``CLOSE_SECONDS`` (best effort: every shard was
        checkpointed and released before; a failure here, e.g. after the broker went away, is
        logged, not raised). The listener is detached first, so the revoke that the close runs
        only unassigns; ``Consumer.close()`` can then run on a bounded thread (it once waited
        for good after a broker stall, holding a learner's exit on SIGTERM)."""
        self.listener = None
        try:
            bounded(self._consumer.close, CLOSE_SECONDS, f"leaving the group on {self.topic}")
        except KafkaException as exc:
            logger.warning("closing the group member of %s: %s", self.topic, exc)


def unheld_partitions(topic: str, partitions: set[int], group: Any) -> set[int] | None:
    """Of ``partitions`` (of ``topic``), those that no member of ``group`` (confluent-kafka's
    ``ConsumerGroupDescription``) holds; None unless the group is stable with members whose
    assignments the broker described (as kafka-python's :func:`~streambayes.runtime.kafka.
    kafka_python.unheld_partitions` reads its answer).

    >>> from types import SimpleNamespace as NS
    >>> member = NS(assignment=NS(topic_partitions=[TopicPartition("t", 1)]))
    >>> group = NS(state=ConsumerGroupState.STABLE,
    ...            members=[member, NS(assignment=NS(topic_partitions=[]))])
    >>> unheld_partitions("t", {0, 1}, group)
    {0}
    >>> group.members[1].assignment = None; print(unheld_partitions("t", {0, 1}, group))
    None
    >>> group.state = ConsumerGroupState.PREPARING_REBALANCING
    >>> print(unheld_partitions("t", {0, 1}, group))
    None
    """
    if not partitions or group.state != ConsumerGroupState.STABLE or not group.members:
        return None
    left = set(partitions)
    for member in group.members:
        assignment = getattr(member, "assignment", None)
        if assignment is None:  # not described: unclear
            return None
        for tp in getattr(assignment, "topic_partitions", None) or []:
            if tp.topic == topic:
                left.discard(tp.partition)
    return left
