"""report_deleted: what a predictor group owed but the topic no longer holds (no broker)."""

from __future__ import annotations

import logging

from streambayes.runtime.kafka.deleted import first_offsets, report_deleted
from streambayes.runtime.records.sources import Record


def records(*pairs):
    return [Record(b"{}", None, "ev", p, o) for p, o in pairs]


def test_first_offsets_are_each_partitions_first_record_among_those_asked():
    batch = records((0, 5), (1, 40), (0, 6), (2, 9), (1, 41))
    assert first_offsets(batch, {0, 1}) == {0: 5, 1: 40}
    assert first_offsets(batch, {3}) == {}


def test_offsets_past_the_committed_one_and_below_the_partitions_start_are_reported(caplog):
    asked = []

    def starts(partitions):
        asked.append(partitions)
        return {0: 500, 1: 10, 2: 900}

    committed = {0: 300, 1: 10, 2: 100, 3: None}.__getitem__
    with caplog.at_level(logging.WARNING):
        n = report_deleted("ev", {0: 520, 1: 12, 2: 700, 3: 50},
                           lambda ps: {p: committed(p) for p in ps}, starts)
    # 0: 300..499 gone (the first record read is 520: markers between); 1: 10..11 are markers
    # (the start is not past the committed offset); 2: the start moved past the first record
    # read after the fetch, so only 100..699 were not read; 3: no committed offset, a new group
    assert n == 200 + 600
    assert asked == [[0, 1, 2]]
    assert "ev[0]: offsets 300-499 were deleted" in caplog.text
    assert "ev[2]: offsets 100-699 were deleted" in caplog.text and "ev[1]" not in caplog.text


def test_no_question_of_the_start_without_a_gap_and_a_failing_question_reports_nothing(caplog):
    def starts(partitions):
        raise AssertionError("not asked")

    assert report_deleted("ev", {0: 300}, lambda ps: {0: 300}, starts) == 0

    def broken(partitions):
        raise RuntimeError("the consumer is closed")

    with caplog.at_level(logging.WARNING):
        assert report_deleted("ev", {0: 520}, broken, starts) == 0
        assert report_deleted("ev", {0: 520}, lambda ps: {0: 300}, broken) == 0
        assert report_deleted("ev", {0: 520}, lambda ps: {0: 300}, lambda ps: None) == 0
    assert "deleted" not in caplog.text
