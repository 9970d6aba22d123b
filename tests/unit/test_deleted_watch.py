"""DeletedWatch: what a predictor group owed but the topic no longer holds, asked off the poll
(its own thread, its own client; no broker here)."""

from __future__ import annotations

import logging
import threading
import time

from streambayes.runtime.kafka.deleted import DeletedWatch, first_offsets
from streambayes.runtime.records.sources import Record


class FakeAsker:
    def __init__(self, committed=None, starts=None, fail=None):
        self._committed = committed or {}
        self._starts = starts or {}
        self.fail = fail or set()
        self.asked: list[tuple[str, list[int]]] = []
        self.threads: set[int] = set()
        self.closed = False

    def _ask(self, what, partitions, answers):
        self.threads.add(threading.get_ident())
        self.asked.append((what, partitions))
        if what in self.fail:
            raise RuntimeError(f"{what}: the broker is away")
        return {p: answers[p] for p in partitions if p in answers}

    def committed(self, partitions):
        return self._ask("committed", partitions, self._committed)

    def starts(self, partitions):
        return self._ask("starts", partitions, self._starts)

    def close(self):
        self.closed = True


def records(*pairs):
    return [Record(b"{}", None, "ev", p, o) for p, o in pairs]


def test_first_offsets_are_each_partitions_first_record_among_those_asked():
    batch = records((0, 5), (1, 40), (0, 6), (2, 9), (1, 41))
    assert first_offsets(batch, {0, 1}) == {0: 5, 1: 40}
    assert first_offsets(batch, {3}) == {}


def test_offsets_past_the_committed_one_and_below_the_partitions_start_are_reported(caplog):
    asker = FakeAsker(committed={0: 300, 1: 10, 2: 100}, starts={0: 500, 1: 10, 2: 900})
    with caplog.at_level(logging.WARNING):
        watch = DeletedWatch("ev", lambda: asker)
        watch.given([0, 1, 2, 3])
        watch.firsts({0: 520, 1: 12, 2: 700, 3: 50})
        watch.close()
    # 0: 300..499 gone (the first record read is 520: markers between); 1: 10..11 are markers
    # (the start is not past the committed offset); 2: the start moved past the first record
    # read after the fetch, so only 100..699 were not read; 3: no committed offset, a new group
    assert watch.deleted == 200 + 600
    assert asker.asked == [("committed", [0, 1, 2, 3]), ("starts", [0, 1, 2])]
    assert "ev[0]: offsets 300-499 were deleted" in caplog.text
    assert "ev[2]: offsets 100-699 were deleted" in caplog.text and "ev[1]" not in caplog.text
    assert asker.closed


def test_the_questions_run_on_the_watchs_thread_and_only_queue_on_the_members():
    gate = threading.Event()

    class Slow(FakeAsker):
        def committed(self, partitions):
            gate.wait(10)  # a broker that takes its time
            return super().committed(partitions)

    asker = Slow(committed={0: 10}, starts={0: 50})
    watch = DeletedWatch("ev", lambda: asker)
    start = time.monotonic()
    watch.given([0])  # as the client's rebalance callback calls it, inside the poll
    watch.firsts({0: 60})
    assert time.monotonic() - start < 0.5 and watch.deleted == 0
    gate.set()
    watch.close()
    assert watch.deleted == 40
    assert threading.get_ident() not in asker.threads and len(asker.threads) == 1


def test_the_committed_offset_is_the_assignments_not_a_later_one():
    # the member commits 60 after the assignment; the watch compares with what it owed then
    answered = threading.Event()

    class Told(FakeAsker):
        def committed(self, partitions):
            try:
                return super().committed(partitions)
            finally:
                answered.set()

    asker = Told(committed={0: 10}, starts={0: 50})
    watch = DeletedWatch("ev", lambda: asker)
    watch.given([0])
    assert answered.wait(10)
    asker._committed[0] = 60
    watch.firsts({0: 55})
    watch.close()
    assert watch.deleted == 40


def test_an_assignment_whose_question_fails_owes_nothing_from_an_earlier_one(caplog):
    # assigned at 100, taken away before any record; assigned again while the broker restarts
    # (the question fails) after another member predicted up to 5000 and retention moved to 3000
    asker = FakeAsker(committed={0: 100}, starts={0: 3000})
    watch = DeletedWatch("ev", lambda: asker)
    watch.given([0])
    watch.firsts({})  # (nothing yet)
    watch.close()
    asker = FakeAsker(committed={0: 100}, starts={0: 3000}, fail={"committed"})
    watch2 = DeletedWatch("ev", lambda: asker)
    watch2.given([0])
    watch2.given([0])
    watch2.firsts({0: 5000})
    with caplog.at_level(logging.WARNING):
        watch2.close()
    assert watch2.deleted == 0 and "were deleted" not in caplog.text
    # the same watch: the first assignment answered, the second did not
    calls = []

    class Flaky(FakeAsker):
        def committed(self, partitions):
            calls.append(partitions)
            if len(calls) > 1:
                raise RuntimeError("the broker is restarting")
            return super().committed(partitions)

    flaky = Flaky(committed={0: 100}, starts={0: 3000})
    watch3 = DeletedWatch("ev", lambda: flaky)
    watch3.given([0])
    watch3.given([0])
    watch3.firsts({0: 5000})
    watch3.close()
    assert len(calls) == 2 and watch3.deleted == 0


def test_each_assignment_is_looked_at_once_and_firsts_without_an_assignment_ask_nothing():
    asker = FakeAsker(committed={0: 10}, starts={0: 50})
    watch = DeletedWatch("ev", lambda: asker)
    watch.firsts({0: 60})  # no assignment seen (a client without the callback): nothing owed
    watch.given([0])
    watch.firsts({0: 60})
    watch.firsts({0: 70})  # the same assignment again: not counted twice
    watch.close()
    assert watch.deleted == 40
    assert [what for what, _ in asker.asked] == ["committed", "starts"]


def test_no_question_of_the_start_without_a_gap_and_failures_report_nothing(caplog):
    asker = FakeAsker(committed={0: 300}, starts={0: 400})
    watch = DeletedWatch("ev", lambda: asker)
    watch.given([0])
    watch.firsts({0: 300})
    watch.close()
    assert watch.deleted == 0 and asker.asked == [("committed", [0])]

    with caplog.at_level(logging.INFO):
        for fail in ("committed", "starts"):
            asker = FakeAsker(committed={0: 300}, starts={0: 500}, fail={fail})
            watch = DeletedWatch("ev", lambda a=asker: a)
            watch.given([0])
            watch.firsts({0: 520})
            watch.close()
            assert watch.deleted == 0
        asker = FakeAsker(committed={0: 300}, starts={})  # the broker does not say
        watch = DeletedWatch("ev", lambda: asker)
        watch.given([0])
        watch.firsts({0: 520})
        watch.close()
        assert watch.deleted == 0
    assert "the broker is away" in caplog.text and "were deleted from the topic" not in caplog.text


def test_a_client_that_cannot_be_made_reports_nothing_and_close_does_not_wait_for_it(caplog):
    def broken():
        raise RuntimeError("no broker at that address")

    with caplog.at_level(logging.INFO):
        watch = DeletedWatch("ev", broken)
        watch.given([0])
        watch.firsts({0: 520})
        watch.close()
    assert watch.deleted == 0 and "no broker at that address" in caplog.text

    made = threading.Event()

    def connecting():  # a client still connecting when the source closes, with nothing queued
        made.wait(10)
        return FakeAsker()

    watch = DeletedWatch("ev", connecting)
    start = time.monotonic()
    watch.close()
    assert time.monotonic() - start < 0.5
    made.set()


def test_close_waits_a_bounded_time_for_first_records_still_to_be_looked_at():
    gate = threading.Event()

    class Stuck(FakeAsker):
        def starts(self, partitions):
            gate.wait(10)
            return super().starts(partitions)

    watch = DeletedWatch("ev", lambda: Stuck(committed={0: 1}, starts={0: 5}))
    watch.given([0])
    watch.firsts({0: 9})
    start = time.monotonic()
    watch.close(timeout=0.3)
    assert 0.25 < time.monotonic() - start < 2
    gate.set()
