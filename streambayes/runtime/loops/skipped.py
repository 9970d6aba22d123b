"""Offsets a running learner's consumer passed over, and which of them retention deleted.

A learner that falls behind its input topic's retention loses records while it runs: its
client's next fetch finds the offset gone (out of range), goes on from where the partition now
begins (``auto.offset.reset=earliest``), and the records in between are never learned. Nothing
says so but a jump in the offsets of the records read, and most jumps are no loss: the commit or
abort marker of a transactional producer takes an offset and is never delivered, a
``read_committed`` reader skips an aborted transaction's records, compaction removes records.

:func:`offset_jumps` finds the jumps in a batch (a learner calls it only when the batch's
offsets do not add up: nothing per record otherwise). :class:`Skipped` keeps those of more than
one offset (a jump of one is a commit marker, by far the commonest: a single deleted record goes
unreported) and asks where their partitions now begin, at once, then at most once every
``every`` seconds (the learner looks after every poll, with records or not, and once more as it
stops); it counts the offsets of each jump below that start as deleted: warned, as the report at
a restore is (:meth:`~streambayes.runtime.loops.learn.LearnLoop._look_for_deleted`), and never
the same offsets twice (the ``deleted_upto`` the two share). At most ``limit`` jumps wait for a
question, and a jump found more than ``max_age`` seconds before it is let go (both logged at
INFO): the start may have passed it since it was read. A jump whose partition's start passed it
only during that wait counts too, so a learner within seconds of the retention's edge may count
an aborted transaction as deleted. A source that cannot say where a partition begins (a file)
reports nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Container, Iterable, Mapping, MutableMapping
from typing import Any

logger = logging.getLogger(__name__)

ASK_SECONDS = 1.0  # after a question, the next waits at least this (the jumps found meanwhile wait)
MAX_JUMPS = 10_000  # jumps waiting for a question at most (the oldest are let go: logged)
MAX_AGE_SECONDS = 5.0  # a jump found longer ago than this at the question is let go (logged)

Jump = tuple[int, int, int]  # (partition, the offset expected, the offset read)


def offset_jumps(expected: Mapping[int, int], records: Iterable[Any],
                 skip: Container[int] = ()) -> list[Jump]:
    """The jumps in ``records``: (partition, its next offset expected, the offset read instead)
    wherever a record lies past the next offset of its partition (``expected``, then each record's
    offset + 1). A partition without an expected offset has no jump at its first record; those
    in ``skip`` (a restore's first records: reported by the restore) none at all."""
    after = dict(expected)
    out: list[Jump] = []
    for r in records:
        want = after.get(r.partition)
        if want is not None and r.offset > want and r.partition not in skip:
            out.append((r.partition, want, r.offset))
        after[r.partition] = r.offset + 1
    return out


def adds_up(before: Mapping[str, int], after: Mapping[str, int], count: int) -> bool:
    """Whether a batch of ``count`` records moved the source's next offsets (``positions()`` of
    its topic, before and after the poll) by exactly ``count``: no partition jumped."""
    if len(after) != len(before):
        return False
    moved = 0
    for p, offset in after.items():
        was = before.get(p)
        if was is None:
            return False
        moved += offset - was
    return moved == count


class Skipped:
    """The jumps of one learner's partitions (see the module doc): :meth:`add` them, then
    :meth:`check` (it asks ``ask``, a source's ``log_starts``, when it is time) returns how many
    of their offsets were deleted."""

    def __init__(self, topic: str, ask: Callable[[list[int]], Mapping[int, int] | None] | None,
                 clock: Callable[[], float] = time.monotonic, every: float = ASK_SECONDS,
                 limit: int = MAX_JUMPS, max_age: float = MAX_AGE_SECONDS) -> None:
        self.topic, self.ask, self.clock = topic, ask, clock
        self.every, self.limit, self.max_age = every, limit, max_age
        self.pending: list[tuple[float, Jump]] = []  # (when found, the jump)
        self._asked = -float("inf")

    def add(self, jumps: list[Jump]) -> None:
        """Keep ``jumps`` for the next question, but for those of one offset (a commit marker)."""
        if self.ask is None:
            return
        now = self.clock()
        self.pending += [(now, j) for j in jumps if j[2] - j[1] > 1]
        if len(self.pending) > self.limit:
            gone = len(self.pending) - self.limit
            del self.pending[:gone]
            logger.info("%s: %d offset jumps let go unasked (more than %d waiting)", self.topic,
                        gone, self.limit)

    def check(self, deleted_upto: MutableMapping[int, int], force: bool = False) -> int:
        """Ask where the partitions with pending jumps begin, if ``every`` seconds have passed
        since the last question (``force``: now); warn about and count the offsets of those
        jumps below it (and past ``deleted_upto``, which is moved on). Jumps found more than
        ``max_age`` s before the question are let go (logged): the start may have passed them
        since they were read."""
        now = self.clock()
        if not self.pending or self.ask is None or (not force and now - self._asked < self.every):
            return 0
        self._asked = now
        waiting, self.pending = self.pending, []
        jumps = [j for found, j in waiting if now - found <= self.max_age]
        if len(jumps) < len(waiting):
            logger.info("%s: %d offset jumps let go unasked (found over %g s ago)", self.topic,
                        len(waiting) - len(jumps), self.max_age)
        if not jumps:
            return 0
        try:
            starts = self.ask(sorted({p for p, _, _ in jumps}))
        except Exception as exc:  # noqa: BLE001 (a report, not the stream: never ends the run)
            logger.info("where %s begins is unknown: %s", self.topic, exc)
            starts = None
        if starts is None:  # most jumps are markers: not worth a warning each
            logger.info("%s: %d offset jumps not looked at (the broker did not say where the "
                        "partitions begin)", self.topic, len(jumps))
            return 0
        total, ranges = 0, {}
        for p, want, read in jumps:
            gone = min(starts.get(p, 0), read)  # offsets below it are deleted
            since = max(want, deleted_upto.get(p, want))  # not reported yet
            if gone > since:
                total += gone - since
                deleted_upto[p] = gone
                first, _last, count = ranges.get(p, (since, gone, 0))
                ranges[p] = (first, gone, count + gone - since)
        for p, (first, gone, count) in sorted(ranges.items()):
            which = f"offsets {first}-{gone - 1}" if count == gone - first else \
                f"{count} offsets within {first}-{gone - 1}"  # several jumps: what lies between was read
            logger.warning(
                "%s[%d]: %s were deleted from the topic (retention or DeleteRecords) while this "
                "learner was behind: their events are not in the model (keep the topic's "
                "retention.ms longer than the learner may lag)", self.topic, p, which)
        return total
