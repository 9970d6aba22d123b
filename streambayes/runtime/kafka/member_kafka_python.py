"""A consumer-group member through kafka-python (3.x), with the eager range assignor.

Not the cooperative-sticky assignor the confluent member uses: with kafka-python 3.0.12 a
cooperative rebalance after broker faults left a partition assigned to no member for good (seen in
CI, and reproduced: the group Stable, one member given ``[]``, the other ``[1]``, partition 0's
records unread), because the follow-up rebalance that hands over a revoked partition never came.
An eager rebalance revokes every partition and assigns them all again, so none can be left out;
for a learner it costs a checkpoint and a restore of the member's shards per rebalance. (A group
mixing kafka-python and confluent members therefore cannot form: both sides must share an
assignor.)

:class:`MemberSource` subscribes to one topic and tells its ``listener`` (a
:class:`~streambayes.runtime.loops.group.Rebalance`, the group learner) which partitions it gains,
gives up and loses. The listener runs inside ``poll`` on the client's I/O thread: it may write
snapshots and flush a producer, and the positions it returns are sought there (a seek only changes
the subscription state); the offset commit made from inside it is asynchronous, because a blocking
consumer call on that thread is refused by kafka-python.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from kafka import KafkaAdminClient, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.base import MemberState
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from streambayes.runtime.kafka.bounded import CLOSE_SECONDS
from streambayes.runtime.kafka.kafka_python import (
    _BOOTSTRAP_MS,
    _CONNECT_ERRORS,
    _poll,
    admin_options,
    client_of,
    held_partitions,
    known_ends,
    log_starts,
    new_consumer,
    unheld_partitions,
)
from streambayes.runtime.records.sources import Record
from streambayes.runtime.retry import Backoff, retrying

logger = logging.getLogger(__name__)
FRESH_SECONDS = 5.0  # for the end offsets of the stall guard


class _Listener(ConsumerRebalanceListener):
    """Tells ``source`` of its consumer's rebalances; nothing once the stall guard replaced that
    consumer (a close of it that ends later must not touch the learner's shards)."""

    def __init__(self, source: MemberSource) -> None:
        self.source = source
        self.consumer: Any = None  # the consumer it listens to (set once it is made)

    def _current(self) -> bool:
        return self.consumer is None or self.consumer is self.source._consumer

    def on_partitions_assigned(self, assigned: Any) -> None:
        if self._current():
            self.source._assigned([tp.partition for tp in assigned
                                   if tp.topic == self.source.topic])

    def on_partitions_revoked(self, revoked: Any) -> None:
        if self._current():
            self.source._call("revoked", [tp.partition for tp in revoked
                                          if tp.topic == self.source.topic])

    def on_partitions_lost(self, lost: Any) -> None:
        if self._current():
            self.source._call("lost", [tp.partition for tp in lost
                                       if tp.topic == self.source.topic])


class MemberSource:
    """Records of ``topic`` for the partitions the group gives this member (see the module)."""

    def __init__(self, bootstrap: str, topic: str, *, group: str,
                 options: Mapping[str, Any] | None = None,
                 stop: threading.Event | None = None, refresh_seconds: float = 5.0) -> None:
        self.topic = topic
        self.group = group
        self.stop = stop or threading.Event()
        self.listener: Any = None  # a Rebalance; set before the first poll
        kwargs = dict(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest",
                      partition_assignment_strategy=(RangePartitionAssignor,),
                      metadata_max_age_ms=int(refresh_seconds * 1000), **dict(options or {}))
        kwargs.setdefault("bootstrap_timeout_ms", _BOOTSTRAP_MS)
        self._kwargs = kwargs
        self._consumer = self._subscribed()
        self._next: dict[int, int] = {}
        self._owned: set[int] = set()  # the partitions the listener was given and holds
        self._in_callback = False
        self._failure: BaseException | None = None  # a listener's error, raised by the next poll
        self._backoff = Backoff(stop=self.stop)

    def _subscribed(self) -> Any:
        consumer = retrying(lambda: new_consumer(**self._kwargs),
                            f"connect to {self._kwargs['bootstrap_servers']}", _CONNECT_ERRORS,
                            self.stop)
        listener = _Listener(self)
        consumer.subscribe([self.topic], listener=listener)
        listener.consumer = consumer
        return consumer

    def _call(self, what: str, partitions: list[int]) -> Any:
        if self.listener is None or not partitions:
            return {}
        self._in_callback = True
        try:
            return getattr(self.listener, what)(partitions)
        except BaseException as exc:  # kafka-python wraps it in a KafkaError: raised by poll
            self._failure = exc
            raise
        finally:
            self._in_callback = False
            if what != "assigned":
                self._owned.difference_update(partitions)
                for p in partitions:
                    self._next.pop(p, None)

    def _assigned(self, partitions: list[int]) -> None:
        offsets = self._call("assigned", partitions)
        self._owned.update(partitions)
        for p in partitions:
            tp = TopicPartition(self.topic, p)
            if offsets.get(p) is None:
                self._consumer.seek_to_beginning(tp)
            else:
                self._consumer.seek(tp, offsets[p])

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        records = _poll(self._consumer, max_records, timeout, self.topic, self._next,
                        self._backoff)
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
        changed = self._reconcile()
        if changed:  # read from where the client stood, not from the shard's offset: dropped
            records = [r for r in records if r.partition not in changed]
        return records

    def _reconcile(self) -> set[int]:
        """Make the listener's partitions those the client holds, and return the partitions
        changed. Found on a real broker: after broker restarts and a stall, a member fetched a
        partition its listener had never been given (or had been told was lost), and the
        partition stood still for good. The records this poll returned for such a partition
        are dropped (they were read from where the client stood); the seek of ``assigned``
        reads them again from the shard's offset."""
        if self.listener is None:
            return set()
        held = self._held()
        gone, new = sorted(self._owned - held), sorted(held - self._owned)
        try:
            if gone:
                logger.warning("%s[%s]: no longer held by the client, which did not say so: "
                               "dropping their shards", self.topic, ",".join(map(str, gone)))
                self._call("lost", gone)
            if new:
                logger.warning("%s[%s]: held by the client, which did not say so: taking them on",
                               self.topic, ",".join(map(str, new)))
                for p in new:
                    self._next.pop(p, None)
                self._assigned(new)
        finally:
            self._failure = None  # raised here directly, not again by the next poll
        return {*gone, *new}

    def _held(self) -> set[int]:
        """The partitions the client holds, less those pending revocation (:func:`held_partitions`:
        an eager rebalance has revoked them, and the listener dropped their shards)."""
        return held_partitions(self._consumer, self.topic)

    def seek(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        """Read the named partitions this member holds on from the given offsets."""
        held = {tp.partition for tp in self._consumer.assignment()}
        for p, offset in positions.get(self.topic, {}).items():
            if int(p) in held:
                self._consumer.seek(TopicPartition(self.topic, int(p)), int(offset))

    def commit(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        """Commit ``positions`` for lag monitoring (best effort; asynchronous inside a rebalance
        callback)."""
        offsets = {TopicPartition(self.topic, int(p)): OffsetAndMetadata(int(off), "", -1)
                   for p, off in positions.get(self.topic, {}).items()}
        if not offsets:
            return
        try:
            if self._in_callback:
                self._consumer.commit_async(offsets)
            else:
                self._consumer.commit(offsets)
        except KafkaError as exc:
            logger.warning("offset commit for lag monitoring failed: %s", exc)

    def positions(self) -> dict[str, dict[str, int]]:
        """{topic: {partition: next offset}} of the partitions held and read."""
        return {self.topic: {str(p): off for p, off in sorted(self._next.items())}}

    def known_ends(self) -> dict[int, int]:
        """:func:`~streambayes.runtime.kafka.kafka_python.known_ends` of the consumer: the held
        partitions' ends as its last fetches saw them, less those pending revocation."""
        return known_ends(self._consumer, self.topic)

    def log_starts(self, partitions: list[int]) -> dict[int, int] | None:
        """:func:`~streambayes.runtime.kafka.kafka_python.log_starts` of ``partitions`` (a shard
        resuming from its snapshot)."""
        return log_starts(self._consumer, self.topic, partitions)

    def fetch_positions(self) -> dict[int, int]:
        """Where the consumer fetches each held partition next, from its subscription state
        (past transaction markers and aborted batches; kafka-python has no call that does not
        wait for the broker); {} if that internal shape changes (the stall guard then reads the
        fetched ends only)."""
        try:
            states = list(self._consumer._subscription.assignment.items())
            return {tp.partition: int(state.position.offset) for tp, state in states
                    if tp.topic == self.topic and state.has_valid_position}
        except (AttributeError, TypeError, ValueError):
            return {}

    def fetch_blocked(self) -> dict[int, str]:
        """The held partitions the consumer's fetcher skips now, with why (kafka-python's
        subscription state and fetcher: paused, no fetch position, awaiting offset validation, no
        leader known, a fetch to the leader marked pending while no fetch at all is in flight);
        {} if those internal shapes change. The stall guard counts such a quiet partition with
        records past it as stalled. Not a partition pending revocation: during an eager
        rebalance that is every partition, and none is held (:meth:`_held`). The leader is
        where it fetches unless a rack-aware preferred replica was given (``client_rack``)."""
        try:
            fetcher = self._consumer._fetcher
            cluster = fetcher._manager.cluster
            pending = set(fetcher._nodes_with_pending_fetch_requests)
            in_flight = any(not f.is_done for f in list(fetcher._fetch_futures))
            out = {}
            for tp, state in list(self._consumer._subscription.assignment.items()):
                if tp.topic != self.topic or state._pending_revocation:
                    continue
                why = [name for name, on in (
                    ("paused", state.paused),
                    ("no fetch position", not state.has_valid_position),
                    ("awaiting offset validation", state.awaiting_validation))
                    if on]
                leader = cluster.leader_for_partition(tp)
                if leader is None or leader == -1:
                    why.append("no leader known")
                elif leader in pending and not in_flight:
                    why.append(f"a fetch to node {leader} marked pending, none in flight")
                if why:
                    out[tp.partition] = ", ".join(why)
            return out
        except (AttributeError, TypeError, ValueError, RuntimeError):
            return {}

    def fresh_ends(self, partitions: list[int], timeout: float = FRESH_SECONDS
                   ) -> dict[int, int] | None:
        """End offsets of ``partitions`` as a new, short-lived client gets them from the broker
        now ({} for none: the broker answered), or None when it does not answer in ``timeout``
        s. Not this member's consumer: the stall guard asks because that one may be wedged."""
        options = {k: v for k, v in self._kwargs.items()
                   if k not in ("group_id", "partition_assignment_strategy")}
        try:
            probe = new_consumer(**options)
        except _CONNECT_ERRORS as exc:
            logger.info("the broker did not give the end offsets of %s: %s", self.topic, exc)
            return None
        try:
            tps = [TopicPartition(self.topic, p) for p in partitions]
            ends = probe.end_offsets(tps, timeout_ms=int(timeout * 1000)) if tps else {}
            return {tp.partition: end for tp, end in ends.items()}
        except KafkaError as exc:
            logger.info("the broker did not give the end offsets of %s: %s", self.topic, exc)
            return None
        finally:
            try:
                probe.close(autocommit=False, timeout_ms=int(FRESH_SECONDS * 1000))
            except (KafkaError, OSError, RuntimeError) as exc:
                logger.info("closing the stall guard's client: %s", exc)

    def unheld(self) -> set[int] | None:
        """The partitions of the topic that no member of the (stable) group holds, as a new,
        short-lived admin client finds them now (:func:`unheld_partitions`); None when that is not
        clear, the broker does not answer, or this member is static (its joining again would not
        make the group rebalance)."""
        if self._kwargs.get("group_instance_id") is not None:
            return None
        admin = None
        try:
            admin = client_of(KafkaAdminClient, **admin_options(self._kwargs))
            topics = admin.describe_topics([self.topic])
            group = admin.describe_groups([self.group]).get(self.group)
            return unheld_partitions(self.topic, topics, group)
        except Exception as exc:  # noqa: BLE001 (a check: no answer is no answer)
            logger.info("cannot describe group %s on %s: %s", self.group, self.topic, exc)
            return None
        finally:
            if admin is not None:
                try:
                    admin.close()
                except Exception as exc:  # noqa: BLE001
                    logger.debug("closing the assignment check's client: %s", exc)

    def joined(self) -> bool:
        """Whether the consumer is in the group or joining it (kafka-python has no public call:
        its coordinator's state, ``MemberState.UNJOINED`` only when it is not, compared as
        kafka-python compares it: the states are plain strings there, ``'<unjoined>'``; no state
        at all is taken as joined, so the stall guard then never renews an idle member)."""
        coordinator = getattr(self._consumer, "_coordinator", None)
        state = getattr(coordinator, "state", None)
        return state is None or state != MemberState.UNJOINED

    def renew(self) -> None:
        """Leave the group and join it again with a new consumer (the group learner's stall guard:
        it checkpointed and dropped every shard first; the new consumer's assignment restores
        them)."""
        listener = self.listener
        self.close()
        self._next.clear()
        self._owned.clear()
        self._consumer = self._subscribed()
        self.listener = listener

    def close(self) -> None:
        """Leave the group (best effort: the state was checkpointed before; a revoke callback's
        failure here, e.g. after the broker went away, is logged, not raised)."""
        self.listener = None  # every shard was checkpointed and released: nothing left to do
        try:
            self._consumer.close(autocommit=False, timeout_ms=int(CLOSE_SECONDS * 1000))
        except (KafkaError, OSError, RuntimeError) as exc:  # e.g. "NetworkSelector closed!"
            logger.warning("closing the group member of %s: %s", self.topic, exc)
