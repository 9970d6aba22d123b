"""Predictor backlog throughput with clues vs without, offline (no Kafka): the cost of clues.

A snapshot of ``--model`` (default ``nb``, as in kafka_pipeline.py) is learned from the whole SMS
Spam Collection; the backlog is ``--events`` unlabelled SMS events (JSON lines, the collection
repeated) in a ``MemorySource``. Each round drains it with the real ``PredictLoop``, configured as
``streambayes predict`` runs it (the model frozen out of the garbage collector's passes; decode,
featurize, predict, decide, clues, Posterior records into a ``MemorySink``; batches of
``--batch-size``), interleaving: clues=0, clues=``--clues`` (batched, as the predictor runs it:
``predict_log_proba_and_clue_batch`` and ``clue_json``), and clues=``--clues`` answered by
``clues_one`` per event (the row-by-row path, for reference).
Prints events/s (median of ``--rounds``, min-max) and the per-round ratio to clues=0, by wall clock
and by this process's CPU time (steadier on a shared machine).
Target (issue 13 item 2): clues cost <= 20%, i.e. ratio >= 0.8. Never fails on timings; exit 0.

    python bench/clues_backlog.py                       # 20,000 events, 7 rounds (3 varied more)
    python bench/clues_backlog.py --events 5000 --rounds 2 --model mnb
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import Rate, fmt, load_sms_spam, print_table

from streambayes.models import make_model
from streambayes.runtime.loops.predict import ModelWatcher, PredictLoop
from streambayes.runtime.loops.shards import open_stores
from streambayes.runtime.records.decode import Decoder
from streambayes.runtime.records.sinks import MemorySink
from streambayes.runtime.records.sources import MemorySource
from streambayes.snapshot import SnapshotStore


def drain(snaps: Path, lines: list[str], batch_size: int, clues: int,
          row_by_row: bool) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) to drain the backlog."""
    watcher = ModelWatcher(open_stores([snaps]))
    loop = PredictLoop(MemorySource({"events": lines}), Decoder("jsonl", require_label=False), watcher,
                       (MemorySink(), "posteriors"), batch_size=batch_size, clues=clues, stop_at_end=True,
                       freeze_gc=True)  # as `streambayes predict` runs it
    loop.wait_for_model()
    if row_by_row:
        model = watcher.current.model
        model.clues_many = lambda xs, k: [model.clues_one(x, k) for x in xs]
        model.predict_log_proba_and_clues_many = None  # no clues scored with the predictions
        model.predict_log_proba_and_clue_batch = None
    start, cpu = time.perf_counter(), time.process_time()
    stats = loop.run()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert stats.posteriors == len(lines), stats
    return seconds, cpu


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="nb")
    p.add_argument("--events", type=int, default=20_000)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--clues", type=int, default=5)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--plain", action="store_true")
    args = p.parse_args(argv)
    texts, labels = load_sms_spam()
    learner = make_model(args.model)
    learner.learn_many([{"text": t} for t in texts], labels)
    lines = [json.dumps({"id": str(i), "text": texts[i % len(texts)]}) for i in range(args.events)]
    variants = {"clues=0": (0, False), f"clues={args.clues}, batched": (args.clues, False),
                f"clues={args.clues}, clues_one per event": (args.clues, True)}
    seconds: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    with tempfile.TemporaryDirectory() as tmp:
        snaps = Path(tmp)
        SnapshotStore(snaps).write(learner.to_state(), model=args.model, positions={}, events=len(texts))
        for _ in range(args.rounds):
            for label, (k, row_by_row) in variants.items():
                wall, used = drain(snaps, lines, args.batch_size, k, row_by_row)
                seconds[label].append(wall)
                cpu[label].append(used)
    rows = []
    for label in variants:
        rate, per_cpu = Rate.of(args.events, seconds[label]), Rate.of(args.events, cpu[label])
        ratio = statistics.median(b / s for b, s in zip(seconds["clues=0"], seconds[label], strict=True))
        cpu_ratio = statistics.median(b / s for b, s in zip(cpu["clues=0"], cpu[label], strict=True))
        rows.append([label, fmt(rate.median), f"{fmt(rate.low)}-{fmt(rate.high)}", f"{ratio:.2f}",
                     fmt(per_cpu.median), f"{cpu_ratio:.2f}"])
    print(f"model {args.model}, {args.events:,} SMS events, batches of {args.batch_size}, "
          f"{args.rounds} rounds")
    print_table("Predictor backlog, offline", ["variant", "events/s (wall)", "min-max", "vs clues=0",
                "events per CPU-s", "vs clues=0 (CPU)"], rows, plain=args.plain)
    print("(ratios: median over rounds of the same round's clues=0 time / this variant's time; CPU time is")
    print(" this process's, less disturbed by other load on a shared machine)")
    ratio, cpu_ratio = float(rows[1][3]), float(rows[1][5])
    verdict = {True: "PASS", False: "MISS"}
    print(f"Target (issue 13 item 2): batched clues >= 0.8x clues=0 -> wall {ratio:.2f} "
          f"{verdict[ratio >= 0.8]}, CPU {cpu_ratio:.2f} {verdict[cpu_ratio >= 0.8]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
