"""``kill -9`` exactly-once predictors under load, for tests and benchmarks.

:func:`predict_with_kills` starts ``instances`` ``streambayes predict --exactly-once`` processes in
one consumer group (each with its own stable ``--transactional-id``) and produces events to their
input topic at a steady pace; whenever the committed posteriors have grown since the last kill,
one predictor chosen at random is killed with SIGKILL at a random moment and restarted at once
with the same transactional id (so it fences its killed self; its partitions move meanwhile: a
rebalance). The producer keeps going until every kill has happened, then stops; the predictors
catch up and are stopped with SIGTERM. What a ``read_committed`` reader sees on the output topic
is returned with the events produced.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from random import Random

from streambayes.devtools.kills import Event, _Producer, wait_until
from streambayes.runtime.records.sources import Record


@dataclass
class PredictKillRun:
    """What :func:`predict_with_kills` did: the committed posteriors seen at each kill, the events
    produced and every committed posterior record of the output topic."""

    kills: list[int] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    posteriors: list[Record] = field(default_factory=list)
    dead_letters: list[Record] = field(default_factory=list)
    seconds: float = 0.0


class _Committed:
    """A read_committed reader of a topic from its beginning, accumulating what it has seen."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from streambayes.runtime.kafka import kafka_python

        self.source = kafka_python.AssignedSource(
            bootstrap, topic, options={"isolation_level": "read_committed"}, refresh_seconds=0.5)
        self.records: list[Record] = []

    def read(self, seconds: float = 0.2) -> int:
        self.records.extend(self.source.poll(10_000, timeout=seconds))
        return len(self.records)

    def close(self) -> None:
        self.source.close()


def predict_command(bootstrap: str, inbox: str, outbox: str, snapshots: Path, tid: str,
                    options: Sequence[str] = ()) -> list[str]:
    return [sys.executable, "-m", "streambayes", "predict", "--source", f"kafka://{bootstrap}/{inbox}",
            "--sink", f"kafka://{bootstrap}/{outbox}", "--snapshots", str(snapshots),
            "--exactly-once", "--transactional-id", tid, *options]


def predict_with_kills(bootstrap: str, inbox: str, outbox: str, make: Event, snapshots: Path,
                       workdir: Path, *, kills: int, rng: Random, dead_letters: str | None = None,
                       instances: int = 2,
                       client: str = "kafka-python", rate: float = 1_000, minimum: int = 2_000,
                       max_pause: float = 1.0, options: Sequence[str] = ("--batch-size", "200"),
                       timeout: float = 120.0) -> PredictKillRun:
    """Serve ``inbox`` → ``outbox`` with ``instances`` exactly-once predictors of ``client`` while
    producing ``make(0), make(1), ...``, killing one ``kills`` times (see the module doc); bad
    events become dead letters on the topic ``dead_letters``; the predictors' output goes to
    ``workdir/predictor.log``."""
    run, start = PredictKillRun(), time.monotonic()
    env = {**os.environ, "STREAMBAYES_KAFKA_CLIENT": client,
           "STREAMBAYES_KAFKA_GROUP": f"eos-{inbox}"}
    tids = [f"eos-{inbox}-{i}" for i in range(instances)]
    if dead_letters is not None:
        options = [*options, "--dead-letter", f"kafka://{bootstrap}/{dead_letters}"]
    commands = [predict_command(bootstrap, inbox, outbox, snapshots, t, options) for t in tids]
    reader = _Committed(bootstrap, outbox)
    letters = _Committed(bootstrap, dead_letters) if dead_letters is not None else None

    def committed_ids() -> set[str]:
        return _ids(reader.records) | (_letter_ids(letters.records) if letters else set())

    with open(workdir / "predictor.log", "ab") as log:
        procs = [subprocess.Popen(c, stdout=log, stderr=log, env=env) for c in commands]
        since = dict.fromkeys(tids, 0)  # where in the log each live predictor's lines start
        producer = _Producer(bootstrap, inbox, make, rate, minimum)
        try:
            for _ in range(kills):
                seen = reader.read()
                wait_until(lambda s=seen: reader.read() > s, timeout, "posteriors before a kill")
                time.sleep(rng.uniform(0.0, max_pause))
                i = rng.randrange(instances)
                if procs[i].poll() is not None:
                    raise RuntimeError(f"predictor {tids[i]} exited early ({procs[i].returncode}): "
                                       f"see {log.name}")
                procs[i].send_signal(signal.SIGKILL)
                procs[i].wait()
                run.kills.append(reader.read(0))
                since[tids[i]] = os.path.getsize(log.name)  # its killed self's lines are before
                procs[i] = subprocess.Popen(commands[i], stdout=log, stderr=log, env=env)
            run.events = producer.finish(timeout)
            ids = {str(e["id"]) for e in run.events}
            wait_until(lambda: (reader.read(), letters and letters.read(0.05)) and committed_ids() >= ids,
                       timeout, "every posterior or dead letter committed")
            wait_until(lambda: _all_serving(Path(log.name), tids, since), timeout,
                       "every predictor started last to be serving (SIGTERM before its handler kills it)")
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc, tid in zip(procs, tids, strict=True):
                if proc.wait(timeout) != 0:
                    raise RuntimeError(f"predictor {tid} exited {proc.returncode} on SIGTERM: "
                                       f"see {log.name}")
            reader.read(1.0)  # anything committed while stopping
            run.posteriors = reader.records
            if letters is not None:
                letters.read(1.0)
                run.dead_letters = letters.records
        finally:
            producer.stop.set()
            reader.close()
            if letters is not None:
                letters.close()
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    run.seconds = time.monotonic() - start
    return run


def _all_serving(log: Path, tids: list[str], since: dict[str, int]) -> bool:
    """Whether each live predictor has said its transactional producer is ready (it says so
    after its signal handler is installed), in the log after the point it was started at."""
    data = log.read_bytes()
    return all(f"transactional producer {tid} ready".encode() in data[since[tid]:] for tid in tids)


def _ids(records: list[Record]) -> set[str]:
    import json

    return {str(json.loads(r.value)["id"]) for r in records}


def _letter_ids(records: list[Record]) -> set[str]:
    import json

    return {str(json.loads(json.loads(r.value)["payload"])["id"]) for r in records}
