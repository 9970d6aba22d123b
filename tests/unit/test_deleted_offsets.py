"""A learner resuming from a snapshot whose offsets the topic no longer holds (retention or
DeleteRecords deleted them while it was away): the client goes on from where the partition now
begins, and the learner says so, with the offsets and their count, instead of learning on as if
nothing were missing. Gaps that are transaction markers or compaction are not reported."""

from __future__ import annotations

import json
import logging

from streambayes.models import make_model
from streambayes.runtime.loops.learn import LearnLoop
from streambayes.runtime.records.decode import Decoder
from streambayes.runtime.records.sources import MemorySource
from streambayes.snapshot.store import MemorySnapshotStore
from tests.unit.test_group_learn import TOPIC, FakeGroup, FakeMember, drive, learner


def events(n: int) -> list[bytes]:
    return [json.dumps({"id": i, "label": "ab"[i % 2], "text": f"w{i % 7} x{i % 3}"}).encode()
            for i in range(n)]


class Trimmed(MemorySource):
    """Topic ``ev`` whose records below ``start`` are deleted: a seek below it reads on from it
    (``auto.offset.reset=earliest``); ``holes`` are offsets with no record (markers)."""

    topic = "ev"

    def __init__(self, items, start: int = 0, holes=(), told: bool = True) -> None:
        super().__init__({"ev": items})
        self.start, self.holes, self.asked = start, set(holes), []
        if not told:
            self.log_starts = None

    def seek(self, positions) -> None:
        super().seek(positions)
        self._next["ev"] = max(self._next["ev"], self.start)

    def poll(self, max_records: int = 500, timeout: float = 0.0):
        return [r for r in super().poll(max_records, timeout) if r.offset not in self.holes]

    def log_starts(self, partitions):
        self.asked.append(list(partitions))
        return {p: self.start for p in partitions}


def loop(source, store) -> LearnLoop:
    return LearnLoop(source, Decoder("jsonl"), store, lambda: make_model("nb"), "nb", every=10**9,
                     calibrate=False, batch_size=7)


def first_run(store, n: int = 30) -> None:
    first = loop(Trimmed(events(n)), store)
    first.run()
    assert store.latest().positions == {"ev": {"0": n}}


def test_a_static_learner_resuming_past_deleted_offsets_warns_and_counts_them(caplog):
    store = MemorySnapshotStore()
    first_run(store)
    source = Trimmed(events(80), start=50)
    second = loop(source, store)
    with caplog.at_level(logging.WARNING):
        stats = second.run()
    assert stats.deleted == 20 and stats.events == 30  # 50..79 learned, 30..49 gone
    assert source.asked == [[0]]  # once, at the first record after the restore
    assert "ev[0]: offsets 30-49 were deleted from the topic" in caplog.text
    assert store.latest().events == 60


def test_a_gap_of_markers_or_compaction_is_not_reported(caplog):
    store = MemorySnapshotStore()
    first_run(store)
    source = Trimmed(events(60), holes={30, 31})  # the first records after the snapshot: markers
    with caplog.at_level(logging.WARNING):
        stats = loop(source, store).run()
    assert stats.deleted == 0 and stats.events == 28 and source.asked == [[0]]
    assert "deleted" not in caplog.text


def test_no_question_without_a_gap_nor_from_a_source_that_cannot_answer(caplog):
    store = MemorySnapshotStore()
    first_run(store)
    source = Trimmed(events(60))
    assert loop(source, store).run().deleted == 0 and source.asked == []
    store2 = MemorySnapshotStore()
    first_run(store2)
    mute = Trimmed(events(80), start=50, told=False)
    with caplog.at_level(logging.WARNING):
        assert loop(mute, store2).run().deleted == 0
    assert "deleted" not in caplog.text


def test_retention_moving_on_after_the_fetch_counts_only_what_was_not_read(caplog):
    """The broker's start can pass the first record fetched: what was read is not deleted."""
    store = MemorySnapshotStore()
    first_run(store)
    source = Trimmed(events(80), start=50)
    source.log_starts = lambda partitions: {p: 60 for p in partitions}  # moved on since
    with caplog.at_level(logging.WARNING):
        stats = loop(source, store).run()
    assert stats.deleted == 20 and stats.events == 30
    assert "offsets 30-49 were deleted" in caplog.text and "resumes at 50" in caplog.text


def test_a_gap_the_broker_does_not_explain_is_warned_as_not_read(caplog):
    for answer in (lambda partitions: None, lambda partitions: 1 / 0):
        store = MemorySnapshotStore()
        first_run(store)
        source = Trimmed(events(80), start=50)
        source.log_starts = answer
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            stats = loop(source, store).run()
        assert stats.deleted == 0 and stats.events == 30
        assert "ev[0]: resumed at offset 30 but read on from 50; the broker did not say" \
            in caplog.text


class TrimmedMember(FakeMember):
    """A group member whose partitions begin at ``start`` (records below it deleted)."""

    def __init__(self, group, name, start) -> None:
        super().__init__(group, name)
        self.start, self.asked = start, []

    def poll(self, max_records: int = 500, timeout: float = 0.0):
        out = []
        while self.pending:  # the assignment first, then read on from where each partition begins
            out += super().poll(0)
        for p in self.next:
            self.next[p] = max(self.next[p], self.start.get(p, 0))
        return out + super().poll(max_records)

    def log_starts(self, partitions):
        self.asked.append(list(partitions))
        return {p: self.start.get(p, 0) for p in partitions}


def test_a_group_shard_resuming_past_deleted_offsets_warns_and_counts_them(caplog):
    group, store = FakeGroup({0: 30, 1: 30}), MemorySnapshotStore()
    a = FakeMember(group, "a")
    ga = learner(a, store)
    a.pending.append(("assigned", [0, 1]))
    drive(ga, a, 1)
    ga.checkpoint()  # both shards at offset 13
    group.partitions[0] += group.partitions[0][:10]  # 40 records now; 0..24 deleted below
    b = TrimmedMember(group, "b", {0: 25})
    gb = learner(b, store)
    b.pending.append(("assigned", [0, 1]))
    with caplog.at_level(logging.WARNING):
        drive(gb, b, 4)
    assert b.asked == [[0]]  # partition 1 resumed where its snapshot said: not asked
    assert f"{TOPIC}[0]: offsets 13-24 were deleted from the topic" in caplog.text
    gb.checkpoint()
    assert gb.stats.deleted == 0 and gb.shards[0].loop.stats.deleted == 12
    b.pending.append(("revoked", [0, 1]))  # the counts survive the shards being dropped
    drive(gb, b, 1)
    assert gb.stats.deleted == 12


def test_a_group_shard_restored_twice_from_one_snapshot_counts_its_deleted_offsets_once(caplog):
    group, store = FakeGroup({0: 30}), MemorySnapshotStore()
    a = FakeMember(group, "a")
    ga = learner(a, store)
    a.pending.append(("assigned", [0]))
    drive(ga, a, 1)
    ga.checkpoint()  # at offset 13
    b = TrimmedMember(group, "b", {0: 25})
    gb = learner(b, store)
    b.pending.append(("assigned", [0]))
    drive(gb, b, 1)
    assert "offsets 13-24 were deleted" in caplog.text
    b.pending += [("lost", [0]), ("assigned", [0])]  # lost before its checkpoint, then back
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        drive(gb, b, 2)
    assert b.asked == [[0], [0]] and "were deleted" not in caplog.text
    b.pending.append(("revoked", [0]))
    drive(gb, b, 1)
    assert gb.stats.deleted == 12


# -- while running: a learner that falls behind the topic's retention -------------------------
class Behind(Trimmed):
    """Topic ``ev`` from which, once ``after`` records were read, retention deletes the records
    below ``start``: a read past that point goes on from ``start`` (the client's reset)."""

    def __init__(self, items, after: int, start: int, holes=()) -> None:
        super().__init__(items, holes=holes)
        self.after, self.trim_to = after, start

    def poll(self, max_records: int = 500, timeout: float = 0.0):
        if self._next["ev"] >= self.after and self.start < self.trim_to:
            self.start = self.trim_to
            self._next["ev"] = max(self._next["ev"], self.start)
        return super().poll(max_records, timeout)

    def positions(self):  # as a Kafka source: the next offset after the last record returned
        return {"ev": {"0": self._next["ev"]}}


def test_a_running_learner_behind_retention_warns_and_counts_what_it_never_read(caplog):
    source = Behind(events(100), after=20, start=60)
    with caplog.at_level(logging.WARNING):
        stats = loop(source, MemorySnapshotStore()).run()
    read = stats.events - 40  # 0..read-1 learned before the trim (20 and more), then 60..99
    assert read >= 20 and stats.deleted == 60 - read and source.asked == [[0]]
    assert f"ev[0]: offsets {read}-59 were deleted from the topic (retention or DeleteRecords) " \
           "while this learner was behind" in caplog.text


def test_markers_while_running_are_asked_about_at_most_once_a_second_and_never_counted(caplog):
    clock = [0.0]
    # 10, 50: commit markers (one offset: never asked about); 30-31, 60-61: aborted transactions
    source = Trimmed(events(100), holes={10, 30, 31, 50, 60, 61})
    source.positions = lambda: {"ev": {"0": source._next["ev"]}}
    learner_ = LearnLoop(source, Decoder("jsonl"), MemorySnapshotStore(),
                         lambda: make_model("nb"), "nb", every=10**9, calibrate=False,
                         batch_size=7, clock=lambda: clock[0])
    with caplog.at_level(logging.WARNING):
        stats = learner_.run()
    assert stats.deleted == 0 and stats.events == 94 and "deleted" not in caplog.text
    # 30-31 at once; 60-61 waited (the clock stood still) and was asked about as the run ended
    assert source.asked == [[0], [0]] and not learner_.skipped.pending


def test_jumps_waiting_too_long_are_let_go_unasked(caplog):
    from streambayes.runtime.loops.skipped import Skipped

    clock, asked = [0.0], []
    skipped = Skipped("ev", lambda ps: asked.append(ps) or {0: 100}, clock=lambda: clock[0],
                      max_age=5.0)
    skipped.add([(0, 10, 20)])
    assert skipped.check({}) == 10  # at once
    skipped.add([(0, 30, 40)])  # within the second: waits
    assert skipped.check({}) == 0 and len(skipped.pending) == 1
    clock[0] = 7.0  # the learner did not look again for 7 s: the start may have passed it since
    skipped.add([(0, 50, 60)])
    with caplog.at_level(logging.INFO):
        assert skipped.check({}) == 10
    assert "1 offset jumps let go unasked (found over 5 s ago)" in caplog.text
    assert asked == [[0], [0]]


def test_several_jumps_of_one_partition_are_one_warning_that_counts_only_them(caplog):
    from streambayes.runtime.loops.skipped import Skipped

    skipped = Skipped("ev", lambda ps: {0: 500})
    skipped.add([(0, 100, 200), (0, 300, 400)])
    with caplog.at_level(logging.WARNING):
        assert skipped.check({}) == 200
    assert "ev[0]: 200 offsets within 100-399 were deleted" in caplog.text


def test_a_jump_reported_at_the_restore_is_not_counted_again_while_running(caplog):
    store = MemorySnapshotStore()
    first_run(store)
    source = Behind(events(100), after=0, start=50)  # deleted while the learner was away
    with caplog.at_level(logging.WARNING):
        stats = loop(source, store).run()
    assert stats.deleted == 20 and stats.events == 50
    assert caplog.text.count("were deleted") == 1 and source.asked == [[0]]


def test_a_running_group_shard_behind_retention_warns_and_counts_it(caplog):
    group, store = FakeGroup({0: 30}), MemorySnapshotStore()
    member = TrimmedMember(group, "a", {})
    learner_ = learner(member, store)
    member.pending.append(("assigned", [0]))
    drive(learner_, member, 1)  # 13 records learned
    member.start[0] = 20  # retention deletes 0..19 while the shard is at 13
    with caplog.at_level(logging.WARNING):
        drive(learner_, member, 3)
    assert member.asked == [[0]]
    assert f"{TOPIC}[0]: offsets 13-19 were deleted from the topic" in caplog.text
    assert learner_.shards[0].loop.stats.deleted == 7
    member.pending.append(("revoked", [0]))
    drive(learner_, member, 1)
    assert learner_.stats.deleted == 7


def test_offset_jumps_and_what_adds_up():
    from streambayes.runtime.loops.skipped import adds_up, offset_jumps
    from streambayes.runtime.records.sources import Record

    batch = [Record(b"", None, "ev", p, o) for p, o in ((0, 5), (1, 9), (0, 7), (2, 3), (1, 10))]
    assert offset_jumps({0: 5, 1: 8}, batch) == [(1, 8, 9), (0, 6, 7)]  # 2: no offset expected
    assert offset_jumps({0: 5, 1: 8}, batch, skip={1}) == [(0, 6, 7)]
    assert adds_up({"0": 5, "1": 9}, {"0": 8, "1": 11}, 5)
    assert not adds_up({"0": 5, "1": 8}, {"0": 8, "1": 11}, 5)  # one offset more than records
    assert not adds_up({"0": 5}, {"0": 8, "1": 11}, 5)  # a partition new to the source


def test_waiting_jumps_are_bounded_and_a_broker_that_does_not_answer_counts_nothing(caplog):
    from streambayes.runtime.loops.skipped import Skipped

    asked = []
    skipped = Skipped("ev", lambda ps: asked.append(ps) or {0: 100}, clock=lambda: 0.0, limit=3)
    with caplog.at_level(logging.INFO):
        skipped.add([(0, 10, 12), (0, 20, 22), (0, 30, 31), (0, 40, 43), (0, 50, 52)])
        assert [j[1] for _, j in skipped.pending] == [20, 40, 50]  # 30-31: a commit marker
        assert "1 offset jumps let go unasked (more than 3 waiting)" in caplog.text
        upto: dict[int, int] = {}
        assert skipped.check(upto) == 2 + 3 + 2 and upto == {0: 52}  # each jump's own offsets
        for answer in (lambda ps: None, lambda ps: 1 / 0):
            mute = Skipped("ev", answer)
            mute.add([(0, 10, 50)])
            assert mute.check({}) == 0 and not mute.pending
    assert "offset jumps not looked at" in caplog.text
