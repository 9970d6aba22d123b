"""The order of a learner checkpoint, in one place (DESIGN §4, exactly-once state).

1. flush the dead-letter sink: every dead letter of the records covered is acknowledged;
2. write the snapshot(s) (atomic and durable): the state and the next offsets it reflects;
3. commit those offsets to the consumer group (lag monitoring only: the snapshot is the truth).

A crash between any two steps loses nothing and counts nothing twice in the state. With
``learn --exactly-once`` (a Kafka state topic), steps 1 and 2 are one Kafka transaction
(:func:`write_in_transaction`, called by the store's write): the dead letters wait in memory and
join the snapshot's transaction, so they too are exactly once. Both the
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


def write_in_transaction(transaction: Any, letters: list[tuple[str, Any, Any]],
                         write: Callable[[], _T]) -> _T:
    """Step 1 and 2 of a checkpoint in one Kafka transaction (``learn --exactly-once``, see
    :mod:`~streambayes.runtime.loops.learn_exactly_once`): begin; send ``letters`` (``(topic,
    key, value)`` buffered since the last checkpoint); ``write()`` the snapshot (its records join
    the transaction); commit. Step 3 (the group offsets, lag only) follows as above. An aborted
    transaction raises :class:`~streambayes.runtime.kafka.transactions.Aborted` (nothing of it is
    visible to read_committed readers: the caller may try the same letters and state again); a
    fenced producer, a :class:`~streambayes.errors.BrokerError`."""
    written: list[_T] = []

    def publish() -> None:
        for topic, key, value in letters:
            transaction.send(topic, key, value)
        written.append(write())

    transaction.exactly_once(publish, None, "", {})
    return written[0]
