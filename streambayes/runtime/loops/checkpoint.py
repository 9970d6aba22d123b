"""The order of a learner checkpoint, in one place (DESIGN §4, exactly-once state).

1. flush the dead-letter sink: every dead letter of the records covered is acknowledged;
2. write the snapshot(s) (atomic and durable): the state and the next offsets it reflects;
3. commit those offsets to the consumer group (lag monitoring only: the snapshot is the truth).

A crash between any two steps loses nothing and counts nothing twice in the state. Both the
static learner (:class:`~streambayes.runtime.loops.learn.LearnLoop`) and the group learner
(:class:`~streambayes.runtime.loops.group.GroupLearner`, one snapshot per partition shard) go
through :func:`checkpoint_in_order`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


def checkpoint_in_order(dead_letters: tuple[Any, str] | None, write: Callable[[], _T],
                        commit: Callable[[_T], None]) -> _T:
    """Flush ``dead_letters`` (a ``(sink, topic)`` or None), then ``write()``, then
    ``commit(what write returned)``; returns that."""
    if dead_letters is not None:
        dead_letters[0].flush()
    written = write()
    commit(written)
    return written
