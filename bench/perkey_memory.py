"""Memory of 100,000 per-key models over a 10,000-event window of traffic (issue 10, item 4).

One ``PerKeyModel`` over ``mnb`` (hashed to ``--n-features`` buckets) with the caps set
(``--max-resident`` live models, ``--max-resident-mb`` of them), its spilled models in a
:class:`~streambayes.runtime.loops.spill.DiskSpillStore` (a temporary directory), as ``learn --per-key``
runs it. Events are 20 Newsgroups posts (train and test, shuffled); reader ``k`` likes the
groups ``k mod 20`` and ``k*7 mod 20``, so each event is ``interesting`` or ``not`` for its key.

1. populate: ``--keys`` readers each learn one post (batches of 1,000), so every key has a model
   and all but the live ones are spilled;
2. window: ``--window`` events over keys drawn at random from all of them (most spilled), each
   batch of 500 first predicted, then learned (prequential), so spilled models come back;
3. a checkpoint: the state (spilling the changed live models, fsync) into a snapshot;
4. come-back: the time to bring one spilled model back (median of ``--probes`` keys).

Prints peak RSS (the process's high-water mark, and the growth over the loaded posts), resident
and spilled models, events/s of each phase and the come-back time; ``--json`` writes them.

    /work/venv/bin/python bench/perkey_memory.py                  # 100,000 keys: several minutes
    /work/venv/bin/python bench/perkey_memory.py --keys 20000     # a quicker look
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import data_path, fmt, print_table, write_json

from streambayes.models.perkey import PerKeyModel
from streambayes.runtime.loops.spill import DiskSpillStore
from streambayes.snapshot import SnapshotStore

MIB = 2**20


def rss_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def rss_now_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load_posts(seed: int, max_chars: int | None = 2000) -> tuple[list[str], np.ndarray]:
    """Every 20 Newsgroups post (text, group number), shuffled; each cut to ``max_chars``
    (headers and the first lines: enough to learn from), or whole with ``None``."""
    texts, groups, names = [], [], {}
    with gzip.open(data_path("20newsgroups", "20news-bydate.jsonl.gz"), "rt", encoding="utf-8") as fh:
        for line in fh:
            post = json.loads(line)
            texts.append(post["text"][:max_chars])
            groups.append(names.setdefault(post["group"], len(names)))
    order = np.random.default_rng(seed).permutation(len(texts))
    return [texts[i] for i in order], np.asarray(groups)[order]


def labels(readers: np.ndarray, groups: np.ndarray) -> list[str]:
    liked = (groups == readers % 20) | (groups == (readers * 7) % 20)
    return ["interesting" if x else "not" for x in liked]


def run(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="perkey-bench-") as directory:
        return run_in(args, Path(directory))


def run_in(args: argparse.Namespace, spill_dir: Path) -> dict:
    texts, groups = load_posts(args.seed)
    rss_data = rss_now_mib()
    rng = np.random.default_rng(args.seed)
    model = PerKeyModel("mnb", {"n_features": args.n_features}, max_resident=args.max_resident,
                        max_resident_bytes=int(args.max_resident_mb * MIB),
                        spill=DiskSpillStore(spill_dir / "spill"))
    out: dict = {"keys": args.keys, "window": args.window, "n_features": args.n_features,
                 "max_resident": args.max_resident, "max_resident_mb": args.max_resident_mb,
                 "rss_after_loading_posts_mib": rss_data}
    most_resident, most_live_mib = 0, 0.0

    def step(readers: np.ndarray, predict: bool) -> None:
        nonlocal most_resident, most_live_mib
        idx = rng.integers(len(texts), size=len(readers))
        xs = [{"text": texts[i]} for i in idx]
        keys = [f"reader-{r}" for r in readers]
        if predict:
            model.predict_log_proba_many(xs, keys)
        model.learn_many(xs, labels(readers, groups[idx]), keys=keys)
        most_resident = max(most_resident, len(model.resident_keys))
        most_live_mib = max(most_live_mib, model.resident_bytes / MIB)

    t0 = time.perf_counter()
    for lo in range(0, args.keys, 1000):
        step(np.arange(lo, min(lo + 1000, args.keys)), predict=False)
    out["populate_s"] = time.perf_counter() - t0
    out["populate_events_per_s"] = args.keys / out["populate_s"]
    t0 = time.perf_counter()
    for lo in range(0, args.window, 500):
        step(rng.integers(args.keys, size=min(500, args.window - lo)), predict=True)
    out["window_s"] = time.perf_counter() - t0
    out["window_events_per_s"] = args.window / out["window_s"]
    t0 = time.perf_counter()
    state = model.to_state()
    SnapshotStore(spill_dir).write(state, model="perkey", positions={}, events=model.n_events)
    out["checkpoint_s"] = time.perf_counter() - t0
    del state
    out["come_back_ms"] = come_back_ms(model, args)
    out.update(resident=len(model.resident_keys), spilled=len(model.keys) - len(model.resident_keys),
               most_resident=most_resident, most_live_mib=most_live_mib,
               spill_files=sum(1 for _ in (spill_dir / "spill").iterdir()),
               peak_rss_mib=rss_peak_mib(), rss_end_mib=rss_now_mib())
    return out


def come_back_ms(model: PerKeyModel, args: argparse.Namespace) -> float:
    """Median milliseconds to bring one spilled model back (read, verify, decode, rebuild)."""
    rng = np.random.default_rng(args.seed + 1)
    times = []
    for r in rng.integers(args.keys, size=args.probes):
        key = f"reader-{r}"
        if key in model.resident_keys:
            continue
        t0 = time.perf_counter()
        model.user_model(key)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times) if times else float("nan")


def report(res: dict) -> None:
    rows = [
        ["per-key models (keys)", fmt(res["keys"])],
        ["caps: live models / MiB", f"{res['max_resident']:,} / {res['max_resident_mb']:,.0f}"],
        ["live models at the end / most ever", f"{res['resident']:,} / {res['most_resident']:,}"],
        ["live models' MiB, most ever", fmt(res["most_live_mib"], ",.1f")],
        ["spilled models / spill files", f"{res['spilled']:,} / {res['spill_files']:,}"],
        ["RSS after loading the posts, MiB", fmt(res["rss_after_loading_posts_mib"], ",.0f")],
        ["peak RSS, MiB", fmt(res["peak_rss_mib"], ",.0f")],
        ["populate: events/s", fmt(res["populate_events_per_s"], ",.0f")],
        [f"window of {res['window']:,} (predict+learn): events/s", fmt(res["window_events_per_s"], ",.0f")],
        ["checkpoint (spill live, fsync, snapshot), s", fmt(res["checkpoint_s"], ",.2f")],
        ["come-back of a spilled model, ms (median)", fmt(res["come_back_ms"], ",.2f")],
    ]
    print_table(f"PerKeyModel(mnb, 2^{int(np.log2(res['n_features']))} buckets) with a disk spill store",
                ["", "value"], rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=100_000, help="per-key models (default 100,000)")
    ap.add_argument("--window", type=int, default=10_000, help="events of traffic (default 10,000)")
    ap.add_argument("--max-resident", type=int, default=1_000, help="live models (default 1,000)")
    ap.add_argument("--max-resident-mb", type=float, default=64.0, help="MiB of live models (64)")
    ap.add_argument("--n-features", type=int, default=2**12, help="hash buckets of mnb (2^12)")
    ap.add_argument("--probes", type=int, default=200, help="spilled models timed coming back (200)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write the figures to this JSON file")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    res = run(args)
    report(res)
    if args.json:
        write_json(args.json, res)


if __name__ == "__main__":
    main()
