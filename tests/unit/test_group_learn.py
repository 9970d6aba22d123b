"""Group-managed learners: one state shard per partition, checkpointed on revoke, restored on
assign, merged by the predictor; scripted rebalances against in-memory partitions and stores."""

import json
import logging
import threading

import pytest

from streambayes.devtools.kills import state_difference
from streambayes.errors import UsageError
from streambayes.models import make_model
from streambayes.runtime.loops.group import GroupLearner, shard_name
from streambayes.runtime.loops.learn import LearnLoop
from streambayes.runtime.loops.predict import ModelWatcher
from streambayes.runtime.loops.shards import expand_shards, latest_all, merge_snapshots
from streambayes.runtime.records.decode import Decoder
from streambayes.runtime.records.sinks import MemorySink
from streambayes.runtime.records.sources import MemorySource, Record
from streambayes.snapshot.store import MemorySnapshotStore

TOPIC = "ev"


def event(p: int, i: int) -> bytes:
    label = "spam" if (i * 7 + p) % 3 == 0 else "ham"
    words = f"w{i % 7} w{(i * 3 + p) % 11} {label[0]}x{i % 5}"
    if i % 17 == 5:
        return b"{not json"  # a dead letter: counted in the offsets, not in the state
    return json.dumps({"id": f"{p}-{i}", "label": label, "text": words}).encode()


class FakeGroup:
    """Partitions of one topic and a coordinator that hands rebalance callbacks to members,
    which deliver them inside their next poll (as both Kafka clients do)."""

    def __init__(self, sizes: dict[int, int]) -> None:
        self.partitions = {p: [event(p, i) for i in range(n)] for p, n in sizes.items()}
        self.log: list[str] = []

    def add_partition(self, p: int, n: int) -> None:
        self.partitions[p] = [event(p, i) for i in range(n)]


class FakeMember:
    def __init__(self, group: FakeGroup, name: str) -> None:
        self.group, self.name, self.topic = group, name, TOPIC
        self.listener = None
        self.next: dict[int, int] = {}
        self.pending: list[tuple[str, list[int]]] = []
        self.committed: dict[int, int] = {}

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        while self.pending:
            what, parts = self.pending.pop(0)
            result = getattr(self.listener, what)(parts)
            if what == "assigned":
                for p in parts:
                    self.next[p] = result[p] or 0  # None: the beginning
            else:
                for p in parts:
                    del self.next[p]
        out = []
        for p in sorted(self.next):
            items = self.group.partitions[p]
            start = self.next[p]
            stop = min(len(items), start + max_records)  # up to max_records per partition
            out += [Record(items[o], None, TOPIC, p, o) for o in range(start, stop)]
            self.next[p] = stop
        return out

    def seek(self, positions) -> None:
        self.next.update({int(p): o for p, o in positions[TOPIC].items() if int(p) in self.next})

    def commit(self, positions) -> None:
        self.group.log.append(f"commit {self.name} {sorted(positions[TOPIC].items())}")
        self.committed.update({int(p): o for p, o in positions[TOPIC].items()})

    def close(self) -> None:
        pass


class LoggingSink(MemorySink):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    def flush(self) -> None:
        self.log.append("flush")
        super().flush()


def learner(member: FakeMember, store, sink=None, **kw) -> GroupLearner:
    return GroupLearner(member, Decoder("jsonl"), store, lambda: make_model("nb"), "nb",
                        dead_letters=(sink, "dlq") if sink is not None else None,
                        every=10**9, every_seconds=10**9, batch_size=kw.pop("batch_size", 13),
                        calibrate=False, **kw)


def drive(gl: GroupLearner, member: FakeMember, polls: int, n: int = 13) -> None:
    for _ in range(polls):
        gl.learn(member.poll(n))


def reference_state(group: FakeGroup):
    """One uninterrupted learner of every record of every partition."""
    records = [r for p in sorted(group.partitions) for r in group.partitions[p]]
    loop = LearnLoop(MemorySource({"all": records}), Decoder("jsonl"), MemorySnapshotStore(),
                     lambda: make_model("nb"), "nb", calibrate=False)
    loop.run()
    loop.model.refit_alpha()  # alpha="auto": the merge of the shards refits on the merged counts
    return loop.model.to_state(), loop.events_total


def merged(store):
    snaps = latest_all(expand_shards([store]))
    assert snaps is not None
    return merge_snapshots(snaps)


def test_revoke_checkpoints_in_order_then_drops_and_assign_restores_and_seeks():
    group, store = FakeGroup({0: 40, 1: 40}), MemorySnapshotStore()
    a = FakeMember(group, "a")
    gl = learner(a, store, LoggingSink(group.log))
    a.pending.append(("assigned", [0, 1]))
    drive(gl, a, 1)  # 13 records of each partition
    assert sorted(gl.shards) == [0, 1] and store.children() == []

    class Checked(FakeMember):
        def commit(self, positions):  # the snapshot is durable before the offsets are committed
            assert store.child(shard_name(TOPIC, 1)).latest().positions == {TOPIC: {"1": 13}}
            super().commit(positions)

    a.__class__ = Checked
    a.pending.append(("revoked", [1]))
    drive(gl, a, 1)
    assert sorted(gl.shards) == [0]
    assert group.log == ["flush", "commit a [('1', 13)]"]
    snap = store.child(shard_name(TOPIC, 1)).latest()
    assert snap.events == sum(1 for i in range(13) if i % 17 != 5) == 12
    assert store.children() == [shard_name(TOPIC, 1)]  # partition 0 not checkpointed yet

    b = FakeMember(group, "b")
    gb = learner(b, store)
    b.pending.append(("assigned", [1]))
    records = b.poll(5)
    assert [(r.partition, r.offset) for r in records] == [(1, o) for o in range(13, 18)]
    assert gb.shards[1].loop.events_total == 12 and gb.shards[1].last_id == snap.id


def test_lost_partitions_are_dropped_without_a_write():
    group, store = FakeGroup({0: 30}), MemorySnapshotStore()
    a = FakeMember(group, "a")
    gl = learner(a, store)
    a.pending.append(("assigned", [0]))
    drive(gl, a, 1)
    a.pending.append(("lost", [0]))
    drive(gl, a, 1)
    assert gl.shards == {} and store.children() == [] and a.committed == {}


def test_a_shard_written_by_another_member_is_restored_from_it_not_overwritten():
    group, store = FakeGroup({0: 60}), MemorySnapshotStore()
    a, b = FakeMember(group, "a"), FakeMember(group, "b")
    ga, gb = learner(a, store), learner(b, store)
    a.pending.append(("assigned", [0]))
    drive(ga, a, 1)  # a learns 13 records, then is evicted without hearing of it
    b.pending.append(("assigned", [0]))
    drive(gb, b, 3)
    gb.checkpoint()
    written = store.child(shard_name(TOPIC, 0)).ids()
    assert ga.checkpoint() == []
    assert store.child(shard_name(TOPIC, 0)).ids() == written
    assert ga.shards[0].view.next == a.next[0] == 39 and ga.shards[0].loop.events_total == 37
    drive(ga, a, 1)  # a reads on from b's snapshot: its next checkpoint extends it exactly
    assert [i.id for i in ga.checkpoint()] == ["000002"]


def test_a_revoked_shard_another_member_wrote_is_dropped_once():
    """The revoke's checkpoint finds the shard written by its new owner: it is dropped there, not
    written over, and the revoke must not drop it a second time (a KeyError in the callback)."""
    group, store = FakeGroup({0: 60}), MemorySnapshotStore()
    a, b = FakeMember(group, "a"), FakeMember(group, "b")
    ga, gb = learner(a, store), learner(b, store)
    a.pending.append(("assigned", [0]))
    drive(ga, a, 1)
    b.pending.append(("assigned", [0]))
    drive(gb, b, 3)
    gb.checkpoint()
    a.pending.append(("revoked", [0]))  # a hears only now that it lost partition 0
    drive(ga, a, 1)
    assert ga.shards == {} and store.child(shard_name(TOPIC, 0)).ids() == ["000001"]


def test_records_already_in_a_shard_are_not_learned_again():
    group, store = FakeGroup({0: 30}), MemorySnapshotStore()
    a = FakeMember(group, "a")
    gl = learner(a, store)
    a.pending.append(("assigned", [0]))
    drive(gl, a, 1)
    a.next[0] = 5  # the client hands out records the shard holds already
    drive(gl, a, 3)
    gl.checkpoint()
    assert gl.shards[0].loop.events_total == 30 - 2  # offsets 5 and 22 are dead letters


def test_scripted_reassignment_kill_and_new_partition_give_exact_counts():
    """Join, a kill (no revoke), a restart and a partition added: merged state == one learner."""
    group, store = FakeGroup({0: 57, 1: 41, 2: 66, 3: 23}), MemorySnapshotStore()
    a = FakeMember(group, "a")
    ga = learner(a, store)
    a.pending.append(("assigned", [0, 1, 2, 3]))
    drive(ga, a, 3)
    ga.checkpoint()
    drive(ga, a, 2)  # learned, not checkpointed: lost with the kill below
    b = FakeMember(group, "b")  # joins: a gives up 2 and 3 (cooperative: a keeps 0 and 1)
    gb = learner(b, store)
    a.pending.append(("revoked", [2, 3]))
    drive(ga, a, 1)
    b.pending.append(("assigned", [2, 3]))
    drive(gb, b, 2)
    drive(ga, a, 1)
    del ga, a  # kill -9: no revoke, no checkpoint
    b.pending.append(("assigned", [0, 1]))
    drive(gb, b, 2)
    gb.checkpoint()
    c = FakeMember(group, "c")  # restarted member takes 1 back, and the new partition 4
    gc = learner(c, store)
    b.pending.append(("revoked", [1]))
    drive(gb, b, 1)
    group.add_partition(4, 35)
    c.pending.append(("assigned", [1, 4]))
    drive(gc, c, 20)
    drive(gb, b, 20)
    gb.checkpoint()
    gc.checkpoint()
    state, events = reference_state(group)
    result = merged(store)
    assert result.positions == {TOPIC: {str(p): len(v) for p, v in group.partitions.items()}}
    assert result.events == events == sum(1 for p, v in group.partitions.items()
                                          for i in range(len(v)) if i % 17 != 5)
    assert state_difference(result.model.to_state(), state)[0] is None


def test_run_checkpoints_every_dirty_shard_on_stop_and_the_predictor_serves_the_merge():
    group, store = FakeGroup({0: 20, 1: 31}), MemorySnapshotStore()
    stop = threading.Event()

    class Stopping(FakeMember):
        def poll(self, max_records=500, timeout=0.0):
            out = super().poll(max_records, timeout)
            if not out and not self.pending:
                stop.set()
            return out

    a = Stopping(group, "a")
    gl = learner(a, store, stop=stop)
    a.pending.append(("assigned", [0, 1]))
    stats = gl.run()
    assert stats.records == 51 and stats.events == 51 - 3
    assert sorted(s.id for s in stats.snapshots) == ["000001", "000001"]
    watcher = ModelWatcher([store])
    assert watcher.check()
    assert watcher.current.events == 48 and watcher.current.positions == {
        TOPIC: {"0": 20, "1": 31}}
    assert len(watcher.current.ids) == 2


def test_a_directory_of_one_learner_is_refused():
    store = MemorySnapshotStore()
    store.write(make_model("nb").to_state(), model="nb", positions={TOPIC: {"0": 1}}, events=1)
    with pytest.raises(UsageError, match="--partitions"):
        learner(FakeMember(FakeGroup({0: 1}), "a"), store)


def test_snapshot_merge_of_a_group_directory_merges_its_shards(tmp_path, capsys):
    from streambayes.cli import main
    from streambayes.snapshot import SnapshotStore

    group, store = FakeGroup({0: 20, 1: 31}), SnapshotStore(tmp_path / "group")
    a = FakeMember(group, "a")
    gl = learner(a, store)
    a.pending.append(("assigned", [0, 1]))
    drive(gl, a, 3)
    gl.checkpoint()
    assert main(["snapshot", "merge", str(tmp_path / "group"), "--to", str(tmp_path / "one")]) == 0
    one = SnapshotStore(tmp_path / "one").latest()
    assert one.events == 48 and one.positions == {TOPIC: {"0": 20, "1": 31}}
    assert len(one.config["merged_from"]) == 2


def test_per_key_on_a_topic_without_partitions_is_refused_before_connecting(tmp_path):
    from streambayes.config import Settings
    from streambayes.runtime.loops.learn import LearnJob
    from streambayes.runtime.loops.learn_run import run_learn

    job = LearnJob(source="kafka://127.0.0.1:1/t", snapshots=tmp_path / "s", per_key=True)
    with pytest.raises(UsageError, match="needs --partitions"):
        run_learn(job, Settings())


def test_the_predictor_finds_a_shard_added_later_at_its_next_check():
    group, store = FakeGroup({0: 20}), MemorySnapshotStore()
    a = FakeMember(group, "a")
    gl = learner(a, store)
    a.pending.append(("assigned", [0]))
    drive(gl, a, 2)
    gl.checkpoint()
    watcher = ModelWatcher([store])
    assert watcher.check() and watcher.current.events == 19  # offset 5 is a dead letter
    group.add_partition(1, 10)
    a.pending.append(("assigned", [1]))
    drive(gl, a, 1)
    gl.checkpoint()
    assert watcher.check() and watcher.current.events == 19 + 9
    assert watcher.current.positions == {TOPIC: {"0": 20, "1": 10}}


def test_snapshot_ls_and_show_of_a_group_directory_list_its_shards(tmp_path, capsys):
    from streambayes.cli import main
    from streambayes.snapshot import SnapshotStore

    group, store = FakeGroup({0: 20, 1: 31}), SnapshotStore(tmp_path / "group")
    a = FakeMember(group, "a")
    gl = learner(a, store)
    a.pending.append(("assigned", [0, 1]))
    drive(gl, a, 3)
    gl.checkpoint()
    capsys.readouterr()
    assert main(["snapshot", "ls", str(tmp_path / "group")]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == [f"{shard_name(TOPIC, 0)}/000001",
                                                    f"{shard_name(TOPIC, 1)}/000001"]
    assert main(["snapshot", "show", str(tmp_path / "group")]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {k: v["events"] for k, v in shown.items()} == {shard_name(TOPIC, 0): 19,
                                                         shard_name(TOPIC, 1): 29}


class Stalling(FakeMember):
    """A member whose consumer can stop fetching (``stuck``: polls return nothing and its fetched
    ends stand still) while the broker's ends (``fresh_ends``) keep what the partitions hold; the
    clock moves one second a poll, ``script`` maps a poll number to an action, and the run stops
    at poll ``last``."""

    def __init__(self, group, clock, stop, script, last=300):
        super().__init__(group, "a")
        self.clock, self.stop, self.script, self.last = clock, stop, script, last
        self.polls, self.stuck, self.answer, self.member = 0, False, True, True
        self.stuck_parts: set[int] = set()  # partitions it does not fetch (the others it does)
        self.fetched: dict[int, int] = {}
        self.looks: list[float] = []
        self.renewed: list[float] = []

    def poll(self, max_records=500, timeout=0.0):
        self.polls += 1
        self.clock[0] += 1.0
        self.script.get(self.polls, lambda m: None)(self)
        if self.polls >= self.last:
            self.stop.set()
        if self.stuck:
            return []
        hidden = {p: self.next.pop(p) for p in self.stuck_parts if p in self.next}
        out = super().poll(max_records, timeout)
        self.fetched.update({p: len(self.group.partitions[p]) for p in self.next})
        self.next.update(hidden)
        return out

    def known_ends(self):
        return dict(self.fetched)

    def fresh_ends(self, partitions):
        assert set(partitions) <= set(self.next)  # idle ones of the held partitions
        self.looks.append(self.clock[0])
        if not self.answer:
            return None
        return {p: len(self.group.partitions[p]) for p in partitions}

    def joined(self):
        return self.member

    def renew(self):
        self.renewed.append(self.clock[0])
        self.stuck, self.fetched, self.member, self.stuck_parts = False, {}, True, set()
        self.pending.append(("assigned", sorted(self.group.partitions)))
        self.next = {}


def grow(m, n=30):
    for p in m.group.partitions:
        m.group.partitions[p] += [event(p, i) for i in range(len(m.group.partitions[p]),
                                                             len(m.group.partitions[p]) + n)]


def stalled_run(script, last=300, stall=10.0, kind=None):
    group, store, stop, clock = FakeGroup({0: 40, 1: 25}), MemorySnapshotStore(), threading.Event(), [0.0]
    member = (kind or Stalling)(group, clock, stop, script, last)
    gl = learner(member, store, stop=stop, clock=lambda: clock[0], stall_seconds=stall)
    member.pending.append(("assigned", [0, 1]))
    gl.run()
    return gl, member, group, store


def test_a_consumer_that_stops_fetching_is_renewed_and_the_shards_stay_exact(caplog):
    def stall(m):
        grow(m)
        m.stuck = True

    gl, member, group, store = stalled_run({20: stall, 150: grow})
    # partition 1's records are all read by poll 5: looks at 15 (caught up) and 25 (behind since
    # poll 20), the second look 5 s later renews
    assert member.looks[:3] == [15.0, 25.0, 30.0] and member.renewed == [30.0]
    assert gl.renewals == 1
    assert "the consumer is not fetching" in caplog.text
    assert "[0] next 40, last fetched end 40, end now 70" in caplog.text
    state, events = reference_state(group)
    assert merged(store).events == events
    assert state_difference(merged(store).model.to_state(), state)[0] is None


def test_an_idle_topic_or_a_broker_that_does_not_answer_renews_nothing():
    gl, member, _, _ = stalled_run({})
    assert gl.renewals == 0 and member.renewed == []
    assert len(member.looks) >= 20  # it looked every 10 s: caught up, nothing to renew

    def away(m):
        grow(m)
        m.stuck, m.answer = True, False

    gl, member, _, _ = stalled_run({20: away})
    assert gl.renewals == 0 and member.renewed == [] and len(member.looks) >= 20


def test_records_between_the_two_looks_call_the_stall_off():
    def stall(m):
        grow(m)
        m.stuck = True

    def unstick(m):
        m.stuck = False

    gl, member, _, _ = stalled_run({20: stall, 28: unstick})
    assert member.looks[:3] == [15.0, 25.0, 40.0]  # behind at 25; records at 28-30 re-arm it
    assert gl.renewals == 0 and member.renewed == []


def test_a_member_that_lost_its_partitions_and_cannot_rejoin_is_renewed(caplog):
    def evicted(m):  # the session timed out during a stall; the client never joins again
        m.pending.append(("lost", [0, 1]))
        m.member = False

    gl, member, group, store = stalled_run({20: evicted, 150: grow})
    assert member.renewed == [35.0] and gl.renewals == 1  # looks at 15 (fine), 30, 35
    assert "no partition held and not in the group" in caplog.text
    state, events = reference_state(group)  # every record learned: the last ones after renewal
    assert merged(store).events == events
    assert state_difference(merged(store).model.to_state(), state)[0] is None


def test_an_idle_member_of_the_group_is_left_alone():
    def idle(m):  # more members than partitions: this one is given none, and stays a member
        m.pending.append(("revoked", [0, 1]))

    gl, member, _, _ = stalled_run({20: idle})
    assert gl.renewals == 0 and member.renewed == [] and len(member.looks) >= 20


def test_one_partition_that_stops_while_another_feeds_is_renewed():
    def stall_0(m):  # a multi-broker cluster: only the dropped broker's partitions stop
        grow(m)
        m.stuck_parts = {0}

    def feed_1(m):
        m.group.partitions[1].append(event(1, len(m.group.partitions[1])))

    script = {i: feed_1 for i in range(21, 300, 2)}
    script[20] = stall_0
    gl, member, group, store = stalled_run(script)
    # partition 0 is idle from poll 6 on: looks at 15 (caught up), 25 (behind), 30 (renewed)
    assert member.renewed == [30.0] and gl.renewals == 1
    state, events = reference_state(group)
    assert merged(store).events == events
    assert state_difference(merged(store).model.to_state(), state)[0] is None


def test_a_new_assignment_gets_the_whole_wait_before_a_look():
    def add(m):  # a partition added and assigned with a backlog; its first fetch is slow
        m.group.add_partition(2, 30)
        m.stuck_parts = {2}
        m.pending.append(("assigned", [2]))

    def fetch(m):
        m.stuck_parts = set()

    # the look at 25 comes 1 s after the assignment: only partitions 0 and 1 are idle then
    gl, member, _, _ = stalled_run({24: add, 31: fetch})
    assert member.looks[:3] == [15.0, 25.0, 35.0]
    assert gl.renewals == 0 and member.renewed == []
    assert 2 in gl.shards and gl.shards[2].view.next == 30


def test_the_stall_guard_is_off_at_zero():
    def stall(m):
        grow(m)
        m.stuck = True

    gl, member, _, _ = stalled_run({20: stall}, stall=0.0)
    assert member.looks == [] and gl.renewals == 0


def test_a_second_look_that_finds_another_partition_behind_starts_over():
    def late(p):  # a record lands on partition p just before a look; the consumer fetches it
        def hide(m):  # at the next poll (kafka-python's highwater moves only inside a poll)
            m.group.partitions[p].append(event(p, len(m.group.partitions[p])))
            m.stuck_parts = {p}
        return hide

    def show(m):
        m.stuck_parts = set()

    gl, member, _, _ = stalled_run({24: late(0), 26: show, 29: late(1), 31: show}, last=60)
    # the look at 25 finds [0] behind, the one at 30 finds [1] behind (and [0] fed at 26): each
    # partition moved on once it was fetched, so neither finding is confirmed (before, the second
    # finding renewed); at 35 neither is idle
    assert member.looks[:3] == [15.0, 25.0, 30.0]
    assert gl.renewals == 0 and member.renewed == []


def test_a_partition_waiting_behind_a_backlog_is_not_idle():
    def backlog(m):  # partition 1 always holds more than a poll takes; 0 is not fetched meanwhile
        grow(m)
        m.stuck_parts = {0}

    def feed_1(m):
        grow(m, 20)

    script = {i: feed_1 for i in range(21, 120)}
    script[20] = backlog
    gl, member, _, _ = stalled_run(script, last=120)
    assert gl.renewals == 0 and member.renewed == []  # every poll came back full: not a stall


def test_a_loop_held_longer_than_the_wait_does_not_count_the_hold_as_a_stall():
    def held(m):  # a long checkpoint or restore: no poll for 30 s; records came meanwhile
        m.clock[0] += 30.0
        grow(m)
        m.stuck_parts = {0}  # not fetched by this poll (its fetch comes with the next ones)

    def show(m):
        m.stuck_parts = set()

    gl, member, _, _ = stalled_run({20: held, 23: show}, last=80)
    assert 50.0 not in member.looks  # no look right after the hold: it re-armed the wait
    assert gl.renewals == 0 and member.renewed == []


class Wedged(Stalling):
    """Every consumer, the renewed ones too, is wedged from poll 20 on (say, the group coordinator
    stays away): it is given its partitions but fetches nothing."""

    def poll(self, max_records=500, timeout=0.0):
        if self.polls >= 19:
            if self.polls == 19:
                grow(self)
            self.polls += 1
            self.clock[0] += 1.0
            if self.polls >= self.last:
                self.stop.set()
            while self.pending:
                what, parts = self.pending.pop(0)
                getattr(self.listener, what)(parts)
            return []
        return super().poll(max_records, timeout)

    def renew(self):
        self.renewed.append(self.clock[0])
        self.fetched, self.next = {}, {p: 0 for p in self.group.partitions}
        self.pending.append(("assigned", sorted(self.group.partitions)))


def test_renewals_that_bring_no_record_wait_twice_as_long_each_time(caplog):
    gl, member, _, _ = stalled_run({}, last=200, kind=Wedged)
    # the first renewal at 30; the looks after a renewal wait 10, 20, 40 s (then the second
    # look 5 s later): not a renewal every 15 s for as long as it lasts
    assert member.renewed == [30.0, 46.0, 71.0, 116.0], member.renewed  # assigned at 31, 47, ...
    assert "without a record since the last renewal: the next look in 20 s" in caplog.text  # 46
    assert "without a record since the last renewal: the next look in 40 s" in caplog.text  # 71


def test_a_look_that_fails_is_no_answer_and_the_learner_goes_on(caplog):
    def stall(m):
        grow(m)
        m.stuck = True

        def broken(partitions):
            m.looks.append(m.clock[0])
            raise RuntimeError("NetworkSelector closed!")
        m.fresh_ends = broken

    gl, member, _, _ = stalled_run({20: stall}, last=80)
    assert gl.renewals == 0 and member.renewed == [] and len(member.looks) >= 3
    assert "could not ask the broker: RuntimeError: NetworkSelector closed!" in caplog.text


def test_a_stop_during_the_look_saves_the_shards_and_renews_nothing():
    def stall(m):
        grow(m)
        m.stuck = True

    def stop_at_second_look(m):
        inner = m.fresh_ends

        def look(partitions):
            out = inner(partitions)
            if len(m.looks) == 3:  # the look that confirms the stall
                m.stop.set()
            return out
        m.fresh_ends = look

    gl, member, group, store = stalled_run({20: stall, 21: stop_at_second_look})
    assert member.renewed == [] and gl.renewals == 0
    assert merged(store).events == 40 + 25 - 5  # every record read is saved (5 dead letters)


def test_a_slow_look_is_not_counted_as_a_held_loop():
    """A look waits up to 5 s for the broker; with a short setting (the integration tests' 3 s)
    that wait once read as the loop being held, which re-armed the guard at every look."""
    def stall(m):
        grow(m)
        m.stuck = True
        inner = m.fresh_ends

        def slow(partitions):
            m.clock[0] += 4.5  # the broker answers slowly
            return inner(partitions)
        m.fresh_ends = slow

    gl, member, _, _ = stalled_run({20: stall}, last=60, stall=4.0)
    assert gl.renewals >= 1 and member.renewed


class Positioned(Stalling):
    """A member whose client also tells where it fetches each partition next (kafka-python)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.positions: dict[int, int] | None = None  # None: as far as it read

    def seek(self, positions):
        self.sought = getattr(self, "sought", []) + [dict(positions[TOPIC])]
        super().seek(positions)

    def fetch_positions(self):
        if self.positions is not None:
            return dict(self.positions)
        return {p: len(self.group.partitions[p]) if p not in self.stuck_parts else 0
                for p in self.next}


def test_a_consumer_that_knows_the_end_but_does_not_move_is_renewed():
    """Seen in CI with kafka-python after broker restarts: its highwater current (the fetched
    ends say caught up), its fetch position still, no record for minutes."""
    def wedged(m):
        before = {p: len(m.group.partitions[p]) for p in m.group.partitions}
        grow(m)
        m.stuck = True
        m.fetched = {p: len(m.group.partitions[p]) for p in m.group.partitions}  # it knows
        m.positions = before  # and stays where it was

    gl, member, group, store = stalled_run({20: wedged, 150: grow}, kind=Positioned)
    assert member.renewed == [30.0] and gl.renewals == 1
    state, events = reference_state(group)
    assert merged(store).events == events
    assert state_difference(merged(store).model.to_state(), state)[0] is None


def test_a_caught_up_consumer_past_a_trailing_marker_is_left_alone():
    """A transactional topic ends with a commit marker: the ends and the consumer's position are
    one past the shard's last record, and nothing more comes: an idle topic, no stall."""
    def marker(m):
        m.stuck = True  # nothing more to read
        m.fetched = {p: len(m.group.partitions[p]) + 1 for p in m.group.partitions}
        m.positions = dict(m.fetched)
        m.fresh_ends = lambda partitions: (m.looks.append(m.clock[0]),
                                           {p: m.fetched[p] for p in partitions})[1]

    gl, member, _, _ = stalled_run({20: marker}, last=120, kind=Positioned)
    assert gl.renewals == 0 and member.renewed == [] and len(member.looks) >= 5
    assert len(member.sought) == 1  # read again once (the marker only came back): then left alone


def test_a_consumer_that_moved_past_records_it_never_gave_reads_them_again(caplog):
    """Seen in CI with kafka-python after broker restarts: the consumer's fetch position at the
    end of the partition, the shard thousands of records behind, no record for minutes."""
    def skip(m):
        grow(m)
        m.positions = {p: len(m.group.partitions[p]) for p in m.group.partitions}
        m.next = dict(m.positions)  # it stands at the end: the new records never come

    def follow(m):
        m.positions = None  # after the seek it reports where it reads

    gl, member, group, store = stalled_run({20: skip, 34: follow}, kind=Positioned)
    assert member.sought[0] == {"0": 40, "1": 25}  # back to the shards' offsets, once
    assert gl.renewals == 0 and "reading again from the shards' offsets" in caplog.text
    state, events = reference_state(group)
    assert merged(store).events == events  # every record learned, none twice
    assert state_difference(merged(store).model.to_state(), state)[0] is None


class Blocked(Positioned):
    """A kafka-python-like member whose fetcher can skip partitions (``blocked``: why)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.blocked: dict[int, str] = {}

    def fetch_blocked(self):
        return dict(self.blocked)


def test_a_consumer_whose_fetcher_skips_a_partition_with_records_past_it_is_renewed(caplog):
    """Its highwater current and no fetch position (so neither of the other signs shows): the
    fetcher skips the partition (an offset validation that never came)."""
    def wedged(m):
        grow(m)
        m.stuck = True
        m.fetched = {p: len(m.group.partitions[p]) for p in m.group.partitions}  # it knows
        m.positions = {}  # no valid position
        m.blocked = {0: "awaiting offset validation", 1: "awaiting offset validation"}

    caplog.set_level(logging.INFO, logger="streambayes.runtime.loops.group")
    gl, member, group, store = stalled_run({20: wedged, 150: grow}, kind=Blocked)
    assert member.renewed == [30.0] and gl.renewals == 1
    assert "the consumer does not fetch it (awaiting offset validation)" in caplog.text
    assert "not fetched (awaiting offset validation) (behind)" in caplog.text  # the look's line
    state, events = reference_state(group)
    assert merged(store).events == events
    assert state_difference(merged(store).model.to_state(), state)[0] is None


def test_a_skipped_partition_with_nothing_past_it_is_left_alone():
    def caught_up(m):
        m.stuck = True  # nothing more comes
        m.fetched = {p: len(m.group.partitions[p]) for p in m.group.partitions}
        m.positions = dict(m.fetched)
        m.blocked = {0: "paused", 1: "no leader known"}

    gl, member, _, _ = stalled_run({20: caught_up}, last=120, kind=Blocked)
    assert gl.renewals == 0 and member.renewed == [] and len(member.looks) >= 5


class Orphaned(Stalling):
    """A member given partition 1 by a group that gives 0 to nobody (``unheld`` says so from the
    member's own holdings) until it renews; ``answer`` replaces the truth (None: unclear; an
    exception: raised); ``leader_broken``: each renewal gives it ``[1]`` again."""

    def __init__(self, group, clock, stop, script, last=300):
        super().__init__(group, clock, stop, script, last)
        self.group_looks: list[float] = []
        self.answer_group: object = "truth"
        self.leader_broken = False

    def unheld(self):
        self.group_looks.append(self.clock[0])
        if isinstance(self.answer_group, Exception):
            raise self.answer_group
        if self.answer_group != "truth":
            return self.answer_group
        return {p for p in self.group.partitions if p not in self.next}

    def renew(self):
        super().renew()
        if self.leader_broken:  # [1] again, and new records on it: the stall guard's wait resets
            self.pending[-1] = ("assigned", [1])
            self.group.partitions[1] += [event(1, i) for i in range(len(self.group.partitions[1]),
                                                                    len(self.group.partitions[1]) + 5)]


def orphan_run(script, last=120, stall=10.0):
    group, store, stop, clock = FakeGroup({0: 40, 1: 25}), MemorySnapshotStore(), threading.Event(), [0.0]
    member = Orphaned(group, clock, stop, script, last)
    gl = learner(member, store, stop=stop, clock=lambda: clock[0], stall_seconds=stall)
    member.pending.append(("assigned", [1]))  # partition 0 is given to nobody
    gl.run()
    return gl, member, group, store


def test_a_partition_the_group_gives_nobody_is_taken_at_the_second_look(caplog):
    gl, member, group, store = orphan_run({})
    # looks at the group every 10 s; {0} at 10 and again at 20: joins again, and is given both
    assert member.group_looks[:3] == [10.0, 20.0, 30.0] and member.renewed == [20.0]
    assert gl.renewals == 1
    assert "partitions [0] are held by no member of the group; if they still are at the next " \
           "look in 10 s, this member joins the group again" in caplog.text
    assert "partitions [0] were held by no member of the group at two looks 10 s apart; " \
           "checkpointing the shards and joining the group again" in caplog.text
    state, events = reference_state(group)  # partition 0 learned after the renewal, exactly
    assert merged(store).events == events
    assert state_difference(merged(store).model.to_state(), state)[0] is None


def test_a_group_that_answers_unclearly_or_not_at_all_renews_nothing(caplog):
    def unclear(m):
        m.answer_group = None  # not stable, a member not described, no answer

    gl, member, _, _ = orphan_run({1: unclear}, last=60)
    assert gl.renewals == 0 and member.renewed == [] and len(member.group_looks) >= 5

    def failing(m):
        m.answer_group = RuntimeError("coordinator not available")

    gl, member, _, _ = orphan_run({1: failing}, last=60)
    assert gl.renewals == 0 and member.renewed == [] and len(member.group_looks) >= 5
    assert "could not describe the group: RuntimeError: coordinator not available" in caplog.text


def test_a_partition_taken_between_the_two_looks_renews_nothing():
    def taken(m):  # another member got it meanwhile (a rebalance the look came before)
        m.answer_group = set()

    gl, member, _, _ = orphan_run({15: taken}, last=60)
    assert member.group_looks[:2] == [10.0, 20.0]
    assert gl.renewals == 0 and member.renewed == []

    def other(m):  # another partition unheld at the second look: a look, not a renewal
        m.answer_group = {1}

    gl, member, _, _ = orphan_run({15: other, 25: taken}, last=60)
    assert gl.renewals == 0 and member.renewed == []


def test_orphans_that_renewals_do_not_cure_are_looked_at_less_and_less_often():
    def broken(m):  # the group's leader leaves 0 out of every assignment
        m.leader_broken = True

    gl, member, _, _ = orphan_run({1: broken}, last=200)
    # renewals at 20, then each after a doubling wait (10, 20, 40 s) and a look 10 s later, though
    # partition 1 brings records after each renewal
    assert member.renewed == [20.0, 40.0, 70.0, 120.0], member.renewed

    def cured(m):  # a look finds every partition held: the next orphan gets the first wait again
        m.leader_broken, m.answer_group = False, set()

    def again(m):
        m.answer_group = {1}

    gl, member, _, _ = orphan_run({1: broken, 75: cured, 115: again}, last=200)
    # the look at 110 finds every partition held; {1} at 120 and 130: renewed, then 10 s and 20 s
    assert member.renewed == [20.0, 40.0, 70.0, 130.0, 150.0, 180.0], member.renewed


def test_the_look_at_the_group_is_off_with_the_stall_guard():
    gl, member, _, _ = orphan_run({}, stall=0.0, last=60)
    assert member.group_looks == [] and gl.renewals == 0


def test_an_assignment_counts_each_partition_from_when_it_was_assigned():
    """The stall guard's clock of every newly assigned partition starts when the assignment is
    done (restores take time), and an empty assignment is no error."""
    group, ticks = FakeGroup({0: 20, 1: 20, 2: 20}), iter(range(100))
    member = FakeMember(group, "a")
    gl = learner(member, MemorySnapshotStore(), clock=lambda: float(next(ticks)))
    restore, restored = gl._restore, {}

    def spy(p, parts=None):
        shard = restore(p, parts)
        restored[p] = gl._fed_at[p]  # the restore's own start
        return shard

    gl._restore = spy
    assert gl.assigned([]) == {}
    assert gl.assigned([0, 1, 2]) == {0: None, 1: None, 2: None}
    assert all(gl._fed_at[p] > restored[p] for p in (0, 1, 2)), (gl._fed_at, restored)
