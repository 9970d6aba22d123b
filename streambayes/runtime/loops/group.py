"""Group-managed learners (DESIGN §4, scale-out): one state shard per partition, moved by rebalances.

``streambayes learn`` on a Kafka topic without ``--partitions`` joins the consumer group (the
cooperative-sticky assignor with confluent-kafka, the eager range assignor with kafka-python: see
:mod:`~streambayes.runtime.kafka.member_kafka_python`). Each partition the member owns has its
own learner and next offset: a *shard*, stored in ``store.child("partition-<topic>-<p>")``. The
broker's rebalances move shards between members, so learners can be added, killed and restarted,
and partitions added, with no manual re-sharding:

- **assigned** partitions: each shard is restored from its child store (newest good snapshot) and
  the consumer is sought to its next offset (a partition with no snapshot yet: its beginning);
- **revoked** partitions: their shards are checkpointed, then dropped (the new owner restores
  them from the store);
- **lost** partitions (this member was evicted: it may no longer be the owner): dropped without a
  write; the new owner re-learns from the last checkpoint.

A checkpoint (:meth:`GroupLearner.checkpoint`, the one function owning the order) flushes the
dead-letter sink, writes each dirty shard's snapshot, then commits the shards' offsets to the
group (lag monitoring only: the snapshots are the truth). With ``--exactly-once`` each shard's
dead letters and snapshot are one Kafka transaction of the shard's own producer, made (fencing
the shard's previous writer) before the shard is restored
(:mod:`~streambayes.runtime.loops.learn_exactly_once`). Each shard's state reflects exactly the
records before its stored offset, so the merge of all shards (what ``predict`` serves, see
:func:`~streambayes.runtime.loops.shards.expand_shards`) equals one learner of the whole topic.

A member whose consumer is wedged is renewed by the *stall guard*. Seen after a broker stall with
both clients: no records for good, while the consumer's last fetched end offsets said it was
caught up. With confluent-kafka 2.16 the debug log showed why: a metadata response after the
stall made librdkafka decommission the one broker, the partition leader, and the client never
found a broker again (no coordinator, no fetch). When a held partition has had no record for
``stall_seconds`` (``STREAMBAYES_KAFKA_STALL_SECONDS``, default 60; 0 turns it off) while the
member's polls come back short (a backlogged member's polls are full: a partition waiting behind
another one's records is not stalled), or no partition has been held that long, a new short-lived
client (confluent: an admin client's ListOffsets; kafka-python: a consumer without a group) asks
the broker for the end offsets of the quiet partitions. The consumer is stalled when an end is
past both the shard's next offset and the end the consumer last fetched (one partition is enough:
with several brokers, a dropped one stops only its own partitions), or, with kafka-python, when
the consumer's own fetch position stays below an end it has fetched (seen in CI after broker
restarts: the highwater current, the position still, no record for minutes), or, with
kafka-python, when its fetcher skips the partition (paused, no position, awaiting validation,
no leader, a fetch marked pending with none in flight) while records lie
past its position, or when it holds no partition and is not a member of the group while the
broker answers. Each look is logged (INFO) with what it saw of each quiet partition. A second look
:data:`RECHECK_SECONDS` later that finds the same partition still short of the end the first
look saw makes the learner checkpoint and drop every shard and join the group again with a new
consumer, whose assignment restores the shards from those snapshots (exact, as after any
rebalance). While renewals bring no record, the wait before the next look doubles (up to
:data:`MAX_GUARD_WAIT` times ``stall_seconds``). An idle topic, an idle member of a group with
more members than partitions, a broker that does not answer, a look that fails, and a loop held
longer than ``stall_seconds`` by its own work (a long checkpoint or restore) renew nothing. A
kafka-python consumer whose fetch position for an idle partition is past the shard's next offset
(it moved past records the learner never got, also seen after broker restarts) is sought back to
the shard's offset instead, once for each such position (a gap of transaction markers or aborted
records comes back the same and is left alone).

The same guard also looks at the group every ``stall_seconds``: a new short-lived admin client
describes the group, and the partitions of the topic that no member of the stable group holds are
noted (seen once with kafka-python's cooperative protocol: the group Stable, one member given
``[]``, the other ``[1]``, partition 0 unread for good, a case the stall looks cannot see, since
neither member has a partition to be quiet). When the next look finds some of the same partitions
still held by nobody, the learner checkpoints its shards and joins again with a new consumer, as
for a stall; the rebalance that makes assigns every partition. Every member looks, so any that
sees it may renew. While such renewals do not cure it, the wait before the next look doubles (up
to :data:`MAX_GUARD_WAIT` times ``stall_seconds``; a look that finds every partition held starts
over). A group that is not stable, a member whose assignment the broker does not describe, a
broker that does not answer, and a static member (``group.instance.id``: its joining again would
not rebalance) renew nothing. Partitions just added to the topic, and those a cooperative
rebalance hands over, are held by nobody for a few seconds: with the default 60 s two looks do
not both land in such a window unless the group keeps changing.

Before writing a shard, the learner checks that the shard's newest snapshot is still the one it
restored or wrote; if another member wrote it since (this member lost the partition for a while
without being told), it restores the shard from that snapshot and reads on from its offset instead
of overwriting it: every snapshot written is a state and the offset it reflects, so either is
exact.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from streambayes.errors import BrokerError, NetworkUnavailable, UsageError
from streambayes.runtime.loops.checkpoint import checkpoint_in_order
from streambayes.runtime.loops.learn import IDLE_POLL_SECONDS, LearnLoop, LearnStats
from streambayes.runtime.loops.skipped import offset_jumps
from streambayes.runtime.records.decode import Decoder
from streambayes.runtime.records.sinks import Sink
from streambayes.runtime.records.sources import Positions, Record
from streambayes.snapshot.store import BaseSnapshotStore, SnapshotInfo

logger = logging.getLogger(__name__)
SHARD_PREFIX = "partition-"
RECHECK_SECONDS = 5.0  # the stall guard's second look, after a first one found a stall
MAX_GUARD_WAIT = 16  # renewals that bring no record: the wait doubles up to this many stall_seconds


def shard_name(topic: str, partition: int) -> str:
    """The child store name of a partition's shard.

    >>> shard_name("events", 3)
    'partition-events-3'
    """
    return f"{SHARD_PREFIX}{topic}-{partition}"


class MemberSource(Protocol):
    """A consumer-group member that tells a :class:`Rebalance` listener about its partitions."""

    topic: str
    listener: Rebalance | None

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]: ...

    def commit(self, positions: Mapping[str, Mapping[str, int]]) -> None: ...

    def seek(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        """Read the named partitions (held ones) on from the given offsets."""

    def known_ends(self) -> dict[int, int]:
        """End offsets of the held partitions as the consumer's last fetches saw them."""

    def fetch_positions(self) -> dict[int, int]:
        """Optional: where the consumer fetches each held partition next (past transaction
        markers and aborted batches), when the client says so reliably ({}: unknown)."""

    def fetch_blocked(self) -> dict[int, str]:
        """Optional: the held partitions the consumer skips when it fetches now, with why
        (kafka-python: paused, no position, awaiting validation, ...; {}: none or unknown)."""

    def fresh_ends(self, partitions: list[int]) -> dict[int, int] | None:
        """End offsets of ``partitions`` a new client gets from the broker now (None: no
        answer)."""

    def unheld(self) -> set[int] | None:
        """Optional: the topic's partitions that no member of the (stable) group holds, as a
        new client finds them now (None: not clear, or no answer)."""

    def joined(self) -> bool:
        """Whether the consumer is a member of the group now."""

    def renew(self) -> None:
        """Leave the group and join it again with a new consumer."""

    def close(self) -> None: ...


class Rebalance(Protocol):
    """What a member source calls, from inside its poll, when its partitions change."""

    def assigned(self, partitions: Sequence[int]) -> dict[int, int | None]:
        """Take on ``partitions``; their next offsets (None: from the beginning)."""

    def revoked(self, partitions: Sequence[int]) -> None:
        """Give up ``partitions`` cleanly (checkpoint them first)."""

    def lost(self, partitions: Sequence[int]) -> None:
        """Forget ``partitions`` at once (another member may own them already)."""


class PartitionView:
    """The :class:`~streambayes.runtime.records.sources.Source` a shard's :class:`LearnLoop`
    sees: one partition's next offset (the group learner polls the real consumer)."""

    def __init__(self, topic: str, partition: int,
                 starts: Callable[[list[int]], dict[int, int] | None] | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.assigned = [partition]  # the partitions this view reads
        self.next: int | None = None  # None: nothing read or restored yet
        self._starts = starts  # the member's log_starts, if its client has one

    def log_starts(self, partitions: list[int]) -> dict[int, int] | None:
        """Where the partitions now begin, as the member's client says (None: unknown)."""
        return None if self._starts is None else self._starts(partitions)

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        return []

    def positions(self) -> Positions:
        return {} if self.next is None else {self.topic: {str(self.partition): self.next}}

    def seek(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        offset = positions.get(self.topic, {}).get(str(self.partition))
        self.next = None if offset is None else int(offset)

    def close(self) -> None:
        pass


@dataclass
class Shard:
    """One partition's learner, its position, and the newest snapshot id it knows of its store."""

    loop: LearnLoop
    view: PartitionView
    last_id: str | None
    unsaved: int = 0  # records read since this shard's last checkpoint


class GroupLearner:
    """Learn ``source``'s topic shard by shard; ``source.listener`` is set to this object."""

    def __init__(self, source: MemberSource, decoder: Decoder, store: BaseSnapshotStore,
                 make_model: Callable[[], Any], model_name: str | None, *,
                 dead_letters: tuple[Sink, str] | None = None, every: int = 10_000,
                 every_seconds: float = 60.0, batch_size: int = 1000,
                 stop: threading.Event | None = None, config: Mapping[str, Any] | None = None,
                 clock: Callable[[], float] = time.monotonic, calibrate: bool = True,
                 observer: Any = None, shard_parts: Callable[[Any], tuple[Any, Any]] | None = None,
                 stall_seconds: float = 60.0) -> None:
        if every < 1 or batch_size < 1 or every_seconds <= 0 or stall_seconds < 0:
            raise UsageError("--every, --every-seconds and the batch size must be positive, "
                             "the stall guard's seconds >= 0")
        if store.ids():
            raise UsageError(f"{store} holds the snapshots of one learner of all partitions; a "
                             "group learner keeps one shard per partition: give a new --snapshots "
                             "directory, or --partitions to keep learning with static assignment")
        self.source, self.decoder, self.store = source, decoder, store
        self.make_model, self.model_name = make_model, model_name
        self.dead_letters = dead_letters
        self.every, self.every_seconds, self.batch_size = every, every_seconds, batch_size
        self.stop = stop or threading.Event()
        self.config, self.clock, self.calibrate = dict(config or {}), clock, calibrate
        self.topic = source.topic
        self.observer = observer  # an Observer shared by the shards (None: none)
        # learn --exactly-once: child store -> (its transactional store, its dead-letter buffer)
        self.shard_parts = shard_parts
        self.shards: dict[int, Shard] = {}
        self.stats = LearnStats()
        self._since = 0  # records read since the last periodic checkpoint
        self.stall_seconds = stall_seconds  # the stall guard (see the module); 0: off
        self._fed_at: dict[int, float] = {}  # held partition -> when it last had records
        self._empty_since: float | None = clock()  # since when no shard is held (None: held)
        self._look_at = -float("inf")  # the guard looks no sooner than this
        self._suspect: dict[int, int] = {}  # what a first look found behind: partition -> its end
        self._short_at = -float("inf")  # when a poll last returned fewer records than it asked
        self._guarded_at = clock()  # when the guard last ran (a longer gap: the loop was held)
        self._guard_wait = stall_seconds  # after a renewal: doubles while renewals bring nothing
        self._reread: dict[int, tuple[int, int]] = {}  # partition -> (next, position) sought back
        self._deleted_upto: dict[int, int] = {}  # deleted offsets reported, shared by the shards
        self.renewals = 0  # consumers the guard replaced
        self._unheld_at = clock() + stall_seconds  # the next look at the group's assignment
        self._unheld: set[int] = set()  # the partitions the last look found held by no member
        self._unheld_wait = stall_seconds  # after a renewal for them: doubles until none is found
        source.listener = self

    # -- the Rebalance listener -----------------------------------------------------------------
    def assigned(self, partitions: Sequence[int]) -> dict[int, int | None]:
        offsets: dict[int, int | None] = {}
        parts = self._fence([p for p in sorted(partitions) if p not in self.shards])
        try:
            for p in sorted(partitions):
                if p not in self.shards:
                    self.shards[p] = self._restore(p, parts.pop(p, None))
                offsets[p] = self.shards[p].view.next
                self._fed_at[p] = self.clock()  # a new assignment: its first fetch may take a while
        finally:
            for child, _dead in parts.values():  # not restored (one failed): closed
                child.release()
        if partitions:
            self._empty_since, self._suspect = None, {}
        logger.info("assigned %s[%s] at %s", self.topic, ",".join(map(str, sorted(partitions))),
                    offsets)
        return offsets

    def revoked(self, partitions: Sequence[int]) -> None:
        held = [p for p in sorted(partitions) if p in self.shards]
        try:
            self.checkpoint(held)
        finally:
            for p in held:
                if p in self.shards:  # a shard another member wrote was dropped by the checkpoint
                    self._drop(p)
        logger.info("revoked %s[%s]: checkpointed and dropped", self.topic,
                    ",".join(map(str, held)))

    def lost(self, partitions: Sequence[int]) -> None:
        for p in sorted(partitions):
            shard = self.shards.get(p)
            if shard is None:
                continue
            if shard.unsaved:
                logger.warning("lost %s[%d] with %d records not checkpointed; its new owner "
                               "learns them again from the shard's last snapshot (exactly once)",
                               self.topic, p, shard.unsaved)
            self._drop(p)

    def _fence(self, partitions: Sequence[int]) -> dict[int, tuple[Any, Any]]:
        """``--exactly-once``: each shard's transactional store and letter buffer, made (which
        fences the shard's previous writer) for all of ``partitions`` first, then one strict
        read of the state topic (:meth:`~.learn_exactly_once.TransactionalStore.settle`): the
        read waits for every transaction open below the topic's end, and those of shards this
        member is taking over are aborted by then, not waited out. {} without the flag."""
        parts: dict[int, tuple[Any, Any]] = {}
        if self.shard_parts is None or not partitions:
            return parts
        try:
            for p in partitions:
                parts[p] = self.shard_parts(self.store.child(shard_name(self.topic, p)))
            next(iter(parts.values()))[0].settle()  # the shards share one state topic
        except BaseException:
            for child, _dead in parts.values():
                child.release()
            raise
        return parts

    def _restore(self, partition: int, parts: tuple[Any, Any] | None = None) -> Shard:
        """The shard of ``partition`` from its newest snapshot; ``parts``: its transactional
        store and letter buffer, already fenced and settled (:meth:`_fence`; made here if
        None)."""
        self._fed_at[partition] = self.clock()  # the stall guard counts from here
        view = PartitionView(self.topic, partition, getattr(self.source, "log_starts", None))
        child: Any = self.store.child(shard_name(self.topic, partition))
        dead = self.dead_letters
        if parts is None and self.shard_parts is not None:
            parts = self._fence([partition])[partition]
        if parts is not None:
            child, dead = parts
        loop = LearnLoop(view, self.decoder, child, self.make_model, self.model_name,
                         dead_letters=dead, batch_size=self.batch_size,
                         stop=self.stop, config=self.config, clock=self.clock,
                         calibrate=self.calibrate, observer=self.observer)
        loop.deleted_upto = self._deleted_upto  # a shard restored again reports nothing twice
        try:
            loop.restore()
        except BaseException:
            release = getattr(child, "release", None)  # its transactional producer, if any
            if release is not None:
                release()
            raise
        self.model_name = loop.model_name  # every later shard must hold the same model
        return Shard(loop, view, loop.stats.restored)

    def _drop(self, partition: int) -> None:
        shard = self.shards.pop(partition)
        if shard.loop.skipped.pending:  # not asked about here (a rebalance is under way)
            logger.info("%s[%d]: %d offset jumps let go unasked (the partition was dropped)",
                        self.topic, partition, len(shard.loop.skipped.pending))
        self._fed_at.pop(partition, None)
        if not self.shards:  # the stall guard counts from here
            self._empty_since = self.clock()
        _add(self.stats, shard.loop.stats)
        _release(shard)

    # -- learning ---------------------------------------------------------------------------------
    def run(self) -> LearnStats:
        """Poll and learn until ``stop`` is set; then checkpoint every dirty shard."""
        start = last = self.clock()
        logger.info("joining the group on %s (shards in %s)", self.topic, self.store)
        try:
            while not self.stop.is_set():
                want = self._want()
                records = self.source.poll(want, timeout=IDLE_POLL_SECONDS)
                if len(records) < want:  # the consumer had no more to give (not a backlog)
                    self._short_at = self.clock()
                self.learn(records)
                self._guard()
                if self._since and (self._since >= self.every
                                    or self.clock() - last >= self.every_seconds):
                    self.checkpoint()
                    last = self.clock()
                if self.observer is not None:
                    self.observer.tick()
            for shard in self.shards.values():
                shard.loop.check_skipped(force=True)
            self.checkpoint()
        except BrokerError as exc:
            unsaved = sum(s.unsaved for s in self.shards.values())
            if not unsaved:
                raise
            raise BrokerError(f"{' '.join(str(exc).split())}; the {unsaved} records read since "
                              "the last checkpoint are not saved: a restart learns them again "
                              "from there (exactly once)") from exc
        finally:
            for shard in self.shards.values():  # their transactional producers, if any
                _release(shard)
        for p in list(self.shards):
            _add(self.stats, self.shards[p].loop.stats)
        self.stats.seconds = self.clock() - start
        return self.stats

    def _guard(self) -> None:
        """The stall guard (see the module): due when a held shard has had no record for
        ``stall_seconds`` while the polls come back short, or no shard has been held that long;
        then a new client asks the broker (:meth:`_stalled`), and a second look that finds the same
        partition still short of the end the first look saw renews the consumer."""
        if not self.stall_seconds or self.stop.is_set():
            return
        try:
            self._look()
            self._look_at_group()
        finally:  # the guard's own time (a look waits some seconds for the broker) is no hold
            self._guarded_at = self.clock()

    def _look_at_group(self) -> None:
        """Every ``stall_seconds``, ask the broker which partitions no member of the (stable)
        group holds (the source's ``unheld``); when the next look finds some of the same ones
        still held by nobody, join the group again (:meth:`_renew`): the rebalance that makes
        assigns every partition. Seen once with kafka-python's cooperative protocol (a member
        given ``[]``, the other ``[1]``, partition 0 unread for good); the same look covers any
        assignor or client that leaves one out."""
        now = self.clock()
        ask = getattr(self.source, "unheld", None)
        if ask is None or now < self._unheld_at:
            return
        self._unheld_at = now + self.stall_seconds
        try:
            answer = ask()
        except Exception as exc:  # noqa: BLE001 (advice, as the stall guard's looks)
            logger.warning("the stall guard of %s could not describe the group: %s: %s",
                           self.topic, type(exc).__name__, exc)
            answer = None
        if answer is not None and not answer:  # every partition held: a renewal, if any, worked
            self._unheld_wait = self.stall_seconds
        found = set(answer or ())
        again, self._unheld = found & self._unheld, found
        if found and not again:
            logger.warning("%s: partitions %s are held by no member of the group; if they still "
                           "are at the next look in %.0f s, this member joins the group again",
                           self.topic, sorted(found), self.stall_seconds)
        elif again:
            self._unheld = set()
            self._renew(f"partitions {sorted(again)} were held by no member of the group at two "
                        f"looks {self.stall_seconds:.0f} s apart")
            # its own backoff: the member's other partitions may well bring records meanwhile
            self._unheld_at = self.clock() + self._unheld_wait
            self._unheld_wait = min(2 * self._unheld_wait, MAX_GUARD_WAIT * self.stall_seconds)

    def _look(self) -> None:
        now = self.clock()
        if now - self._guarded_at > self.stall_seconds:  # the loop itself was held (a long
            for p in self._fed_at:  # checkpoint or restore): what it did not poll for is no stall
                self._fed_at[p] = now
            self._suspect = {}
            return
        if now < self._look_at:
            return
        if self.shards:
            # idle: no record for stall_seconds, and a poll came back short since then and lately
            # (a wedged consumer's polls are empty; a backlogged one's full, and a partition
            # waiting behind another's records is not idle)
            recent = now - RECHECK_SECONDS
            quiet = {p: now - self._fed_at.get(p, now) for p in self.shards}
            idle = sorted(p for p, s in quiet.items() if s >= self.stall_seconds
                          and self._short_at >= max(self._fed_at.get(p, now), recent))
            silent = max(quiet.values())
            due = bool(idle)
        else:
            if self._empty_since is None:
                self._empty_since = now
            idle, silent = [], now - self._empty_since
            due = silent >= self.stall_seconds
        if not due:  # records come in: a first look is void
            self._suspect = {}
            return
        try:
            positions = self._optional("fetch_positions") if idle else {}
            if self._reread_skipped(idle, positions, now):
                self._suspect, self._look_at = {}, now + self.stall_seconds
                return
            behind = self._stalled(idle, positions)
        except Exception as exc:  # noqa: BLE001 (the guard is advice: a look that fails is no answer)
            logger.warning("the stall guard of %s could not ask the broker: %s: %s", self.topic,
                           type(exc).__name__, exc)
            behind = None
        if not behind:
            self._suspect, self._look_at = {}, now + self.stall_seconds
            return
        # a second look renews for a partition the first one found behind that has not reached
        # the end seen then (another partition behind now, or one that moved on, starts over)
        confirmed = [why for p, (end, why) in behind.items() if p in self._suspect and
                     (p not in self.shards or (self.shards[p].view.next or 0) < self._suspect[p])]
        if not confirmed:
            self._suspect = {p: end for p, (end, _why) in behind.items()}
            self._look_at = now + RECHECK_SECONDS
            return
        self._renew(f"no record for {silent:.0f} s and {'; '.join(confirmed)}: the consumer is "
                    "not fetching")

    def _reread_skipped(self, idle: list[int], positions: dict[int, int], now: float) -> bool:
        """Seek back the idle partitions whose consumer fetch position is past the shard's next
        offset: it moved past records the learner never got (seen with kafka-python after broker
        restarts: its position at the end, the shard thousands of records behind, no record for
        minutes). Once for each (next offset, position): a gap of transaction markers or aborted
        records only comes back the same, and is left alone then. True when it sought."""
        skipped = {}
        for p in idle:
            nxt, at = self.shards[p].view.next, positions.get(p)
            if nxt is not None and at is not None and at > nxt and self._reread.get(p) != (nxt, at):
                skipped[p] = (nxt, at)
        if not skipped:
            return False
        logger.warning("%s: no record for %.0f s and the consumer stands past the shard's next "
                       "offset (%s): reading again from the shards' offsets", self.topic,
                       now - min(self._fed_at.get(p, now) for p in skipped),
                       "; ".join(f"[{p}] next {nxt}, position {at}" for p, (nxt, at) in
                                 sorted(skipped.items())))
        self.source.seek({self.topic: {str(p): nxt for p, (nxt, _at) in skipped.items()}})
        for p, pair in skipped.items():
            self._reread[p] = pair
            self._fed_at[p] = now  # a whole wait again before the next look at it
        return True

    def _optional(self, name: str) -> dict:
        """The source's optional :class:`MemberSource` call ``name`` (``fetch_positions``,
        ``fetch_blocked``); {} for a source without it."""
        ask = getattr(self.source, name, None)
        return ask() if ask is not None else {}

    def _stalled(self, idle: list[int], positions: dict[int, int]
                 ) -> dict[int, tuple[int, str]] | None:
        """What is wrong, or None: each idle held partition whose end at the broker is past both
        the shard's next offset and the end the consumer last fetched (it is not fetching), with
        that end and why; or (key ``-1``) no partition held and no membership while the broker
        answers (it cannot rejoin)."""
        fresh = self.source.fresh_ends(idle)
        if fresh is None:  # the broker does not answer: the consumer waits for it as it should
            return None
        if not self.shards:
            joined = self.source.joined()
            logger.info("the stall guard of %s: no partition held for %.0f s, %s", self.topic,
                        self.clock() - (self._empty_since or self.clock()),
                        "a member of the group" if joined else "not in the group")
            return None if joined else {-1: (0, "no partition held and not in the group")}
        fetched = self.source.known_ends()
        blocked = self._optional("fetch_blocked")
        behind, seen = {}, []
        for p in idle:
            end, nxt, last = fresh.get(p, -1), self.shards[p].view.next or 0, fetched.get(p, -1)
            at = positions.get(p)
            if end > max(nxt, last):  # the consumer does not know of the records
                behind[p] = (end, f"[{p}] next {nxt}, last fetched end {last}, end now {end}")
            elif at is not None and end > max(nxt, at) and last > at:  # it knows and stays put
                behind[p] = (end, f"[{p}] next {nxt}, the consumer's fetch position {at} below "
                                  f"its last fetched end {last}, end now {end}")
            elif p in blocked and end > max(nxt, -1 if at is None else at):  # it will not fetch
                behind[p] = (end, f"[{p}] next {nxt}, end now {end}, the consumer does not fetch "
                                  f"it ({blocked[p]})")
            seen.append(f"[{p}] next {nxt}, last fetched end {last}, fetch position "
                        f"{'unknown' if at is None else at}, end now {end}"
                        f"{f', not fetched ({blocked[p]})' if p in blocked else ''}"
                        f"{' (behind)' if p in behind else ''}")
        logger.info("the stall guard of %s looked at the quiet partitions: %s", self.topic,
                    "; ".join(seen))
        return behind or None

    def _renew(self, why: str) -> None:
        """Checkpoint and drop every shard (as a revoke does), then join the group again with a
        new consumer (``why`` is logged); the next look waits twice as long as the last while
        renewals bring no record (a cluster whose group coordinator stays away is not hammered)."""
        logger.warning("%s: %s; checkpointing the shards and joining the group again with a new "
                       "consumer%s", self.topic, why,
                       "" if self._guard_wait <= self.stall_seconds else
                       f" (again without a record since the last renewal: the next look in "
                       f"{self._guard_wait:.0f} s at the soonest)")
        held = sorted(self.shards)
        self.checkpoint(held)  # keep=False: a shard another member wrote is dropped, not taken
        for p in held:
            if p in self.shards:
                self._drop(p)
        self._since = 0
        self._suspect = {}
        if self.stop.is_set():  # stopping: the shards are saved, the loop ends next
            return
        try:
            self.source.renew()
        except NetworkUnavailable:
            if self.stop.is_set():  # stopped while the new consumer was connecting
                return
            raise
        self.renewals += 1
        self._empty_since = self._guarded_at = self.clock()
        self._look_at = self._empty_since + self._guard_wait
        self._guard_wait = min(2 * self._guard_wait, MAX_GUARD_WAIT * self.stall_seconds)

    def _want(self) -> int:
        """Growing polls (1, 2, 4, ... records) while the member's shards are new, as one learner
        does; counted over all held shards (a poll may return any partition's records, so the
        newest shard alone would keep every poll at one record)."""
        total = sum(s.loop.events_total for s in self.shards.values())
        return min(self.batch_size, max(1, total))

    def learn(self, records: Sequence[Record]) -> None:
        """Learn each partition's records with its shard; records of a partition this member no
        longer holds are skipped (its new owner reads them from the shard's offset)."""
        by_partition: dict[int, list[Record]] = {}
        for r in records:
            by_partition.setdefault(r.partition, []).append(r)
        now = self.clock() if by_partition else 0.0
        for p, part in by_partition.items():
            shard = self.shards.get(p)
            if p in self._fed_at:
                self._fed_at[p] = now  # the consumer fetches it (even records learned before)
                self._guard_wait = self.stall_seconds  # a renewal, if any, worked
            if shard is None:
                logger.debug("skipped %d records of %s[%d]: not held", len(part), self.topic, p)
                continue
            nxt = shard.view.next
            if nxt is not None and part[0].offset < nxt:
                part = [r for r in part if r.offset >= nxt]  # already in the state
                if not part:
                    continue
            if nxt is not None and part[-1].offset - nxt + 1 != len(part):  # jumped (skipped.py)
                shard.loop.skipped.add(offset_jumps({p: nxt}, part, shard.loop._resumed))
            shard.loop._learn(part)
            shard.view.next = part[-1].offset + 1
            shard.unsaved += len(part)
            self._since += len(part)
        for shard in self.shards.values():  # jumps waiting (skipped.py), after every poll
            shard.loop.check_skipped()

    def checkpoint(self, partitions: Sequence[int] | None = None) -> list[SnapshotInfo]:
        """Checkpoint the dirty shards of ``partitions`` (None: all held), in this order: flush
        the dead letters, write each shard's snapshot, commit their offsets to the group."""
        chosen = sorted(self.shards) if partitions is None else sorted(partitions)
        dirty = [p for p in chosen if p in self.shards and self.shards[p].unsaved]
        if not dirty:
            return []
        infos, positions = checkpoint_in_order(
            self.dead_letters, lambda: self._save(dirty, keep=partitions is None), self._commit)
        if partitions is None:
            self._since = 0
        logger.info("checkpoint of %s[%s]: %s", self.topic, ",".join(positions),
                    ", ".join(i.id for i in infos))
        return infos

    def _save(self, partitions: Sequence[int], keep: bool = True
              ) -> tuple[list[SnapshotInfo], dict[str, int]]:
        """Write each shard's snapshot and return those written and the shards' next offsets.

        A shard another member wrote since this one restored or wrote it (this member lost the
        partition for a while without hearing of it) is not overwritten: it is restored again
        from that newest snapshot and, if ``keep`` (still held), read on from its offset. So is a
        shard whose transactional producer was fenced by another member (``--exactly-once``)."""
        from streambayes.runtime.kafka.transactions import Fenced

        infos, positions = [], {}
        for p in partitions:
            shard = self.shards[p]
            newest = (shard.loop.store.ids() or [None])[-1]
            if newest != shard.last_id:
                logger.warning("%s[%d]: shard snapshot %s was written by another learner (this "
                               "one knew %s); restoring it instead of overwriting it", self.topic,
                               p, newest, shard.last_id)
                self._reclaim(p, keep)
                continue
            try:
                info = shard.loop.save()
            except Fenced as exc:  # nothing of it committed; its letters are dropped with it
                logger.warning("%s[%d]: %s; restoring the shard's newest snapshot instead",
                               self.topic, p, exc)
                self._reclaim(p, keep)
                continue
            shard.last_id, shard.unsaved = info.id, 0
            infos.append(info)
            positions[str(p)] = shard.view.next
        self.stats.snapshots.extend(infos)
        return infos, positions

    def _reclaim(self, partition: int, keep: bool) -> None:
        """Drop a shard another learner wrote or fenced; if ``keep``, restore it from the newest
        snapshot and read on from its offset."""
        self._drop(partition)
        if keep:
            self.shards[partition] = self._restore(partition)
            self.source.seek({self.topic: {str(partition): self.shards[partition].view.next or 0}})

    def _commit(self, saved: tuple[list[SnapshotInfo], dict[str, int]]) -> None:
        if saved[1]:
            self.source.commit({self.topic: saved[1]})


def _release(shard: Shard) -> None:
    """Close a dropped or finished shard's transactional producer (``learn --exactly-once``)."""
    release = getattr(shard.loop.store, "release", None)
    if release is not None:
        release()


def _add(total: LearnStats, part: LearnStats) -> None:
    """Fold a dropped shard's counts into the member's stats (its snapshots are listed already)."""
    total.records += part.records
    total.events += part.events
    total.dead_letters.update(part.dead_letters)
    total.deleted += part.deleted
    part.records = part.events = part.deleted = 0
    part.dead_letters = Counter()


def run_group_learn(job: Any, settings: Any, stop: threading.Event | None = None) -> LearnStats:
    """``streambayes learn`` of a Kafka topic without ``--partitions``: join the group and learn
    the partitions it gives this member, one shard each (a ``LearnJob``)."""
    from streambayes.runtime.kafka.connect import open_member_source, open_sink
    from streambayes.runtime.loops.build import build_models
    from streambayes.runtime.loops.learn import _decoder
    from streambayes.runtime.loops.learn_run import _open_learn_store
    from streambayes.runtime.observe import observer_for
    from streambayes.runtime.records.limits import RecordLimits

    if job.per_key:
        raise UsageError("--per-key on a Kafka topic needs --partitions (static assignment): "
                         "per-key learners are not sharded by partition yet")
    stop = stop or threading.Event()
    name = job.model
    build_models([name or "nb"], job.network, job.label_field, job.bounds)  # checks the name
    store = _open_learn_store(job, settings)  # a directory, kafka:// or s3://
    source = open_member_source(job.source, settings, stop=stop)
    dead = open_sink(job.dead_letter, settings, stop=stop) \
        if job.dead_letter and not job.exactly_once else None
    try:
        parts = None
        if job.exactly_once:
            from streambayes.runtime.loops.learn_exactly_once import shard_parts

            parts = shard_parts(job, settings, store, stop)
        decoder = _decoder(source, job, limits=RecordLimits.from_settings(settings))
        config = {"source": job.source, "partitions": None, "label_field": job.label_field,
                  "format": decoder.format}
        with observer_for(job, "learn", source) as observer:
            learner = GroupLearner(
                source, decoder, store,
                lambda: build_models([name or "nb"], job.network, job.label_field,
                                     job.bounds)[name or "nb"],
                name, dead_letters=dead, every=job.every, every_seconds=job.every_seconds,
                batch_size=job.batch_size, stop=stop, config=config, calibrate=job.calibrate,
                observer=observer, shard_parts=parts,
                stall_seconds=settings.kafka_stall_seconds)
            return learner.run()
    finally:
        source.close()
        if dead is not None:
            dead[0].close()
