"""``kill -9`` and start members of a learner group mid-stream, for tests and benchmarks.

:func:`learn_group_with_kills` produces events to a multi-partition topic while ``members``
``streambayes learn`` processes (no ``--partitions``: one consumer group, one shard per partition
in one snapshot directory) consume them. Whenever the shards show progress, the oldest member
(it holds partitions) is killed with SIGKILL and a new one started; partitions may be added to
the topic mid-stream. The producer goes on until every kill has happened, then stops; the group
catches up and every member is stopped with SIGTERM. Compare the merged state with :func:`~.kills.learn_file`.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streambayes.devtools.kills import (
    Event,
    _Producer,
    catches_sigterm,
    events_in,
    learn_command,
    wait_until,
)


@dataclass
class GroupRun:
    """What :func:`learn_group_with_kills` did: events in the shards at each kill, the events
    produced, the merged final state, the members started in all, and the wall time."""

    kills: list[int] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    merged: Any = None
    started: int = 0
    seconds: float = 0.0


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    """Grow ``topic`` to ``total`` partitions (the producer's keys then spread over them too)."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewPartitions

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_partitions({topic: NewPartitions(total_count=total)})
    finally:
        admin.close()


class Members:
    """The processes of one group (learners writing one snapshot directory, or predictors), all
    writing one log; ``start(command)`` runs another command than the group's own."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path,
                 what: str = "learner") -> None:
        # faulthandler on: a member that does not stop is sent SIGABRT and dumps its threads
        self.command, self.env = command, {**env, "PYTHONFAULTHANDLER": "1"}
        self.log, self.what = log, what
        self.live: list[subprocess.Popen] = []
        self.started = 0

    def start(self, command: list[str] | None = None) -> None:
        with open(self.log, "ab") as out:
            out.write(f"--- member {self.started} starts\n".encode())
            out.flush()
            proc = subprocess.Popen(command or self.command, stdout=out, stderr=out, env=self.env)
        self.live.append(proc)
        self.started += 1

    def _why(self, last: int = 40) -> str:
        """The members' own last words in the shared log (its errors and final lines), so a
        failure in CI can be read without the temporary directory."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        mine = [ln for ln in lines if not ln.split(" ", 3)[-1].startswith("kafka.")]
        return "\n".join(["", f"--- {self.log.name} without the client's own lines, last {last}:",
                          *mine[-last:]])

    def stacks(self, last: int = 150) -> str:
        """Every live member's thread stacks (SIGUSR1: ``learn`` and ``predict`` write them to
        stderr and go on) with the log's last lines: what a failed wait shows."""
        for proc in self.live:
            if proc.poll() is None and catches_sigterm(proc.pid):
                proc.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
        return self._why(last)

    def kill(self) -> None:
        """SIGKILL the oldest live member: it has held partitions since the group settled."""
        proc = self.live.pop(0)
        if proc.poll() is not None:
            raise RuntimeError(f"a {self.what} exited early ({proc.returncode}): see {self.log}"
                               + self._why())
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def check(self) -> None:
        """Raise if a live member has exited on its own."""
        for proc in self.live:
            if proc.poll() is not None:
                raise RuntimeError(f"a {self.what} exited early ({proc.returncode}): see {self.log}"
                                   + self._why())

    def stop(self, timeout: float) -> None:
        """SIGTERM every live member once it listens for it (a member still importing would be
        killed by it, as any Python program is), and wait for them to exit. A member that does
        not listen or exit within ``timeout`` s is sent SIGABRT (faulthandler writes its threads'
        stacks to the log) and the error shows them."""
        deadline = time.monotonic() + timeout
        for proc in self.live:
            while proc.poll() is None and not catches_sigterm(proc.pid):
                if time.monotonic() > deadline:
                    break  # sent anyway: it is then killed by it, or found hung below
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
        codes: list[int | None] = []
        for proc in self.live:
            try:
                codes.append(proc.wait(max(deadline - time.monotonic(), 0.0) + timeout))
            except subprocess.TimeoutExpired:
                codes.append(None)
        hung = [proc for proc, code in zip(self.live, codes, strict=True) if code is None]
        for proc in hung:
            proc.send_signal(signal.SIGABRT)
        for proc in hung:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.live = []
        if hung:
            raise RuntimeError(f"{self.what}s (pid {', '.join(str(p.pid) for p in hung)}) did not "
                               f"stop within {timeout:g} s of SIGTERM: see {self.log}" + self._why(80))
        if any(codes):
            raise RuntimeError(f"{self.what}s exited {codes} on SIGTERM: see {self.log}" + self._why())

    def close(self) -> None:
        for proc in self.live:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def learn_group_with_kills(bootstrap: str, topic: str, make: Event, options: Sequence[str],
                           workdir: Path, *, members: int, kills: int, rng: random.Random,
                           grow_to: int | None = None, rate: float = 2_000,
                           minimum: int = 2_000, max_pause: float = 0.6,
                           timeout: float = 120.0) -> GroupRun:
    """Learn ``kafka://bootstrap/topic`` with ``members`` group learners while producing events;
    ``kills`` times, once the shards show progress, kill the oldest member (SIGKILL) and start a
    new one; after the first kill, grow the topic to ``grow_to`` partitions (if given).
    Shards go to ``workdir/snaps``, the members' output to ``workdir/learners.log``."""
    from streambayes.runtime.loops.shards import newest_state

    snaps, run = workdir / "snaps", GroupRun()
    command = learn_command(f"kafka://{bootstrap}/{topic}", snaps, options)
    env = {**os.environ, "PYTHONHASHSEED": "random",
           "STREAMBAYES_KAFKA_GROUP": f"learners-{topic}"}
    group = Members(command, env, workdir / "learners.log")
    start = time.monotonic()
    producer = _Producer(bootstrap, topic, make, rate, minimum,  # sees added partitions at once
                         options={"metadata_max_age_ms": 500})
    try:
        for _ in range(members):
            group.start()
        for k in range(kills):
            seen = events_in(snaps)
            wait_until(lambda s=seen: events_in(snaps) > s, timeout, "progress before a kill")
            time.sleep(rng.uniform(0.0, max_pause))
            group.kill()
            run.kills.append(events_in(snaps))
            group.start()
            if k == 0 and grow_to is not None:
                add_partitions(bootstrap, topic, grow_to)
        run.events = producer.finish(timeout)
        wait_until(lambda: events_in(snaps) >= len(run.events), timeout, "the group to catch up")
        group.stop(timeout)
    finally:
        producer.stop.set()
        group.close()
    run.merged, run.started = newest_state(snaps), group.started
    run.seconds = time.monotonic() - start
    return run
