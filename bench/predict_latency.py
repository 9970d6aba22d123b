"""Predictor latency on a local broker: input to posterior, histogram per mode, backend and load.

One broker is started for the run (``streambayes.devtools.broker``'s order; the run prints which);
when the devtools start an Apache Kafka one here, it gets Kafka's stock heap, ``-Xmx1G -Xms1G``
(``STREAMBAYES_BROKER_HEAP_OPTS``; the tests' broker starts with 128 MB, whose young collections
every ~3 s, 11-17 ms each, stall both topics at once). A warm-up run comes first (``--warmup``, 30
s at 2,000 events/s), reported on its own line and not in the table: on a new broker the first
runs' latencies fell run by run over some 40 s of load (p50 1.5-2.6 s in an 8 s warm-up, then 75,
24, 6 ms in the next three runs), the JVM compiling its hot paths; then every client, mode and
load runs ``--repeats`` times (3), round by round, and the table gives the medians and the p99's
range. A model is trained on the SMS
Spam Collection; for each client backend and offered load, a ``streambayes predict`` process
(the CLI, in its own process as deployed) serves a fresh 1-partition topic while this process
offers unlabelled SMS events at a steady pace (a tick every 2 ms, confluent producer,
``linger.ms=0``) and reads the posterior topic with a ``read_committed`` consumer. Per event:

  sent→readable   from the moment the input was handed to the producer to the moment its posterior
                  was read here (committed and visible: what a downstream consumer sees)
  sent→produced   to the posterior's Kafka timestamp (the predictor's produce call; ms resolution)

Modes: ``at-least-once`` (the default predictor: acknowledgements pipelined, offsets committed
once acknowledged), ``flush/batch`` (the previous behaviour, kept as the peer: a blocking flush
with acks=all and a synchronous offset commit after every micro-batch), ``exactly-once``
(``--exactly-once``: one transaction per micro-batch), ``hot-reload`` (at least once while a
new snapshot is written every second by another process, as a learner would, so the predictor
reloads its model under load) and
``echo``, the floor of this machine and client: a process that only reads each input with the
client's own consumer and writes ``{"id": ...}`` back with its producer, with the predictor's
fetch and produce settings and no model, decoding or clues (what any Python service on this
broker and these cores pays). Loads default to 500, 2,000 and 5,000 events/s for the predictor
(at least once) and the floor; the other modes run at 2,000. The table also gives the
predictor's CPU per event and its longest garbage-collector pause during the load.
``BENCH_EVENTS=FILE`` appends each run's per-event times (sent, produced, readable) to FILE;
``BENCH_TRACE=PREFIX`` writes the predictor's steps over 10 ms (poll, publish, settle, commit) and
kafka-python's idle sleeps inside its poll, with their start times, to PREFIX.<pid>;
``BENCH_THREADS=FILE`` writes the predictor's CPU seconds per thread (its main thread and the
clients' I/O threads) to FILE; ``BENCH_PROFILE=PREFIX`` a cProfile of it.

    /work/venv/bin/python bench/predict_latency.py                   # ~3 minutes
    /work/venv/bin/python bench/predict_latency.py --seconds 5 --backends confluent --rates 2000
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from _common import load_sms_spam, package_version, print_table

from streambayes.devtools.broker import broker_info
from streambayes.runtime.kafka import kafka_python
from streambayes.snapshot import SnapshotStore

BACKENDS = ("kafka-python", "confluent")
MODES = {"at-least-once": [], "flush/batch": [], "exactly-once": ["--exactly-once"],
         "hot-reload": [],  # at least once, a new snapshot written every second meanwhile
         "echo": []}  # the floor: no model, each input's id sent back (see _echo)
TICK = 0.002  # seconds between two bursts of the offered load


def trained_snapshot(directory: Path) -> None:
    from streambayes.models import make_model

    texts, labels = load_sms_spam()
    model = make_model("nb")
    model.learn_many([{"text": t} for t in texts], labels)
    SnapshotStore(directory).write(model.to_state(), model="nb", positions={}, events=len(texts))


class Observer(threading.Thread):
    """Reads the posterior topic (read_committed) and notes when each posterior became readable."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        import confluent_kafka as ck

        self.consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"obs-{topic}",
                                     "isolation.level": "read_committed",
                                     "enable.auto.commit": False, "fetch.wait.max.ms": 10})
        self.consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        self.seen: dict[str, tuple[float, float]] = {}  # id -> (read at, posterior timestamp s)
        self.stop = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stop.is_set():
            messages = self.consumer.consume(1000, 0)  # consume(n, t) waits for all n: no
            if not messages:
                messages = self.consumer.consume(1, 0.05)
            for m in messages:
                if m.error() is None:
                    now = time.time()
                    self.seen[json.loads(m.value())["id"]] = (now, m.timestamp()[1] / 1000)
        self.consumer.close()


def load_producer(bootstrap: str):
    """The producer of the offered load: one per run, made (connected, its producer id and the
    topic's metadata fetched) by the warm-up records before the timed load. Until stop 30 each
    offer made its own, and the first ~100 ms of every run waited for that start-up (12-20 ms of
    the events' sent→produced time there, read as the predictor's)."""
    import confluent_kafka as ck

    return ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})


def offer(producer, topic: str, events: list[tuple[str, bytes]], rate: float) -> dict[str, float]:
    """Send ``events`` at ``rate`` per second (bursts every ``TICK``); {id: time handed over}."""
    sent: dict[str, float] = {}
    start = time.perf_counter()
    i = 0
    while i < len(events):
        due = min(len(events), int((time.perf_counter() - start) * rate) + 1)
        for event_id, value in events[i:due]:
            sent[event_id] = time.time()
            producer.produce(topic, value)
        i = max(i, due)
        producer.poll(0)
        time.sleep(TICK)
    producer.flush(30)
    return sent


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def predictor(bootstrap: str, inbox: str, outbox: str, snaps: Path, client: str, mode: str,
              log: Path, gc_file: Path) -> subprocess.Popen:
    command = [sys.executable, __file__, "serve", "--mode", mode, "--", "predict",
               "--source", f"kafka://{bootstrap}/{inbox}", "--sink", f"kafka://{bootstrap}/{outbox}",
               "--snapshots", str(snaps), *MODES[mode]]
    if mode == "exactly-once":
        command += ["--transactional-id", f"bench-{inbox}"]
    env = {**os.environ, "STREAMBAYES_KAFKA_CLIENT": client,
           "STREAMBAYES_KAFKA_GROUP": f"bench-{inbox}", "BENCH_GC": str(gc_file)}
    with open(log, "ab") as fh:
        return subprocess.Popen(command, stdout=fh, stderr=fh, env=env)


class Rewriter:
    """Writes a new snapshot (the newest one again, one event more) every second, in a process of
    its own, as a learner would (until stop 31 a thread of this process did it, whose loads and
    writes could hold the GIL the observer needs to time the posteriors it reads)."""

    def __init__(self, snaps: Path) -> None:  # made before the load: its start-up is no part of it
        self.proc = subprocess.Popen([sys.executable, __file__, "rewrite", str(snaps)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=30)
        return int(out.strip() or 0)


def rewrite(snaps: Path) -> int:
    """The :class:`Rewriter`'s process: a snapshot a second until SIGTERM; prints how many."""
    store, stop, written = SnapshotStore(snaps), threading.Event(), 0
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    sys.stdin.readline()  # "go": the load has started
    while not stop.wait(1.0):
        newest = store.latest()
        store.write(newest.state, model=newest.model, positions={}, events=newest.events + 1)
        written += 1
    print(written, flush=True)
    return 0


def run_one(bootstrap: str, snaps: Path, client: str, mode: str, rate: float, seconds: float,
            texts: list[str], log: Path) -> dict:
    tag = f"{client}-{mode.replace('/', '').replace(' ', '')}-{int(rate)}-{time.time_ns() % 10**9}"
    inbox, outbox = f"lat-in-{tag}", f"lat-out-{tag}"
    kafka_python.create_topic(bootstrap, inbox, 1)
    kafka_python.create_topic(bootstrap, outbox, 1)
    observer = Observer(bootstrap, outbox)
    gc_file = log.with_name(f"gc-{tag}.json")
    proc = predictor(bootstrap, inbox, outbox, snaps, client, mode, log, gc_file)
    producer = load_producer(bootstrap)
    writer = Rewriter(snaps) if mode == "hot-reload" else None
    try:
        deadline = time.monotonic() + 90
        cpu0 = 0.0
        while not any(k.startswith("warm") for k in list(observer.seen)):  # the group has joined
            offer(producer, inbox, [(f"warm-{time.time_ns()}", json.dumps(
                {"id": f"warm-{time.time_ns()}", "text": "hello"}).encode())], 100)
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the predictor did not answer: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        cpu0 = cpu_seconds(proc.pid)
        n = int(rate * seconds)
        events = [(f"lat-{i:07d}", json.dumps({"id": f"lat-{i:07d}", "text": texts[i % len(texts)]},
                                                separators=(",", ":")).encode()) for i in range(n)]
        if writer is not None:
            writer.go()
        start, start_wall = time.perf_counter(), time.time()
        try:
            sent = offer(producer, inbox, events, rate)
        finally:
            reloads = writer.finish() if writer is not None else 0
        offered = n / (time.perf_counter() - start)
        deadline = time.monotonic() + 60
        while sum(k.startswith("lat") for k in list(observer.seen)) < n and time.monotonic() < deadline:
            time.sleep(0.1)
        cpu = cpu_seconds(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        observer.stop.set()
        observer.join(10)
        if writer is not None and writer.proc.poll() is None:  # the load failed before finish
            writer.proc.kill()
    window = (min(sent.values(), default=0.0), max((v[0] for v in observer.seen.values()), default=0.0))
    pauses = [ms for at, ms, _gen in (json.loads(gc_file.read_text()) if gc_file.exists() else [])
              if window[0] <= at <= window[1]]
    got = {k: v for k, v in observer.seen.items() if k in sent}
    readable = np.array([(got[k][0] - sent[k]) * 1000 for k in got])
    produced = np.array([(got[k][1] - sent[k]) * 1000 for k in got])
    pct = {f"p{q}": float(np.percentile(readable, q)) for q in (50, 90, 99)} if len(got) else {}
    # the steady state: the events sent after the load's first second (a predictor that was idle
    # falls some 10 ms behind in its first ~30 ms of load, and the broker's first writes of the
    # run's new topics come then; both are in the whole run's p99)
    after = np.array([sent[k] - start_wall >= 1.0 for k in got])
    if after.any():
        pct["p99_after_1s"] = float(np.percentile(readable[after], 99))
    if os.environ.get("BENCH_EVENTS"):  # every event's times: sent, produced, readable (epoch s)
        with open(os.environ["BENCH_EVENTS"], "a") as out:
            out.write(json.dumps({"tag": tag, "events": [[sent[k], got[k][1], got[k][0]]
                                                         for k in sorted(got)]}) + "\n")
    return {"client": client, "mode": mode, "rate": rate, "snapshots_written": reloads,
            "offered": offered, "n": n,
            "got": len(got), **pct, "cpu_ms_per_event": (cpu - cpu0) * 1000 / max(1, n),
            "gc_max_ms": max(pauses, default=0.0), "gc_total_ms": sum(pauses),
            "max": float(readable.max()) if len(got) else float("nan"),
            "produced_p50": float(np.percentile(produced, 50)) if len(got) else float("nan"),
            "produced_p99": float(np.percentile(produced, 99)) if len(got) else float("nan")}


def serve(argv: list[str]) -> int:
    """The predictor process: ``streambayes predict``; ``--mode flush/batch`` restores the old
    flush and synchronous commit after every micro-batch (the peer)."""
    mode, rest = argv[2], argv[4:]  # serve --mode MODE -- predict ...
    from streambayes.cli import main as cli_main

    if mode == "echo":
        return _echo(rest)

    if mode == "flush/batch":
        from streambayes.runtime.kafka import pipelined
        from streambayes.runtime.loops.predict import PredictLoop

        PredictLoop.__init__.__kwdefaults__.update(settle_seconds=0.0, commit_seconds=0.0)
        pipelined.commit_async = lambda source, positions: False  # synchronous, as it was
    if os.environ.get("BENCH_THREADS"):  # CPU seconds per thread (client I/O threads), at the end
        import atexit

        last: dict = {}

        def sample() -> None:
            while True:
                names = {t.native_id: t.name for t in threading.enumerate()}
                for task in Path("/proc/self/task").iterdir():
                    try:
                        f = (task / "stat").read_text().rsplit(")", 1)[1].split()
                        comm = (task / "comm").read_text().strip()
                    except OSError:  # the thread ended meanwhile
                        continue
                    tid = int(task.name)
                    last[tid] = (names.get(tid, comm),
                                 (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"))
                time.sleep(0.5)

        threading.Thread(target=sample, daemon=True).start()
        atexit.register(lambda: Path(os.environ["BENCH_THREADS"]).write_text(
            "\n".join(f"{n}: {c:.2f}" for n, c in last.values())))
    if os.environ.get("BENCH_GC"):  # the garbage collector's pauses, written at the end
        import atexit
        import gc

        pauses: list[tuple[float, float, int]] = []  # (wall time, ms, generation)
        began = [0.0]

        def timing(phase: str, info: dict) -> None:
            if phase == "start":
                began[0] = time.perf_counter()
            else:
                pauses.append((time.time(), (time.perf_counter() - began[0]) * 1000,
                               info["generation"]))

        gc.callbacks.append(timing)
        atexit.register(lambda: Path(os.environ["BENCH_GC"]).write_text(json.dumps(pauses)))
    if os.environ.get("BENCH_TRACE"):  # the predict loop's steps that took over 10 ms, timed
        import atexit

        from streambayes.runtime.kafka import kafka_python as kp
        from streambayes.runtime.loops.predict import PredictLoop

        steps: list[tuple[str, float, float, int]] = []  # (step, began at, ms, records)

        def timed(cls: type, name: str) -> None:
            inner = getattr(cls, name)

            def wrapper(self, *args, **kwargs):  # noqa: ANN001, ANN202
                t0, p0 = time.time(), time.perf_counter()
                out = inner(self, *args, **kwargs)
                ms = (time.perf_counter() - p0) * 1000
                if ms > 10:
                    steps.append((name, t0, ms, len(out) if isinstance(out, list) else -1))
                return out
            setattr(cls, name, wrapper)

        import types

        import kafka.consumer.group as kgroup

        real_time = kgroup.time

        def traced_sleep(seconds: float) -> None:
            steps.append(("idle-sleep", time.time(), seconds * 1000, -1))
            real_time.sleep(seconds)
        kgroup.time = types.SimpleNamespace(**{k: getattr(real_time, k) for k in dir(real_time)
                                               if not k.startswith("__")})
        kgroup.time.sleep = traced_sleep
        for cls, name in ((PredictLoop, "_publish"), (PredictLoop, "_settle"),
                          (kp.GroupSource, "poll"), (kp.GroupSource, "commit")):
            timed(cls, name)
        atexit.register(lambda: Path(f"{os.environ['BENCH_TRACE']}.{os.getpid()}").write_text(
            json.dumps(steps)))
    if os.environ.get("BENCH_PROFILE"):  # a cProfile of the predictor, for finding where time goes
        import cProfile

        with cProfile.Profile() as profile:
            code = cli_main(rest)
        profile.dump_stats(f"{os.environ['BENCH_PROFILE']}.{os.getpid()}")
        return code
    return cli_main(rest)


def _echo(args: list[str]) -> int:
    """The floor (mode ``echo``): read ``--source`` in the predictor's group with the client's
    consumer and send ``{"id": ...}`` of each input to ``--sink`` with its producer, the
    predictor's low-latency settings (``LOW_LATENCY``), offsets committed every 0.5 s. Nothing
    else: no model, decoding, clues or validation."""
    from streambayes.runtime.kafka.options import LOW_LATENCY

    client = os.environ.get("STREAMBAYES_KAFKA_CLIENT", "confluent")
    source, sink = (args[args.index(flag) + 1].split("/") for flag in ("--source", "--sink"))
    bootstrap, inbox, outbox = source[2], source[3], sink[3]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    group = os.environ["STREAMBAYES_KAFKA_GROUP"]
    if client == "confluent":
        import confluent_kafka as ck

        consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                **LOW_LATENCY["confluent"]["consumer"]})
        producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                **LOW_LATENCY["confluent"]["producer"]})
        consumer.subscribe([inbox])
        last = time.monotonic()
        while not stop.is_set():
            messages = consumer.consume(500, 0) or consumer.consume(1, 0.2)
            for m in messages:
                if m.error() is None:
                    producer.produce(outbox, json.dumps({"id": json.loads(m.value())["id"]}))
            producer.poll(0)
            if messages and time.monotonic() - last > 0.5:
                consumer.commit(asynchronous=True)
                last = time.monotonic()
        producer.flush(10)
        consumer.close()
        return 0
    from kafka import KafkaConsumer, KafkaProducer

    consumer = KafkaConsumer(inbox, bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             **LOW_LATENCY["kafka-python"]["consumer"])
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    last = time.monotonic()
    while not stop.is_set():
        batches = consumer.poll(timeout_ms=200, max_records=500)
        for records in batches.values():
            for r in records:
                producer.send(outbox, json.dumps({"id": json.loads(r.value)["id"]}).encode())
        if batches and time.monotonic() - last > 0.5:
            consumer.commit_async()
            last = time.monotonic()
    producer.flush(10)
    consumer.close()
    return 0


def _median_rows(results: list[dict]) -> list[list[str]]:
    """One row per (client, mode, rate): the median over its repeats of each figure, and the
    range of the p99 (the figure the target names)."""
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault((r["client"], r["mode"], r["rate"]), []).append(r)
    rows = []
    for (client, mode, _rate), runs in groups.items():
        def med(key: str, runs: list[dict] = runs) -> float:
            return float(np.median([r.get(key, float("nan")) for r in runs]))

        p99s = [r.get("p99", float("nan")) for r in runs]
        rows.append([client, mode, f"{med('offered'):,.0f}",
                     f"{sum(r['got'] for r in runs):,}/{sum(r['n'] for r in runs):,}", str(len(runs)),
                     *(f"{med(k):.1f}" for k in ("p50", "p90", "p99")),
                     f"{min(p99s):.1f}–{max(p99s):.1f}", f"{med('p99_after_1s'):.1f}",
                     f"{med('max'):.1f}",
                     f"{med('produced_p99'):.1f}", f"{med('cpu_ms_per_event'):.2f}",
                     f"{max(r['gc_max_ms'] for r in runs):.1f}"])
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "serve":
        return serve(argv)
    if argv and argv[0] == "rewrite":
        return rewrite(Path(argv[1]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--rates", default="500,2000,5000")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--other-rate", type=float, default=2000.0,
                    help="offered load of the flush/batch and exactly-once runs")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs of each client, mode and load, round by round (the table: medians)")
    ap.add_argument("--warmup", type=float, default=30.0,
                    help="seconds of a first run at --other-rate, reported apart (a new broker's "
                         "JVM compiles its hot paths under the first tens of seconds of load)")
    args = ap.parse_args(argv)
    clients = [c for c in args.backends.split(",") if c]
    rates = [float(r) for r in args.rates.split(",") if r]
    modes = [m for m in args.modes.split(",") if m]
    versions = {c: package_version("kafka-python" if c == "kafka-python" else "confluent-kafka")
                for c in clients}
    from streambayes.config import Settings

    print(f"python {sys.version.split()[0]}; clients {versions}; load {os.getloadavg()[0]:.1f}; "
          f"default client (STREAMBAYES_KAFKA_CLIENT): {Settings().kafka_client}; "
          f"{args.repeats} rounds", flush=True)
    texts, _labels = load_sms_spam()
    results = []
    # the broker started here gets Kafka's own heap (its start scripts' -Xmx1G -Xms1G), not the
    # tests' 128 MB, whose young collections (every ~3 s here, 11-17 ms each) set the p99
    os.environ.setdefault("STREAMBAYES_BROKER_HEAP_OPTS", "-Xmx1G -Xms1G")
    print(f"broker heap, if started here: {os.environ['STREAMBAYES_BROKER_HEAP_OPTS']} "
          "(STREAMBAYES_BROKER_HEAP_OPTS)")
    with broker_info() as info, tempfile.TemporaryDirectory() as tmp:
        print(f"broker: {info}", flush=True)
        snaps = Path(tmp) / "snaps"
        trained_snapshot(snaps)
        if args.warmup > 0:  # the broker's JVM is slow at first: a run reported apart
            warm = run_one(info.bootstrap, snaps, clients[0], "at-least-once", args.other_rate,
                           args.warmup, texts, Path(tmp) / "predictor.log")
            print(f"warm-up ({warm['client']}, {args.warmup:g} s at {args.other_rate:,.0f}/s, not "
                  f"in the table): p50 {warm.get('p50', float('nan')):.1f} ms, p99 "
                  f"{warm.get('p99', float('nan')):.1f} ms", flush=True)
        plan = [(client, mode, rate) for client in clients for mode in modes
                for rate in (rates if mode in ("at-least-once", "echo") else [args.other_rate])]
        for round_ in range(args.repeats):  # round by round: the machine drifts
            for client, mode, rate in plan:
                r = run_one(info.bootstrap, snaps, client, mode, rate, args.seconds, texts,
                            Path(tmp) / "predictor.log")
                results.append({**r, "round": round_})
                print(json.dumps(results[-1]), flush=True)
        for line in (Path(tmp) / "predictor.log").read_text().splitlines():
            if "transactions committed" in line:
                print("exactly-once:", line.split(": ", 1)[-1])
        if any(r["got"] < r["n"] for r in results):
            print((Path(tmp) / "predictor.log").read_text()[-3000:])
    print_table(f"predictor latency, ms, median of {args.repeats} runs (sent→readable by a "
                "read_committed reader; produced: the posterior's timestamp)",
                ["client", "mode", "offered/s", "posteriors", "runs", "p50", "p90", "p99",
                 "p99 range", "p99 after 1 s", "max", "produced p99", "CPU ms/event",
                 "GC max ms (load)"],
                _median_rows(results))
    print(f"load average after the run: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
