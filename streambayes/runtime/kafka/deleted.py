"""Records a consumer group owed its members but the topic no longer holds.

A predictor group resumes each partition at the group's committed offset. When retention (or
DeleteRecords) deleted records from there on while no member read them (the predictors were
down longer than the topic keeps records), the client goes on from where the partition now
begins (``auto.offset.reset=earliest``) and those events get no posterior. The group sources
(:mod:`.confluent`, :mod:`.kafka_python`) call :func:`report_deleted` at the first records of
each partition they are newly given: it asks the committed offset and, only when the first
record lies past it, where the partition begins, and warns about the offsets in between that are
gone. Gaps that the partition's start does not explain (transaction markers, compaction) are not
reported. Best effort: a question that fails reports nothing (logged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from streambayes.runtime.records.sources import Record

logger = logging.getLogger(__name__)
Ask = Callable[[list[int]], "Mapping[int, int | None] | None"]


def first_offsets(records: Sequence[Record], partitions: set[int]) -> dict[int, int]:
    """The offset of the first record of each of ``partitions`` in ``records``."""
    firsts: dict[int, int] = {}
    for r in records:
        if r.partition in partitions and r.partition not in firsts:
            firsts[r.partition] = r.offset
            if len(firsts) == len(partitions):
                break
    return firsts


def report_deleted(topic: str, firsts: Mapping[int, int], committed: Ask, starts: Ask,
                   who: str = "predictor") -> int:
    """Warn about the offsets of each partition in ``firsts`` (partition -> its first record's
    offset) from the group's committed offset up to where the partition now begins, when that is
    past the committed offset; return how many offsets that is in all. ``committed`` and
    ``starts`` ask the broker (partition -> offset; None or a missing partition: unknown)."""
    try:
        owed = committed(sorted(firsts)) or {}
        jumped = {p: (int(c), first) for p, first in firsts.items()
                  if (c := owed.get(p)) is not None and 0 <= c < first}
        begins = (starts(sorted(jumped)) or {}) if jumped else {}
    except Exception as exc:  # noqa: BLE001 (a report, not the stream: never ends the run)
        logger.info("where %s's partitions begin is unknown: %s", topic, exc)
        return 0
    total = 0
    for p, (c, first) in sorted(jumped.items()):
        start = begins.get(p)
        gone = None if start is None else min(int(start), first)
        if gone is not None and gone > c:
            total += gone - c
            logger.warning(
                "%s[%d]: offsets %d-%d were deleted from the topic (retention or DeleteRecords) "
                "before this group's %s read them: their events got no posterior; it resumes at "
                "%d", topic, p, c, gone - 1, who, first)
    return total
