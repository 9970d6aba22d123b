"""``kill -9`` learners whose stream holds bad records: are their dead letters exactly once?

:func:`learn_letters_with_kills` produces events (some invalid) to a topic while ``members``
``streambayes learn`` processes learn it into a Kafka state topic (``--snapshots kafka://...``),
their dead letters going to a Kafka topic. ``partitions`` given: one static learner
(``--partitions``) restarted after each kill; else a consumer group of ``members``, the oldest
member killed and a new one started. Once every kill has happened the producer stops, the learners
catch up and are stopped with SIGTERM; then a ``read_committed`` reader takes every dead letter of
the topic (``run.letters``, one id per letter) and the merged newest state of the store. Give
``--exactly-once`` in ``options`` for the transactional checkpoints; without it the letters are at
least once (a kill re-sends the letters of the records read since the last snapshot).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streambayes.devtools.group_kills import Members
from streambayes.devtools.kills import Event, _Producer, learn_command, wait_until


@dataclass
class LetterRun:
    """What :func:`learn_letters_with_kills` did: learned events at each kill, the events
    produced, the ids of the committed dead letters (one per letter), the merged final state."""

    kills: list[int] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    letters: list[str] = field(default_factory=list)
    merged: Any = None
    seconds: float = 0.0


def committed_letter_ids(bootstrap: str, topic: str, seconds: float = 2.0) -> list[str]:
    """The event ids in the dead letters a ``read_committed`` reader sees on ``topic``."""
    from streambayes.runtime.kafka import kafka_python

    source = kafka_python.AssignedSource(
        bootstrap, topic, options={"isolation_level": "read_committed"}, refresh_seconds=0.5)
    try:
        records, deadline = [], time.monotonic() + seconds
        while time.monotonic() < deadline:
            records.extend(source.poll(10_000, timeout=0.2))
    finally:
        source.close()
    return [str(json.loads(json.loads(r.value)["payload"])["id"]) for r in records]


def learn_letters_with_kills(bootstrap: str, topic: str, make: Event, options: Sequence[str],
                             workdir: Path, *, state_topic: str, dead_topic: str, kills: int,
                             rng: random.Random, members: int = 1, static: bool = False,
                             client: str = "kafka-python", rate: float = 1_000,
                             minimum: int = 4_000, max_pause: float = 0.6,
                             timeout: float = 120.0) -> LetterRun:
    """Learn ``topic`` into ``kafka://bootstrap/state_topic`` with dead letters to ``dead_topic``,
    killing a learner ``kills`` times (see the module doc); the learners' output goes to
    ``workdir/learners.log``; ``static``: one learner of partition 0 (``--partitions 0``)."""
    from streambayes.runtime.loops.shards import newest_state, newest_summary
    from streambayes.runtime.stores import open_store

    state = f"kafka://{bootstrap}/{state_topic}"
    options = [*options, "--dead-letter", f"kafka://{bootstrap}/{dead_topic}",
               *(["--partitions", "0"] if static else [])]
    command = learn_command(f"kafka://{bootstrap}/{topic}", state, options)  # type: ignore[arg-type]
    env = {**os.environ, "PYTHONHASHSEED": "random", "STREAMBAYES_KAFKA_CLIENT": client,
           "STREAMBAYES_KAFKA_GROUP": f"learners-{topic}"}
    group = Members(command, env, workdir / "learners.log")
    store = open_store(state)  # one reader for the whole run (read_committed)
    run, start = LetterRun(), time.monotonic()

    def learned() -> int:
        group.check()
        summary = newest_summary(store)
        return 0 if summary is None else int(summary["events"])

    producer = _Producer(bootstrap, topic, make, rate, minimum)
    try:
        for _ in range(1 if static else members):
            group.start()
        for _ in range(kills):
            seen = learned()
            wait_until(lambda s=seen: learned() > s, timeout, "progress before a kill", step=0.2)
            time.sleep(rng.uniform(0.0, max_pause))
            group.kill()
            run.kills.append(learned())
            group.start()
        run.events = producer.finish(timeout)
        good = sum(1 for e in run.events if isinstance(e.get("text"), str))
        wait_until(lambda: learned() >= good, timeout, "the learners to catch up", step=0.2)
        group.stop(timeout)
        run.merged = newest_state(store)
        run.letters = committed_letter_ids(bootstrap, dead_topic)
    finally:
        producer.stop.set()
        group.close()
        store.log.close()
    run.seconds = time.monotonic() - start
    return run
