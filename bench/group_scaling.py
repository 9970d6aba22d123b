"""Group-managed learners: scale-out and take-over on a local broker (issue 12 targets).

1. **Scale-out.** ``--events`` SMS events are produced first to a ``--partitions``-partition
   topic; then one static learner (``--partitions 0,1,...``), one ``streambayes learn`` without
   ``--partitions`` (a consumer group, one shard per partition), and two learners in one new
   group learn them all. Rate = events learned between the first and the last checkpoint / that
   time (start-up excluded); the broker's and the learners' CPU seconds over each phase are
   printed. A local Apache Kafka broker runs with Kafka's default initial rebalance delay (3 s;
   the test broker has none), as a deployed one does, so members started together share the first
   generation; on a broker without it the first of two may take every partition and hand half
   over seconds later, so the target is read on the settled group (from the moment every member
   holds partitions), the whole-run ratio printed beside it. Target: two >= 1.4x one (settled).
2. **Take-over.** While events arrive at ``--rate``, a second learner joins a running one; the
   time from its launch to its start-up, its assignment and its first checkpoint (it learned and
   saved events of the partitions it took over) is read from its log. Target: <= 10 s.
3. **Faults** (``--faults``): three learners in one group on a 6-partition topic while
   ``--events`` events arrive at ``--fault-rate``; members killed with ``kill -9`` and started,
   the topic grown to 8 partitions; the merged shards are compared, array for array, with one
   uninterrupted learner of the same events (:mod:`streambayes.devtools.group_kills`).

    python bench/group_scaling.py                   # 100,000 events, the default client
    python bench/group_scaling.py --client kafka-python --events 30000
    python bench/group_scaling.py --takeover-only   # the take-over alone
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.integration.helpers
from _common import data_dir, load_sms_spam, package_version  # noqa: E402

from streambayes.config import Settings
from streambayes.devtools.broker import broker_info
from streambayes.devtools.kafka_broker import cpu_seconds
from streambayes.devtools.kills import _Producer, encode, events_in, learn_command, wait_until

DEFAULT_CLIENT = Settings().kafka_client
OPTIONS = ["--model", "nb", "--every", "20000", "--every-seconds", "1", "--batch-size", "1000"]
STAMP = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO \S+: (joining|assigned|checkpoint of)")


def sms_event(texts: list[str], labels: list[str]):
    def make(i: int) -> dict:
        return {"id": f"s-{i:07d}", "label": labels[i % len(labels)], "text": texts[i % len(texts)]}
    return make


def produce_all(bootstrap: str, topic: str, make, n: int) -> None:
    from streambayes.runtime.kafka.kafka_python import KafkaSink

    sink = KafkaSink(bootstrap, linger_ms=20)
    for i in range(n):
        event = make(i)
        sink.send(topic, event["id"], encode(event))
    sink.close()


def learners(bootstrap: str, topic: str, snaps: Path, count: int, env: dict, log: Path,
             extra: tuple[str, ...] = ()) -> list[subprocess.Popen]:
    command = learn_command(f"kafka://{bootstrap}/{topic}", snaps, [*OPTIONS, *extra])
    with open(log, "ab") as out:
        return [subprocess.Popen(command, stdout=out, stderr=out, env=env) for _ in range(count)]


def stop_all(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(60)


def scale(info, topic: str, n: int, members: int, client: str, work: Path,
          extra: tuple[str, ...] = ()) -> dict:
    """Learn the pre-produced topic with ``members`` learners in a fresh group (``extra``
    options: ``--partitions ...`` for the static learner)."""
    snaps = work / f"scale-{members}{'-static' if extra else ''}"
    env = {**os.environ, "STREAMBAYES_KAFKA_CLIENT": client,
           "STREAMBAYES_KAFKA_GROUP": f"scale-{members}-{topic}"}
    cpu0 = cpu_seconds(getattr(info.handle, "process", None))
    log = work / f"scale-{members}{'-static' if extra else ''}.log"
    procs = learners(info.bootstrap, topic, snaps, members, env, log, extra)
    try:
        wait_until(lambda: events_in(snaps, whole=True) > 0, 120, "a first checkpoint", step=0.02)
        t0, e0 = time.monotonic(), events_in(snaps, whole=True)
        # with no initial rebalance delay (the test broker's setting; Kafka's default is 3 s) the
        # first member to join may take every partition and hand half over a few seconds later:
        # the group's own rate is read once every member holds partitions
        settled = None if extra else members
        wait_until(lambda: settled is None or _assigned(log) >= settled or events_in(snaps) >= n,
                   120, "every member to hold partitions", step=0.02)
        t1, e1 = time.monotonic(), events_in(snaps)
        wait_until(lambda: events_in(snaps) >= n, 900, "every event learned", step=0.02)
        t2 = time.monotonic()
        seconds = max(t2 - t0, 1e-9)  # too few events: all in the first checkpoint
    finally:
        cpu1 = cpu_seconds(getattr(info.handle, "process", None))
        learners_cpu = sum(cpu_seconds(p) or 0.0 for p in procs)  # start-up included
        stop_all(procs)
    broker = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
    return {"events_per_s": (n - e0) / seconds, "seconds": seconds, "broker_cpu_s": broker,
            "learners_cpu_s": learners_cpu,
            "settled_per_s": (n - e1) / (t2 - t1) if n > e1 and t2 > t1 else None,
            "settled_seconds": t2 - t1, "settled_after_s": t1 - t0}


def _assigned(log: Path) -> int:
    """How many times partitions were assigned in ``log`` (a member's first assignment, or a new
    one after a rebalance)."""
    try:
        return sum(1 for line in log.read_text(errors="replace").splitlines()
                   if STAMP.match(line) and " assigned " in line)
    except OSError:
        return 0


def _when(log: Path, what: str) -> float | None:
    for line in log.read_text(errors="replace").splitlines():
        m = STAMP.match(line)
        if m and m.group(2) == what:
            return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return None


def takeover(info, topic: str, rate: float, client: str, work: Path, make) -> dict:
    """A second learner joins a running one while events arrive at ``rate``."""
    snaps = work / "takeover"
    env = {**os.environ, "STREAMBAYES_KAFKA_CLIENT": client,
           "STREAMBAYES_KAFKA_GROUP": f"takeover-{topic}"}
    producer = _Producer(info.bootstrap, topic, make, rate, minimum=0)
    first = learners(info.bootstrap, topic, snaps, 1, env, work / "first.log")
    try:
        wait_until(lambda: events_in(snaps) > 0, 120, "the first learner's progress")
        time.sleep(3.0)
        launched = time.time()
        second = learners(info.bootstrap, topic, snaps, 1, env, work / "second.log")
        log = work / "second.log"
        wait_until(lambda: _when(log, "checkpoint of") is not None, 120,
                   "the second learner's first checkpoint", step=0.1)
        stop_all(first + second)
    finally:
        producer.stop.set()
        for p in first:
            if p.poll() is None:
                p.kill()
    joining, assigned, saved = (_when(log, w) for w in ("joining", "assigned", "checkpoint of"))
    return {"started_s": None if joining is None else joining - launched,
            "assigned_s": None if assigned is None else assigned - launched,
            "resumed_s": None if saved is None else saved - launched}


def faults(info, args, work: Path) -> dict:
    """Three members, ``args.kills`` kills and starts, partitions added; merged == one learner?"""
    import random

    from streambayes.devtools.group_kills import learn_group_with_kills
    from streambayes.devtools.kills import crash_case, learn_file, state_difference
    from streambayes.runtime.kafka.kafka_python import create_topic

    topic = f"faults-{os.getpid()}"
    create_topic(info.bootstrap, topic, 6)
    make, options, _ = crash_case("nb", data_dir())
    os.environ["STREAMBAYES_KAFKA_CLIENT"] = args.client
    run = learn_group_with_kills(info.bootstrap, topic, make, [*options, *OPTIONS[2:]], work,
                                 members=3, kills=args.kills, rng=random.Random(1), grow_to=8,
                                 rate=args.fault_rate, minimum=args.events, timeout=600)
    reference = learn_file(run.events, options, work)
    from tests.integration.helpers import canonical_state

    first, diff, _ = state_difference(canonical_state(run.merged.state),
                                      canonical_state(reference.state))
    return {"events": len(run.events), "merged_events": run.merged.events, "kills": run.kills,
            "partitions": len(run.merged.positions[topic]), "equal": first is None,
            "difference": first, "max_abs": diff, "seconds": run.seconds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--client", default=DEFAULT_CLIENT, choices=["kafka-python", "confluent"])
    ap.add_argument("--takeover-only", action="store_true", help="skip the scale-out phases")
    ap.add_argument("--rate", type=float, default=2_000.0, help="events/s during the take-over")
    ap.add_argument("--faults", action="store_true", help="also the kill -9 / add-partitions run")
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--fault-rate", type=float, default=4_000.0, help="events/s in --faults")
    ap.add_argument("--workdir", type=Path, help="keep the learners' logs and snapshots here "
                    "(default: a temporary directory, removed)")
    args = ap.parse_args(argv)
    texts, labels = load_sms_spam()
    make = sms_event(texts, labels)
    print(f"default client (STREAMBAYES_KAFKA_CLIENT): {DEFAULT_CLIENT}; this run: {args.client}")
    print(f"python {sys.version.split()[0]}; {args.client} "
          f"{package_version('kafka-python' if args.client == 'kafka-python' else 'confluent-kafka')}; "
          f"{args.events:,} events on {args.partitions} partitions; load {os.getloadavg()[0]:.1f}",
          flush=True)
    from streambayes.runtime.kafka.kafka_python import create_topic

    # a local Apache Kafka with Kafka's own initial rebalance delay (3 s; the test broker has 0),
    # as a deployed broker has: members started together then share the first generation
    with broker_info({"group.initial.rebalance.delay.ms": "3000"}) as info, \
            tempfile.TemporaryDirectory() as tmp:
        print(f"broker: {info}", flush=True)
        work = Path(tmp) if args.workdir is None else args.workdir
        work.mkdir(parents=True, exist_ok=True)
        topic = f"scale-{os.getpid()}"
        if not args.takeover_only:
            create_topic(info.bootstrap, topic, args.partitions)
            produce_all(info.bootstrap, topic, make, args.events)
            static = scale(info, topic, args.events, 1, args.client, work,
                           ("--partitions", ",".join(map(str, range(args.partitions)))))
            one = scale(info, topic, args.events, 1, args.client, work)
            two = scale(info, topic, args.events, 2, args.client, work)
        live = f"live-{os.getpid()}"
        create_topic(info.bootstrap, live, args.partitions)
        over = takeover(info, live, args.rate, args.client, work, make)
        fault = faults(info, args, work) if args.faults else None
    if not args.takeover_only:
        whole = two["events_per_s"] / max(one["events_per_s"], 1e-9)
        for name, r in (("static", static), ("one learner", one), ("two learners", two)):
            cpu = "n/a" if r["broker_cpu_s"] is None else f"{r['broker_cpu_s']:.1f} s"
            settled = "" if r["settled_per_s"] is None or name == "static" else (
                f"; settled {r['settled_per_s']:,.0f} events/s over {r['settled_seconds']:.1f} s "
                f"(every member held partitions {r['settled_after_s']:.1f} s after the first "
                "checkpoint)")
            print(f"{name:>13}: {r['events_per_s']:>9,.0f} events/s over {r['seconds']:.1f} s; "
                  f"broker CPU {cpu}; learners' CPU {r['learners_cpu_s']:.1f} s{settled}")
        print(f"two / one, whole run (a late member's hand-over included): {whole:.2f}x")
        if two["settled_per_s"] and one["settled_per_s"]:
            ratio = two["settled_per_s"] / one["settled_per_s"]
            print(f"two / one, settled group: {ratio:.2f}x (target >= 1.4x)  "
                  f"{'PASS' if ratio >= 1.4 else 'MISS'}")
        else:
            print("two / one, settled group: n/a (every event learned before the group settled: "
                  "use more --events)  MISS")
    resumed = over["resumed_s"]
    print(f"added learner (from its launch): started {over['started_s']:.1f} s, assigned "
          f"{over['assigned_s']:.1f} s, first checkpoint of its "
          f"partitions after {resumed:.1f} s (target <= 10 s)  "
          f"{'PASS' if resumed is not None and resumed <= 10 else 'MISS'}")
    if fault is not None:
        print(f"faults: {fault['events']:,} events, kills at {fault['kills']} events learned, "
              f"{fault['partitions']} partitions, {fault['seconds']:.0f} s; merged shards "
              f"{fault['merged_events']:,} events; equal to one uninterrupted learner: "
              f"{'yes' if fault['equal'] else 'NO: ' + str(fault['difference'])}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
