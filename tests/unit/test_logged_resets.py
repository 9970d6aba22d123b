"""LoggedResets: a confluent predictor group's reset past deleted records, read from librdkafka's
own warning of it (no broker here: the lines are librdkafka 2's, as confluent-kafka hands them
to a logger; the real broker's are in tests/integration/test_deleted_offsets.py)."""

from __future__ import annotations

import logging

from streambayes.runtime.kafka.deleted import LoggedResets, shown_level
from streambayes.runtime.records.sources import Record

FMT = "%s [%s] %s"
CLIENT = "rdkafka#consumer-1"


def reset_line(topic: str, partition: int, fetched: int | str, cached: int | None = None,
               to: str = "BEGINNING") -> str:
    where = (f"cached {to} offset offset {cached} (leader epoch -1)" if cached is not None
             else f"offset {to} (leader epoch -1)")
    return (f"[thrd:main]: {topic} [{partition}]: offset reset (at offset {fetched} (leader epoch "
            f"0), broker 1) to {where}: fetch failed due to requested offset not available on "
            "the broker: Broker: Offset out of range")


def records(*pairs):
    return [Record(b"{}", None, "ev", p, o) for p, o in pairs]


def resets(shown: int = logging.CRITICAL, held=(0, 1, 2), position=None) -> LoggedResets:
    r = LoggedResets("ev", logging.getLogger("test.librdkafka"), shown,
                     position or (lambda p: None))
    r.assigned(held)
    return r


def warn(r: LoggedResets, partition: int, fetched: int, **kw) -> None:
    r.log(logging.WARNING, FMT, "OFFSET", CLIENT, reset_line("ev", partition, fetched, **kw))


def test_a_reset_to_the_beginning_is_reported_where_its_first_record_lands(caplog):
    r = resets(position={0: 297}.get)
    warn(r, 0, 300)
    warn(r, 2, 100, cached=900)
    assert r.owed
    with caplog.at_level(logging.WARNING, logger="streambayes"):
        # 0: records 297-299 were fetched before the reset (its line can be served ahead of
        # them); it lands at 520, the partition begins at 500 (520 is past markers): 300-499
        # gone. 2: it lands at 950 and retention has moved the start on to 960 since: the gap
        # ends at the first record read, 100-949
        r.seen(records((0, 297), (0, 298), (0, 299), (1, 7), (0, 520), (0, 521), (2, 950)),
               {0: 500, 1: 0, 2: 960}.get)
    assert r.deleted == 200 + 850 and not r.owed
    assert "ev[0]: offsets 300-499 were deleted from the topic (retention or DeleteRecords) " \
           "before this group's predictor read them: their events got no posterior; it resumes " \
           "at 520" in caplog.text
    assert "ev[2]: offsets 100-949 were deleted" in caplog.text


def test_a_reset_waits_for_its_partitions_records_and_a_start_unknown_takes_the_record():
    r = resets()
    warn(r, 0, 300)
    r.seen(records((1, 5)), lambda p: 500)
    assert r.owed and r.deleted == 0
    r.seen(records((0, 510)), lambda p: None)
    assert not r.owed and r.deleted == 210


def test_a_second_reset_served_before_the_first_ones_records_is_counted_too():
    """Resets at 6 and 22 are both served before the member is handed the records the first
    landed at (20, 21; queued): 6-19 are gone, and 22-29 (the second lands at 30)."""
    r = resets(position={0: 6}.get)
    warn(r, 0, 6)
    warn(r, 0, 22)
    r.seen(records((0, 20), (0, 21)), lambda p: 30)
    assert r.deleted == 14 and r.owed
    r.seen(records((0, 30), (0, 31)), lambda p: 30)
    assert r.deleted == 14 + 8 and not r.owed


def test_a_reset_at_where_the_last_one_landed_is_not_counted_twice():
    r = resets()
    warn(r, 0, 300)
    warn(r, 0, 500, cached=500)  # the partition's start moved on again before 500 was fetched
    r.seen(records((0, 800)), lambda p: 800)
    assert r.deleted == 500 and not r.owed


def test_resets_that_lose_nothing_are_not_reported(caplog):
    r = resets(position={1: 296}.get)
    with caplog.at_level(logging.INFO, logger="streambayes"):
        # to the end (latest); an unrelated topic, one whose name ends in ours; no committed
        # offset (debug, no error); a log truncation (not out of range)
        warn(r, 0, 300, to="END")
        r.log(logging.WARNING, FMT, "OFFSET", CLIENT, reset_line("other", 0, 300))
        r.log(logging.WARNING, FMT, "OFFSET", CLIENT, reset_line("prev", 0, 300))
        r.log(logging.DEBUG, FMT, "OFFSET", CLIENT,
              "[thrd:main]: ev [0]: offset reset (at offset INVALID (leader epoch -1), broker -1) "
              "to offset BEGINNING (leader epoch -1): no previously committed offset available: "
              "Local: No offset stored")
        r.log(logging.WARNING, FMT, "OFFSET", CLIENT,
              "[thrd:main]: ev [0]: offset reset (at offset 300 (leader epoch 3), broker 1) to "
              "offset BEGINNING (leader epoch -1): No epoch found less or equal to offset 300 "
              "(leader epoch 3): broker end offset is 120 (offset leader epoch -1). Reset using "
              "configured policy.: Local: Partition log truncation detected")
        assert not r.owed
        # out of range above the log's end (a recreated topic): it lands below the offset
        # fetched; the records before it (296-299) are not the landing, the jump back is
        warn(r, 1, 300)
        r.seen(records((1, 296), (1, 297)), lambda p: 0)
        assert r.owed
        r.seen(records((1, 298), (1, 299), (1, 0), (1, 1)), lambda p: 0)
        assert not r.owed
    assert r.deleted == 0
    assert "deleted" not in caplog.text


def test_a_partition_taken_from_the_member_is_forgotten_and_a_late_line_of_it_ignored():
    r = resets()
    warn(r, 0, 300)
    warn(r, 1, 300)
    r.revoked([0])
    warn(r, 0, 300)  # served after the revoke: the next owner's
    assert not {0} & set(r._owed)
    r.assigned([0])  # back again: its earlier reset is not this member's to count
    r.seen(records((0, 900), (1, 400)), lambda p: 400)
    assert r.deleted == 100 and not r.owed


def test_a_line_it_cannot_read_is_said_and_loses_nothing(caplog):
    r = resets()
    with caplog.at_level(logging.INFO, logger="streambayes"):
        r.log(logging.WARNING, FMT, "OFFSET", CLIENT,
              "[thrd:main]: ev [0]: offset reset (at position 300, broker 1) to BEGINNING: Broker: "
              "Offset out of range")
    assert not r.owed
    assert "cannot be told from librdkafka's line" in caplog.text


def test_lines_go_on_to_the_log_at_the_level_the_member_showed_before(caplog):
    with caplog.at_level(logging.DEBUG, logger="test.librdkafka"):
        r = resets(shown_level({"log_level": 2}))
        warn(r, 0, 300)
        r.log(logging.CRITICAL, FMT, "FATAL", CLIENT, "[thrd:main]: fatal")
        shown = [rec.getMessage() for rec in caplog.records if rec.name == "test.librdkafka"]
        assert shown == [f"FATAL [{CLIENT}] [thrd:main]: fatal"]
        caplog.clear()
        r = resets(shown_level({"log_level": 7}))
        warn(r, 0, 300)
        shown = [rec.getMessage() for rec in caplog.records if rec.name == "test.librdkafka"]
        assert len(shown) == 1 and "offset reset" in shown[0]
    assert r.owed
