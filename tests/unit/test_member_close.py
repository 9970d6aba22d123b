"""Leaving the consumer group is best effort: the learner checkpointed before it closes, so a
client error while leaving (a revoke callback or a LeaveGroup after the broker went away) is
logged, and the learner still exits 0 (CI once saw exit 1 after broker restarts)."""

from __future__ import annotations

import logging

import pytest


class _Failing:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self.calls = 0

    def close(self, **kwargs) -> None:
        self.calls += 1
        raise self.exc


def test_kafka_python_member_close_logs_a_client_error(caplog):
    from kafka.errors import KafkaConnectionError

    from streambayes.runtime.kafka.member_kafka_python import MemberSource

    member = object.__new__(MemberSource)
    member.topic, member._consumer = "t", _Failing(KafkaConnectionError("111 ECONNREFUSED"))
    with caplog.at_level(logging.WARNING):
        member.close()
    assert member._consumer.calls == 1
    assert "closing the group member of t" in caplog.text and "ECONNREFUSED" in caplog.text


def test_confluent_member_close_logs_a_client_error(caplog):
    import confluent_kafka

    from streambayes.runtime.kafka.member_confluent import MemberSource

    member = object.__new__(MemberSource)
    error = confluent_kafka.KafkaException(confluent_kafka.KafkaError(confluent_kafka.KafkaError._TRANSPORT))
    member.topic, member._consumer = "t", _Failing(error)
    with caplog.at_level(logging.WARNING):
        member.close()
    assert member._consumer.calls == 1
    assert "closing the group member of t" in caplog.text


def test_a_programming_error_in_close_is_not_swallowed():
    from streambayes.runtime.kafka.member_kafka_python import MemberSource

    member = object.__new__(MemberSource)
    member.topic, member._consumer = "t", _Failing(AttributeError("bug"))
    with pytest.raises(AttributeError):
        member.close()


class _Message:
    def __init__(self, partition: int, offset: int) -> None:
        self.topic, self.partition, self.offset = "t", partition, offset
        self.key, self.value, self.timestamp = None, b"{}", 0


class _Consumer:
    """What the member source asks of kafka-python's consumer: the client's assignment, polls
    with nothing, and seeks (recorded)."""

    def __init__(self, held: set[int]) -> None:
        self.held, self.seeks = held, []

    def assignment(self):
        from kafka import TopicPartition

        return {TopicPartition("t", p) for p in self.held}

    def poll(self, timeout_ms=0, max_records=None):
        from kafka import TopicPartition

        return {TopicPartition("t", p): [_Message(p, 200 + i) for i in range(2)]
                for p in sorted(self.held)}

    def seek(self, tp, offset):
        self.seeks.append((tp.partition, offset))

    def seek_to_beginning(self, tp):
        self.seeks.append((tp.partition, 0))


class _Listener:
    def __init__(self) -> None:
        self.calls = []

    def assigned(self, partitions):
        self.calls.append(("assigned", list(partitions)))
        return {p: 100 + p for p in partitions}

    def lost(self, partitions):
        self.calls.append(("lost", list(partitions)))


def _member(held: set[int], owned: set[int]):
    import threading

    from streambayes.runtime.kafka.member_kafka_python import MemberSource
    from streambayes.runtime.retry import Backoff

    member = object.__new__(MemberSource)
    member.topic, member._consumer, member.listener = "t", _Consumer(held), _Listener()
    member._next, member._owned, member._in_callback, member._failure = {}, set(owned), False, None
    member._backoff = Backoff(stop=threading.Event())
    return member


def test_a_partition_the_client_holds_unannounced_is_taken_on():
    """Found on a real broker (kafka-python, after restarts and a stall): a partition no listener
    held stood still for good, and the group learners never caught up."""
    member = _member(held={0, 1}, owned={1})
    records = member.poll(10)
    assert member.listener.calls == [("assigned", [0])]
    assert member._consumer.seeks == [(0, 100)] and member._owned == {0, 1}
    # what the client read of partition 0 from where it stood (200) is not learned: the seek
    # to the shard's offset (100) reads it again, else records 100-199 would be skipped for good
    assert [(r.partition, r.offset) for r in records] == [(1, 200), (1, 201)]
    assert member._next == {1: 202}
    member.poll(10)
    assert len(member.listener.calls) == 1  # nothing more to do


def test_a_partition_the_client_gave_up_unannounced_is_dropped():
    member = _member(held={1}, owned={0, 1})
    member.poll(10)
    assert member.listener.calls == [("lost", [0])] and member._owned == {1}


def test_the_confluent_lag_commit_never_blocks():
    """librdkafka's synchronous commit can block for good (after a broker stall both group
    learners stood still): the best-effort commit for lag monitoring is asynchronous."""
    from streambayes.runtime.kafka.confluent import commit_for_lag

    calls = []

    class Consumer:
        def commit(self, offsets=None, asynchronous=True):
            calls.append(([(tp.partition, tp.offset) for tp in offsets], asynchronous))

    commit_for_lag(Consumer(), "t", {"t": {"0": 5, "1": 7}}, owned={1})
    assert calls == [([(1, 7)], True)]


def test_a_confluent_member_whose_close_hangs_is_left_behind(monkeypatch):
    """After a broker stall librdkafka's Consumer.close() waited for good and a learner ignored
    SIGTERM (CI, stop 19): the close now gets CLOSE_SECONDS on a thread, with the listener
    detached first (every shard was checkpointed and released before the close)."""
    import threading
    import time

    from streambayes.runtime.kafka import bounded
    from streambayes.runtime.kafka.member_confluent import MemberSource

    gate = threading.Event()

    class _Hanging:
        def close(self) -> None:
            gate.wait(30)

    monkeypatch.setattr(bounded, "CLOSE_SECONDS", 0.2)
    monkeypatch.setattr("streambayes.runtime.kafka.member_confluent.CLOSE_SECONDS", 0.2)
    member = object.__new__(MemberSource)
    member.topic, member._consumer, member.listener = "t", _Hanging(), object()
    start = time.monotonic()
    member.close()
    assert time.monotonic() - start < 2.0 and member.listener is None
    gate.set()


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name):
        return lambda *args, **kwargs: self.calls.append((name, args))


def test_a_replaced_confluent_consumer_no_longer_reaches_the_learner():
    """The stall guard replaces a consumer whose close may hang and end later: a revoke, loss or
    assignment that this old consumer reports then must not touch the learner's shards."""
    from confluent_kafka import TopicPartition

    from streambayes.runtime.kafka.member_confluent import MemberSource

    member = object.__new__(MemberSource)
    old, new, learner = _Recorder(), _Recorder(), _Recorder()
    member.topic, member._consumer, member.listener, member._next = "t", new, learner, {0: 5}
    tps = [TopicPartition("t", 0)]
    member._on_lost(old, tps)
    member._on_revoke(old, tps)
    member._on_assign(old, tps)
    assert learner.calls == [] and member._next == {0: 5} and new.calls == []
    assert [name for name, _ in old.calls] == ["incremental_unassign", "incremental_unassign",
                                              "incremental_assign"]
    member._on_lost(new, tps)  # the current one still does
    assert learner.calls == [("lost", ([0],))] and member._next == {}


def test_a_replaced_kafka_python_consumer_no_longer_reaches_the_learner():
    from kafka import TopicPartition

    from streambayes.runtime.kafka.member_kafka_python import MemberSource, _Listener

    member = object.__new__(MemberSource)
    learner = _Recorder()
    member.topic, member.listener, member._next, member._owned = "t", learner, {0: 5}, {0}
    member._in_callback, member._failure = False, None
    old = _Listener(member)
    old.consumer, member._consumer = object(), object()
    old.on_partitions_lost([TopicPartition("t", 0)])
    old.on_partitions_revoked([TopicPartition("t", 0)])
    assert learner.calls == [] and member._next == {0: 5} and member._owned == {0}
    current = _Listener(member)
    current.consumer = member._consumer
    current.on_partitions_lost([TopicPartition("t", 0)])
    assert learner.calls == [("lost", ([0],))] and member._next == {} and member._owned == set()


def test_a_kafka_python_selector_closed_while_leaving_is_logged(caplog):
    from streambayes.runtime.kafka.member_kafka_python import MemberSource

    member = object.__new__(MemberSource)
    member.topic, member._consumer = "t", _Failing(RuntimeError("NetworkSelector closed!"))
    with caplog.at_level(logging.WARNING):
        member.close()
    assert "NetworkSelector closed!" in caplog.text


@pytest.mark.parametrize(("state", "joined"), [("UNJOINED", False), ("REBALANCING", True),
                                               ("STABLE", True), (None, True)])
def test_kafka_python_membership_reads_its_coordinators_state(state, joined):
    """kafka-python's member states are plain strings ('<unjoined>'), not an enum: the stall
    guard's 'not in the group' once never held for that client (a review found it)."""
    from types import SimpleNamespace

    from kafka.coordinator.base import MemberState

    from streambayes.runtime.kafka.member_kafka_python import MemberSource

    member = object.__new__(MemberSource)
    coordinator = SimpleNamespace(state=getattr(MemberState, state)) if state else None
    member._consumer = SimpleNamespace(_coordinator=coordinator)
    assert member.joined() is joined


def test_confluent_membership_is_a_member_id():
    from types import SimpleNamespace

    from confluent_kafka import KafkaError, KafkaException

    from streambayes.runtime.kafka.member_confluent import MemberSource

    member = object.__new__(MemberSource)
    member._consumer = SimpleNamespace(memberid=lambda: "rdkafka-1")
    assert member.joined()
    member._consumer = SimpleNamespace(memberid=lambda: None)
    assert not member.joined()

    def gone():
        raise RuntimeError("Consumer closed")
    member._consumer = SimpleNamespace(memberid=gone)
    assert not member.joined()
    member._consumer = SimpleNamespace(memberid=lambda: (_ for _ in ()).throw(
        KafkaException(KafkaError(KafkaError._TRANSPORT))))
    assert not member.joined()


class _Closable:
    def __init__(self) -> None:
        self.closed = 0

    def close(self, **kwargs) -> None:
        self.closed += 1


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_renew_closes_the_old_consumer_forgets_its_positions_and_keeps_the_listener(client,
                                                                                  monkeypatch):
    """The stall guard's renewal: the old consumer is closed (its listener detached first, so
    its revoke reaches no shard), what it knew of positions and partitions is forgotten, and the
    new consumer reports to the same learner."""
    if client == "kafka-python":
        from streambayes.runtime.kafka.member_kafka_python import MemberSource
    else:
        from streambayes.runtime.kafka.member_confluent import MemberSource
    old, new, learner, seen = _Closable(), object(), object(), []
    member = object.__new__(MemberSource)
    member.topic, member._consumer, member.listener, member._next = "t", old, learner, {0: 5}
    member._owned = {0}

    def subscribed():
        seen.append(member.listener)  # the old one was closed with no listener on it
        return new
    monkeypatch.setattr(member, "_subscribed", subscribed)
    member.renew()
    assert old.closed == 1 and seen == [None]
    assert member._consumer is new and member.listener is learner and member._next == {}
    if client == "kafka-python":
        assert member._owned == set()


def test_kafka_python_fetch_positions_read_its_subscription_state():
    from types import SimpleNamespace

    from kafka import TopicPartition
    from kafka.consumer.subscription_state import TopicPartitionState
    from kafka.structs import OffsetAndMetadata

    from streambayes.runtime.kafka.member_kafka_python import MemberSource

    valid, missing, other = TopicPartitionState(), TopicPartitionState(), TopicPartitionState()
    valid.seek(OffsetAndMetadata(42, "", -1))
    other.seek(OffsetAndMetadata(7, "", -1))
    member = object.__new__(MemberSource)
    member.topic = "t"
    member._consumer = SimpleNamespace(_subscription=SimpleNamespace(assignment={
        TopicPartition("t", 0): valid, TopicPartition("t", 1): missing,
        TopicPartition("u", 0): other}))
    assert member.fetch_positions() == {0: 42}
    member._consumer = SimpleNamespace()  # another shape: unknown, not an error
    assert member.fetch_positions() == {}


def test_kafka_python_fetch_blocked_says_why_its_fetcher_skips_a_partition():
    from types import SimpleNamespace

    from kafka import TopicPartition
    from kafka.consumer.subscription_state import TopicPartitionState
    from kafka.future import Future
    from kafka.structs import OffsetAndMetadata

    from streambayes.runtime.kafka.member_kafka_python import MemberSource

    def state(position=None, pending=False, paused=False, new_leader_epoch=None):
        s = TopicPartitionState()
        if position is not None:  # fetched under leader epoch 1
            s.seek(OffsetAndMetadata(position, "", 1))
        s.mark_pending_revocation(pending)
        s.paused = paused
        if new_leader_epoch is not None:  # the leader changed since: validate before fetching
            assert s.maybe_validate_position(new_leader_epoch)
        return s

    leaders = {0: 1, 1: 1, 2: -1, 3: 2, 4: 1, 5: 1}
    assignment = {TopicPartition("t", 0): state(5), TopicPartition("t", 1): state(None, pending=True),
                  TopicPartition("t", 2): state(5), TopicPartition("t", 3): state(5),
                  TopicPartition("t", 4): state(None, paused=True),
                  TopicPartition("t", 5): state(5, new_leader_epoch=3),
                  TopicPartition("u", 0): state(None)}
    cluster = SimpleNamespace(leader_for_partition=lambda tp: leaders.get(tp.partition))
    fetcher = SimpleNamespace(_manager=SimpleNamespace(cluster=cluster),
                              _nodes_with_pending_fetch_requests={2}, _fetch_futures=[])
    member = object.__new__(MemberSource)
    member.topic = "t"
    member._consumer = SimpleNamespace(_fetcher=fetcher,
                                       _subscription=SimpleNamespace(assignment=assignment))
    assert member.fetch_blocked() == {  # 1: pending revocation (a rebalance), not held
        2: "no leader known", 3: "a fetch to node 2 marked pending, none in flight",
        4: "paused, no fetch position", 5: "awaiting offset validation"}
    fetcher._fetch_futures = [Future()]  # a fetch in flight: node 2's mark is not stale
    assert 3 not in member.fetch_blocked()
    member._consumer = SimpleNamespace()  # another shape: unknown, not an error
    assert member.fetch_blocked() == {}


def test_kafka_python_eager_rebalance_in_flight_takes_no_partition_back():
    """An eager rebalance revokes every partition (the listener drops their shards) and keeps
    them in the client's assignment, pending revocation, until the JoinGroup completes; the polls
    meanwhile return nothing. The member must not take them on again as 'held by the client'."""
    import threading
    from types import SimpleNamespace

    from kafka import TopicPartition
    from kafka.consumer.subscription_state import SubscriptionState
    from kafka.structs import OffsetAndMetadata

    from streambayes.runtime.kafka.member_kafka_python import MemberSource, _Listener
    from streambayes.runtime.retry import Backoff

    sub = SubscriptionState()
    sub.subscribe(topics=["t"])
    sub.assign_from_subscribed([TopicPartition("t", 0), TopicPartition("t", 1)])
    for p in (0, 1):
        sub.seek(TopicPartition("t", p), OffsetAndMetadata(10, "", -1))
    calls = []
    learner = SimpleNamespace(assigned=lambda ps: (calls.append(("assigned", ps)), {})[1],
                              revoked=lambda ps: calls.append(("revoked", ps)),
                              lost=lambda ps: calls.append(("lost", ps)))
    consumer = SimpleNamespace(_subscription=sub, assignment=sub.assigned_partitions,
                               poll=lambda timeout_ms=0, max_records=None: {},
                               highwater=lambda tp: 40, seek=lambda tp, offset: None,
                               seek_to_beginning=lambda tp: None)
    member = object.__new__(MemberSource)
    member.topic, member._consumer, member.listener = "t", consumer, learner
    member._next, member._owned, member._in_callback, member._failure = {}, {0, 1}, False, None
    member._backoff = Backoff(stop=threading.Event())
    revoked = set(sub.assigned_partitions())  # as kafka-python's join-prepare does it, eagerly
    sub.mark_pending_revocation(revoked)
    _Listener(member).on_partitions_revoked(revoked)
    assert member.poll(10) == [] and member.poll(10) == []  # the JoinGroup still in flight
    assert [(what, sorted(ps)) for what, ps in calls] == [("revoked", [0, 1])]
    assert member._owned == set()
    assert member.known_ends() == {} and member.fetch_blocked() == {}
    sub.assign_from_subscribed([TopicPartition("t", 1)])  # the join completes: [1] is its own
    assert member._held() == {1} and member.known_ends() == {1: 40}


def test_kafka_python_group_source_forgets_partitions_revoked_by_an_eager_rebalance_at_once():
    """The predictors' GroupSource: once an eager rebalance has revoked a partition (kept in the
    client's assignment, pending revocation, while the JoinGroup is in flight), its position is
    another member's; seen as a flaky integration test (``test_a_group_member_forgets_...``)."""
    import threading
    from collections import deque
    from types import SimpleNamespace

    from kafka import TopicPartition
    from kafka.consumer.subscription_state import SubscriptionState

    from streambayes.runtime.kafka.kafka_python import GroupSource
    from streambayes.runtime.retry import Backoff

    sub = SubscriptionState()
    sub.subscribe(topics=["t"])
    sub.assign_from_subscribed([TopicPartition("t", 0), TopicPartition("t", 1)])
    source = object.__new__(GroupSource)
    source.topic, source.stop, source._watch, source._idle_since = "t", threading.Event(), False, None
    source.clock = lambda: 0.0
    source._consumer = SimpleNamespace(_subscription=sub, assignment=sub.assigned_partitions,
                                       poll=lambda timeout_ms=0, max_records=None: {})
    source._next, source._backoff = {0: 12, 1: 30}, Backoff(stop=source.stop)
    source._resets, source._deleted = deque(), 0
    source.poll(10)
    assert source.positions() == {"t": {"0": 12, "1": 30}}
    sub.mark_pending_revocation({TopicPartition("t", 0), TopicPartition("t", 1)})
    source.poll(10)  # the JoinGroup in flight: neither is this member's now
    assert source.positions() == {"t": {}}
