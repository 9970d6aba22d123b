"""``kill -9`` a ``streambayes learn`` process mid-stream, again and again, for tests and benchmarks.

:func:`learn_with_kills` produces events to a Kafka topic at a steady pace while a learner
subprocess consumes them; whenever the learner's snapshots show progress it is killed with
SIGKILL at a random moment and restarted at once. The producer keeps going until every kill has
happened (so each lands while events are still arriving), then stops; the learner catches up and
is stopped with SIGTERM. :func:`learn_file` is the uninterrupted reference: the same events, the
same learner options, one ``streambayes learn`` of a JSONL file. :func:`state_difference`
compares the two final states array by array.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streambayes.snapshot import Snapshot, SnapshotStore

Event = Callable[[int], dict]  # i -> the i-th event (a JSON object with a unique "id")


@dataclass
class KillRun:
    """What :func:`learn_with_kills` did: the snapshot counts at each kill, the events produced,
    the final snapshot and the wall time of the whole run."""

    kills: list[int] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    snapshot: Any = None  # the final Snapshot, or the Merged shards of a group learner
    seconds: float = 0.0


def cycled(rows: Sequence[tuple[str, Mapping[str, Any]]], prefix: str, label_field: str = "label") -> Event:
    """Event ``i``: row ``i mod len(rows)`` as ``{"id", label_field: label, "features"}``."""
    def make(i: int) -> dict:
        label, features = rows[i % len(rows)]
        return {"id": f"{prefix}-{i:07d}", label_field: label, "features": dict(features)}
    return make


def csv_rows(path: Path, label: str = "class") -> list[tuple[str, dict[str, str]]]:
    """``(label, {column: cell})`` of a CSV file whose cells are all categorical (e.g. UCI nursery)."""
    import csv

    with open(path, newline="", encoding="utf-8") as fh:
        return [(row.pop(label), row) for row in csv.DictReader(fh)]


def network_rows(bif: Path, n: int, label: str, missing: float, seed: int = 0
                 ) -> list[tuple[str, dict[str, str]]]:
    """``n`` rows forward-sampled from a BIF network; every other variable's cell is missing
    (left out) with probability ``missing``, so a Bayesian network learns them by online EM."""
    from streambayes.models.bayesnet import read_bif
    from streambayes.models.bayesnet.sampling import forward_sample

    net = read_bif(bif)
    rng = np.random.default_rng(seed)
    out = []
    for row in net.decode(forward_sample(net, n, seed)):
        cls = row.pop(label)
        out.append((cls, {v: s for v, s in row.items() if rng.random() >= missing}))
    return out


def tsv_rows(path: Path) -> list[tuple[str, str]]:
    """``(label, text)`` of a ``label<TAB>text`` file (the SMS Spam Collection)."""
    with open(path, encoding="utf-8") as fh:
        return [(label, text) for label, _, text in (line.rstrip("\r\n").partition("\t") for line in fh)
                if text]


CASES = ("nb", "aode", "bn")


def crash_case(model: str, data: Path) -> tuple[Event, list[str], float]:
    """``(event maker, learner options, pace in events/s)`` of a standard crash case, data under
    ``data``: ``nb`` on the SMS Spam Collection (text), ``aode`` on UCI nursery (categorical
    features), ``bn`` on the asia network classifying ``lung``, with 10% of the other cells missing
    (so online EM runs)."""
    if model == "nb":
        sms = tsv_rows(data / "sms_spam_collection" / "SMSSpamCollection")

        def make(i: int) -> dict:
            label, text = sms[i % len(sms)]
            return {"id": f"c-{i:07d}", "label": label, "text": text}

        return make, ["--model", "nb"], 3_000
    if model == "aode":
        return cycled(csv_rows(data / "uci" / "nursery.csv"), "a"), ["--model", "aode"], 2_000
    if model == "bn":
        asia = data / "bif" / "asia.bif"
        rows = network_rows(asia, 5_000, label="lung", missing=0.1, seed=1)
        options = ["--model", "bn", "--network", str(asia), "--label-field", "lung"]
        return cycled(rows, "b", "lung"), options, 2_000
    raise ValueError(f"no crash case for {model!r} (cases: {', '.join(CASES)})")


def encode(event: Mapping) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode("utf-8")


def learn_command(source: str, snapshots: Path, options: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "streambayes", "learn", "--source", source,
            "--snapshots", str(snapshots), *options]


def events_in(snapshots: Path, whole: bool = False) -> int:
    """Events in the newest snapshot, or a group's shards' newest ones summed (0: none yet). A
    shard with no snapshot yet counts 0, not the whole group: after partitions are added, a new
    shard's store can be there before its first snapshot (a kill seen then counted 0 events).
    ``whole``: 0 until every shard has one (a rate measured from the group's first checkpoint)."""
    from streambayes.runtime.loops.shards import expand_shards
    from streambayes.snapshot import SnapshotStore

    headers = [s.latest_header() for s in expand_shards([SnapshotStore(snapshots)])]
    if whole and any(h is None for h in headers):
        return 0
    return sum(int(h["events"]) for h in headers if h is not None)


def wait_until(condition: Callable[[], bool], timeout: float, what: str, step: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(step)


def catches_sigterm(pid: int) -> bool:
    """Whether process ``pid`` has installed a SIGTERM handler yet (Linux: its ``SigCgt`` mask
    in ``/proc``), so that SIGTERM asks it to stop rather than killing it during start-up; True
    where ``/proc`` cannot say (not Linux) or the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    except OSError:
        pass
    return True


class _Producer(threading.Thread):
    """Sends ``make(0), make(1), …`` at ``rate`` events/s in blocks of ``block`` until ``stop`` is
    set and at least ``minimum`` events are out; ``produced`` lists what was sent."""

    def __init__(self, bootstrap: str, topic: str, make: Event, rate: float, minimum: int,
                 block: int = 250, options: Mapping[str, Any] | None = None,
                 client: str = "kafka-python") -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.make = bootstrap, topic, make
        self.rate, self.minimum, self.block = rate, minimum, block
        self.options = options  # of the client's producer, in its own spelling
        self.client = client
        self.stop = threading.Event()
        self.produced: list[dict] = []
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        if self.client == "confluent":
            from streambayes.runtime.kafka.confluent_sink import KafkaSink
        else:
            from streambayes.runtime.kafka.kafka_python_sink import KafkaSink

        try:
            sink = KafkaSink(self.bootstrap, options=self.options)
            start = time.monotonic()
            while not (self.stop.is_set() and len(self.produced) >= self.minimum):
                for _ in range(self.block):
                    event = self.make(len(self.produced))
                    sink.send(self.topic, str(event["id"]), encode(event))
                    self.produced.append(event)
                sink.flush()
                ahead = len(self.produced) / self.rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
            sink.close()
        except BaseException as exc:  # noqa: BLE001 (handed to the caller)
            self.error = exc

    def finish(self, timeout: float) -> list[dict]:
        """Stop after one more block at least: what the caller did before (a kill) then lands
        mid-stream even when the learners had caught up with the events sent so far (a kill
        after the last event was a failure in CI)."""
        self.minimum = max(self.minimum, len(self.produced) + self.block)
        self.stop.set()
        self.join(timeout)
        if self.is_alive():
            raise TimeoutError("the producer did not stop")
        if self.error is not None:
            raise self.error
        return self.produced


def learn_with_kills(bootstrap: str, topic: str, make: Event, options: Sequence[str], workdir: Path, *,
                     kills: int, rng: random.Random, rate: float = 2_000, minimum: int = 2_000,
                     max_pause: float = 0.6, timeout: float = 120.0) -> KillRun:
    """Learn ``kafka://bootstrap/topic`` with ``options`` while producing events, killing the
    learner ``kills`` times (each after its snapshots have shown progress, at a random moment up
    to ``max_pause`` s later). Snapshots go to ``workdir/snaps``, the learner's output to
    ``workdir/learner.log``."""
    snaps, run = workdir / "snaps", KillRun()
    command = learn_command(f"kafka://{bootstrap}/{topic}", snaps, options)
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    start = time.monotonic()
    with open(workdir / "learner.log", "ab") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=log, env=env)
        producer = _Producer(bootstrap, topic, make, rate, minimum)
        try:
            for _ in range(kills):
                seen = events_in(snaps)
                wait_until(lambda s=seen: events_in(snaps) > s, timeout, "progress before a kill")
                time.sleep(rng.uniform(0.0, max_pause))
                if proc.poll() is not None:
                    raise RuntimeError(f"the learner exited early ({proc.returncode}): see {log.name}")
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                run.kills.append(events_in(snaps))
                proc = subprocess.Popen(command, stdout=log, stderr=log, env=env)
            run.events = producer.finish(timeout)
            wait_until(lambda: events_in(snaps) >= len(run.events), timeout, "the learner to catch up")
            proc.send_signal(signal.SIGTERM)
            if proc.wait(timeout) != 0:
                raise RuntimeError(f"the learner exited {proc.returncode} on SIGTERM: see {log.name}")
        finally:
            producer.stop.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    from streambayes.runtime.loops.shards import newest_state

    run.snapshot = newest_state(snaps)  # a group learner's shards, merged
    run.seconds = time.monotonic() - start
    return run


def learn_file(events: Sequence[Mapping], options: Sequence[str], workdir: Path,
               timeout: float = 300.0) -> Snapshot:
    """The uninterrupted reference: one ``streambayes learn`` of ``events`` written as JSONL."""
    path = workdir / "events.jsonl"
    path.write_bytes(b"".join(encode(e) + b"\n" for e in events))
    snaps = workdir / "reference"
    with open(workdir / "reference.log", "ab") as log:
        code = subprocess.run(learn_command(str(path), snaps, options), stdout=log, stderr=log,
                              timeout=timeout, check=False).returncode
    if code != 0:
        raise RuntimeError(f"the reference learn exited {code}: see {workdir / 'reference.log'}")
    snapshot = SnapshotStore(snaps).latest()
    assert snapshot is not None
    return snapshot


def state_difference(a: Any, b: Any, path: str = "state") -> tuple[str | None, float, str]:
    """``(first difference or None, max |a - b| over numeric arrays of the same shape, where that
    max is)``; arrays are equal when ``np.array_equal`` (bitwise on floats, NaN ≠ NaN); a
    structural difference (keys, shapes, scalars) gives an infinite max."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if a.keys() != b.keys():
            return f"{path}: keys differ", float("inf"), path
        found = [state_difference(a[k], b[k], f"{path}.{k}") for k in a]
    elif isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return f"{path}: lengths differ", float("inf"), path
        found = [state_difference(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b, strict=True))]
    elif isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if a.shape != b.shape:
            return f"{path}: shapes {a.shape} and {b.shape}", float("inf"), path
        if np.array_equal(a, b):
            return None, 0.0, ""
        numeric = a.dtype.kind in "biuf" and b.dtype.kind in "biuf"
        diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if numeric else float("inf")
        return f"{path}: {int((a != b).sum())} elements differ", diff, path
    else:
        return (None, 0.0, "") if a == b else (f"{path}: {a!r} != {b!r}", float("inf"), path)
    first = next((f for f, _, _ in found if f is not None), None)
    _, diff, where = max(found, key=lambda t: t[1], default=(None, 0.0, ""))
    return first, diff, where
