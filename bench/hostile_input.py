"""Hostile input through replay, learn and predict, on files and on Kafka (issue 10's target).

Good SMS events are mixed with hostile records of every kind the adversarial run found (deep
nesting, huge integers, 1e308 numbers, NaN literals, weights of 1e12, non-UTF-8 bytes, records over
the broker's message size, thousands of features, thousands of labels and field names, bad types,
lone surrogates, non-object JSON...). Each command runs as a child process with a deadline; for
each run the script prints the exit status, whether it hung, the records accounted for (learned or
published + dead letters, against records read), the dead letters by reason and the peak RSS of
the child, next to the same command on the good records alone.

    python bench/hostile_input.py                         # 100,000 hostile + 20,000 good, files
    python bench/hostile_input.py --kafka                 # ... and through a local broker too
    python bench/hostile_input.py --hostile 2000 --good 2000 --kafka   # a quick run

Targets: 0 crashes, 0 hangs, 0 lost, every dead letter with a reason, peak RSS within 2x the run
without the hostile records.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_sms_spam, print_table  # noqa: E402

from streambayes.devtools.hostile import hostile_records  # noqa: E402

CLI = [sys.executable, "-m", "streambayes"]
# The services run through this wrapper, which writes the process's own peak RSS (VmHWM, of the
# program after exec; ru_maxrss would include the parent's pages at fork) when it exits.
PEAK = r"""
import atexit, os, runpy, sys
def _peak():
    with open("/proc/self/status") as fh:
        kib = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    with open(os.environ["BENCH_PEAK_FILE"], "w") as out:
        out.write(str(kib))
atexit.register(_peak)
sys.argv = ["streambayes", *sys.argv[1:]]
runpy.run_module("streambayes", run_name="__main__")
"""
MEASURED = [sys.executable, "-c", PEAK]
_PEAKS = iter(range(1_000_000))


def measured(args: list[str], work: Path) -> tuple[list[str], dict, Path]:
    """The command line, environment and peak file of a service run whose peak RSS we read."""
    path = work / f"peak-{next(_PEAKS)}.kib"
    return MEASURED + args, {**os.environ, "BENCH_PEAK_FILE": str(path)}, path


def peak_mib(path: Path) -> float:
    """The child's peak RSS in MiB (0 when it died before writing it, e.g. SIGKILL)."""
    return int(path.read_text()) / 1024 if path.exists() else 0.0

def good_records(n: int, labelled: bool = True) -> list[bytes]:
    texts, labels = load_sms_spam()
    out = []
    for i in range(n):
        event = {"id": f"g{i}", "text": texts[i % len(texts)]}
        if labelled:
            event["label"] = labels[i % len(labels)]
        out.append(json.dumps(event).encode())
    return out


@dataclass
class Run:
    name: str
    status: int | None = None
    hung: bool = False
    seconds: float = 0.0
    peak_mib: float = 0.0
    records: int = 0
    accounted: int = 0
    reasons: Counter = field(default_factory=Counter)
    no_reason: int = 0
    output: str = ""


def run_cli(args: list[str], timeout: float,
            env: dict | None = None) -> tuple[int | None, bool, float, float, str]:
    """Run the CLI as a child; (status, hung, seconds, peak RSS MiB of that child, last output)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        argv, child_env, peak_file = measured(args, Path(tempfile.gettempdir()))
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                env={**child_env, **(env or {})})
        hung, status = _reap(proc, start + timeout)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    return (None if hung else proc.returncode, hung, time.perf_counter() - start,
            peak_mib(peak_file), text.strip().splitlines()[-1] if text.strip() else "")


def dead_letter_counts(path: Path) -> tuple[Counter, int, int]:
    """Reasons of the dead letters in a JSONL file, letters without a reason, total letters."""
    reasons: Counter = Counter()
    missing = total = 0
    if path.exists():
        for line in path.read_bytes().splitlines():
            total += 1
            reason = json.loads(line).get("reason")
            if reason:
                reasons[reason] += 1
            else:
                missing += 1
    return reasons, missing, total


def file_runs(work: Path, label: str, labelled: list[bytes], unlabelled: list[bytes],
              timeout: float) -> list[Run]:
    """replay, learn and predict on files; every record must come out learned/published or dead."""
    train, test = work / f"{label}-train.jsonl", work / f"{label}-test.jsonl"
    train.write_bytes(b"\n".join(labelled) + b"\n")
    test.write_bytes(b"\n".join(unlabelled) + b"\n")
    runs = []
    report, dl = work / f"{label}-report", work / f"{label}-replay-dl.jsonl"
    r = Run(f"replay {label}")
    r.status, r.hung, r.seconds, r.peak_mib, r.output = run_cli(
        ["replay", str(train), "--model", "nb", "--report", str(report), "--dead-letter", str(dl)],
        timeout)
    r.records = len(labelled)
    r.reasons, r.no_reason, n_dead = dead_letter_counts(dl)
    if (report / "metrics.json").exists():
        metrics = json.loads((report / "metrics.json").read_text())
        r.accounted = metrics["events"] + n_dead
    runs.append(r)

    snaps, dl = work / f"{label}-snaps", work / f"{label}-learn-dl.jsonl"
    r = Run(f"learn {label}")
    r.status, r.hung, r.seconds, r.peak_mib, r.output = run_cli(
        ["learn", "--source", str(train), "--snapshots", str(snaps), "--model", "nb",
         "--dead-letter", str(dl)], timeout)
    r.records = len(labelled)
    r.reasons, r.no_reason, n_dead = dead_letter_counts(dl)
    show = subprocess.run(CLI + ["snapshot", "show", str(snaps)], capture_output=True, text=True)
    if show.returncode == 0:
        r.accounted = json.loads(show.stdout)["events"] + n_dead
    runs.append(r)

    out, dl = work / f"{label}-posteriors.jsonl", work / f"{label}-predict-dl.jsonl"
    r = Run(f"predict {label}")
    r.status, r.hung, r.seconds, r.peak_mib, r.output = run_cli(
        ["predict", "--source", str(test), "--sink", str(out), "--snapshots", str(snaps),
         "--dead-letter", str(dl)], timeout)
    r.records = len(unlabelled)
    r.reasons, r.no_reason, n_dead = dead_letter_counts(dl)
    posteriors = len(out.read_bytes().splitlines()) if out.exists() else 0
    r.accounted = posteriors + n_dead
    runs.append(r)
    return runs


def kafka_runs(work: Path, label: str, labelled: list[bytes], unlabelled: list[bytes],
               timeout: float, bootstrap: str) -> list[Run]:
    """learn and predict through a broker: produce raw records, learn with dead letters on a topic,
    predict to a posteriors topic; count what comes out on the topics."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from streambayes.runtime.kafka.kafka_python import create_topic

    tag = f"{label}-{int(time.time() * 1000)}"
    train, test, dlq, post = (f"{tag}-{name}" for name in ("train", "test", "dlq", "post"))
    for topic in (train, test):  # input topics take 4 MB records; dead letters keep the 1 MB default
        create_topic(bootstrap, topic, 1, config={"max.message.bytes": str(4 << 20)})
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=4 << 20, acks="all")
    refused = Counter()
    for topic, values in ((train, labelled), (test, unlabelled)):
        for value in values:
            try:
                producer.send(topic, value)
            except Exception as exc:  # noqa: BLE001 (the client refuses records over its own limit)
                refused[topic] += 1
                del exc
        producer.flush()
    sent = {train: len(labelled) - refused[train], test: len(unlabelled) - refused[test]}
    producer.close()

    def count(topic: str) -> tuple[int, Counter, int]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                 fetch_max_bytes=16 << 20, max_partition_fetch_bytes=16 << 20)
        tp = TopicPartition(topic, 0)
        if consumer.partitions_for_topic(topic) is None:
            consumer.close()
            return 0, Counter(), 0
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        n, reasons, missing, idle = 0, Counter(), 0, time.monotonic()
        while time.monotonic() - idle < 5:
            batch = consumer.poll(500, max_records=5000)
            for records in batch.values():
                for rec in records:
                    n += 1
                    idle = time.monotonic()
                    if topic.startswith(dlq):
                        reason = json.loads(rec.value).get("reason")
                        reasons[reason] += 1 if reason else 0
                        missing += 0 if reason else 1
        consumer.close()
        return n, reasons, missing

    runs = []
    snaps = work / f"{tag}-snaps"
    r = Run(f"kafka learn {label}")
    r.records = sent[train]
    log = (work / f"{tag}-learn.log").open("wb")
    argv, env, peak_file = measured(["learn", "--source", f"kafka://{bootstrap}/{train}", "--snapshots",
                                     str(snaps), "--model", "nb", "--dead-letter",
                                     f"kafka://{bootstrap}/{dlq}", "--every-seconds", "1"], work)
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    r.status, r.hung, r.seconds, _ = _run_until_caught_up(proc, snaps, sent[train], timeout)
    r.peak_mib = peak_mib(peak_file)
    log.close()
    r.output = _last_line(work / f"{tag}-learn.log")
    _, r.reasons, r.no_reason = count(dlq)
    show = subprocess.run(CLI + ["snapshot", "show", str(snaps)], capture_output=True, text=True)
    learned = json.loads(show.stdout)["events"] if show.returncode == 0 else 0
    r.accounted = learned + sum(r.reasons.values()) + r.no_reason
    runs.append(r)

    r = Run(f"kafka predict {label}")
    r.records = sent[test]
    log = (work / f"{tag}-predict.log").open("wb")
    argv, env, peak_file = measured(["predict", "--source", f"kafka://{bootstrap}/{test}", "--sink",
                                     f"kafka://{bootstrap}/{post}", "--snapshots", str(snaps),
                                     "--dead-letter", f"kafka://{bootstrap}/{dlq}-p"], work)
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                            env={**env, "STREAMBAYES_KAFKA_GROUP": f"{tag}-g"})
    start = time.perf_counter()
    deadline = start + timeout
    while time.perf_counter() < deadline and not _exited(proc):
        published, _, _ = count(post)
        letters, _, _ = count(f"{dlq}-p")
        if published + letters >= sent[test]:
            break
    r.status, r.hung, r.seconds, _ = _stop(proc, start, deadline)
    r.peak_mib = peak_mib(peak_file)
    log.close()
    r.output = _last_line(work / f"{tag}-predict.log")
    published, _, _ = count(post)
    _, r.reasons, r.no_reason = count(f"{dlq}-p")
    r.accounted = published + sum(r.reasons.values()) + r.no_reason
    runs.append(r)
    if refused:
        print(f"kafka-python refused to produce {dict(refused)} records over its request size")
    return runs


def _exited(proc: subprocess.Popen) -> bool:
    """Whether the child has exited, without reaping it (wait4 reads its rusage later)."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _last_line(path: Path) -> str:
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][-200:] if lines else ""


def _run_until_caught_up(proc: subprocess.Popen, snaps: Path, n: int, timeout: float):
    start = time.perf_counter()
    deadline = start + timeout
    while time.perf_counter() < deadline and not _exited(proc):
        time.sleep(1)
        show = subprocess.run(CLI + ["snapshot", "show", str(snaps)], capture_output=True, text=True)
        if show.returncode == 0:
            positions = json.loads(show.stdout)["positions"]
            if sum(sum(p.values()) for p in positions.values()) >= n:
                break
    return _stop(proc, start, deadline)


def _stop(proc: subprocess.Popen, start: float, deadline: float):
    """SIGTERM the service; (status, hung, seconds, peak MiB)."""
    if not _exited(proc):
        proc.terminate()
    hung, status = _reap(proc, time.perf_counter() + max(deadline - time.perf_counter(), 0) + 30)
    code = os.waitstatus_to_exitcode(status)
    return (None if hung else code), hung, time.perf_counter() - start, 0.0


def _reap(proc: subprocess.Popen, deadline: float) -> tuple[bool, int]:
    """Wait for the child until ``deadline`` (perf_counter), then SIGKILL it: (hung, wait status)."""
    while True:
        pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            return False, status
        if time.perf_counter() > deadline:
            proc.kill()
            return True, os.wait4(proc.pid, 0)[1]
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hostile", type=int, default=100_000)
    p.add_argument("--good", type=int, default=20_000)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds before a run counts as hung")
    p.add_argument("--kafka", action="store_true", help="also run learn and predict through a broker")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    bad = hostile_records(args.hostile, args.seed)
    good_l, good_u = good_records(args.good), good_records(args.good // 4, labelled=False)
    rng = random.Random(args.seed)
    mixed = good_l + bad
    rng.shuffle(mixed)
    mixed_u = good_u + bad[: len(bad) // 4]
    rng.shuffle(mixed_u)
    print(f"{len(bad):,} hostile records ({sum(map(len, bad)) / 2**20:,.0f} MiB) mixed with "
          f"{len(good_l):,} good labelled and {len(good_u):,} good unlabelled events")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        runs = file_runs(work, "clean", good_l, good_u, args.timeout) + \
            file_runs(work, "hostile", mixed, mixed_u, args.timeout)
        report(runs, "hostile input on files: replay, learn, predict")
        if args.kafka:
            from streambayes.devtools.broker import broker_info

            with broker_info() as info:
                bootstrap = info.bootstrap
                print(f"broker: {info}", flush=True)
                kafka = kafka_runs(work, "clean", good_l, good_u, args.timeout, bootstrap)
                kafka += kafka_runs(work, "hostile", mixed, mixed_u, args.timeout, bootstrap)
            report(kafka, "hostile input through Kafka: learn, predict")
    return 0


def report(runs: list[Run], title: str) -> None:
    """The table of ``runs`` and the totals against the targets."""
    rows = []
    clean_peak = {r.name.replace(" clean", ""): r.peak_mib for r in runs if r.name.endswith("clean")}
    for r in runs:
        base = clean_peak.get(r.name.replace(" hostile", ""), 0.0)
        ratio = r.peak_mib / base if base and r.name.endswith("hostile") else None
        rows.append([r.name, "HUNG" if r.hung else str(r.status), f"{r.seconds:.1f}",
                     f"{r.records:,}", f"{r.accounted:,}", f"{max(r.records - r.accounted, 0):,}",
                     str(r.no_reason), f"{r.peak_mib:,.0f}", f"{ratio:.2f}x" if ratio else "",
                     ", ".join(f"{k} {v}" for k, v in sorted(r.reasons.items()))])
    print_table(title, ["run", "exit", "s", "records", "accounted", "lost", "no reason", "peak MiB",
                        "vs clean", "dead letters"], rows)
    for r in runs:
        if r.accounted > r.records:  # replay: an event is scored, then its learning is refused
            print(f"  {r.name}: {r.accounted - r.records:,} events were scored (in the metrics) "
                  "and then refused for learning (dead letters), e.g. a label past max_classes")
    for r in runs:
        if r.status not in (0, None) or r.hung:
            print(f"  {r.name}: {r.output}")
    crashes = sum(1 for r in runs if r.status not in (0, None))
    hangs = sum(r.hung for r in runs)
    lost = sum(max(r.records - r.accounted, 0) for r in runs)
    worst = max((float(row[8][:-1]) for row in rows if row[8]), default=0.0)
    print(f"crashes {crashes}, hangs {hangs}, lost {lost}, letters without reason "
          f"{sum(r.no_reason for r in runs)}, worst peak RSS vs clean {worst:.2f}x "
          f"(targets: 0, 0, 0, 0, <= 2x)")


if __name__ == "__main__":
    raise SystemExit(main())
