"""Resident memory of 10,000 per-key reader models with 100 labels each (issue 11, memory target).

One ``PerKeyModel`` over ``mnb`` with its defaults (``alpha="auto"``, 2^20 hashed buckets, sparse
token tables) and no residency cap: every reader model stays live, none is spilled. Events are 20
Newsgroups posts, whole (train and test, shuffled); reader ``k`` likes the groups ``k mod 20`` and
``k*7 mod 20`` and labels ``--labels`` posts drawn at random (without repeats for a reader) as
``interesting`` or ``not``. The posts are featurized once; each call learns ``--chunk`` readers'
labels (grouped by key, as ``learn --per-key`` does), the global model learning every label too.

Prints the process's resident set (VmRSS) after loading and featurizing the posts and after
learning, its growth (what the reader models and the global one take), the same per reader, the
models' own ``memory_bytes`` and the peak RSS; target: the growth <= 2 GiB.

    /work/venv/bin/python bench/reader_memory.py                    # 10,000 readers: a few minutes
    /work/venv/bin/python bench/reader_memory.py --readers 1000     # a quicker look
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path

import numpy as np
from _common import fmt, print_table, write_json
from perkey_memory import labels, load_posts, rss_now_mib, rss_peak_mib

from streambayes.models.perkey import PerKeyModel
from streambayes.models.perkey_rows import _take

MIB = 2**20
TARGET_MIB = 2048.0


def run(args: argparse.Namespace) -> dict:
    texts, groups = load_posts(args.seed, max_chars=None)
    model = PerKeyModel("mnb", max_resident=None, max_resident_bytes=None, max_keys=None)
    t0 = time.perf_counter()
    posts = model.featurize([{"text": t} for t in texts])
    featurize_s = time.perf_counter() - t0
    del texts
    gc.collect()
    rss_before = rss_now_mib()
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    for lo in range(0, args.readers, args.chunk):
        readers = np.arange(lo, min(lo + args.chunk, args.readers))
        rows = np.concatenate([rng.choice(posts.n, args.labels, replace=False) for _ in readers])
        who = np.repeat(readers, args.labels)
        model.learn_many(_take(posts, rows), labels(who, groups[rows]), keys=[f"reader-{r}" for r in who])
    learn_s = time.perf_counter() - t0
    gc.collect()
    rss_after = rss_now_mib()
    n = len(model.resident_keys)
    growth = rss_after - rss_before
    return {"readers": args.readers, "labels_per_reader": args.labels, "posts": posts.n,
            "resident_models": n, "spilled": len(model.keys) - n, "featurize_s": featurize_s,
            "learn_s": learn_s, "learn_events_per_s": args.readers * args.labels / learn_s,
            "rss_before_mib": rss_before, "rss_after_mib": rss_after, "rss_growth_mib": growth,
            "growth_per_reader_kib": growth * 1024 / max(n, 1),
            "reader_memory_bytes_mib": model.resident_bytes / MIB,
            "global_memory_bytes_mib": model.global_model.memory_bytes() / MIB,
            "peak_rss_mib": rss_peak_mib(), "target_mib": TARGET_MIB, "pass": growth <= TARGET_MIB}


def report(res: dict) -> None:
    rows = [["readers resident / spilled", f"{res['resident_models']:,} / {res['spilled']:,}"],
            ["labels per reader (20 Newsgroups posts)", f"{res['labels_per_reader']}"],
            ["RSS after loading + featurizing the posts", fmt(res["rss_before_mib"], ".0f") + " MiB"],
            ["RSS after learning", fmt(res["rss_after_mib"], ".0f") + " MiB"],
            ["RSS growth (reader models + global model)", fmt(res["rss_growth_mib"], ".0f") + " MiB"],
            ["  per reader", fmt(res["growth_per_reader_kib"], ".0f") + " KiB"],
            ["reader models' memory_bytes", fmt(res["reader_memory_bytes_mib"], ".0f") + " MiB"],
            ["global model's memory_bytes", fmt(res["global_memory_bytes_mib"], ".1f") + " MiB"],
            ["peak RSS", fmt(res["peak_rss_mib"], ".0f") + " MiB"],
            ["learn events/s", fmt(res["learn_events_per_s"], ",.0f")],
            ["target: growth <= 2 GiB", "PASS" if res["pass"] else "MISS"]]
    print_table(f"{res['readers']:,} per-key reader models, all resident", ["figure", "value"], rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--readers", type=int, default=10_000, help="reader models (default 10,000)")
    ap.add_argument("--labels", type=int, default=100, help="labels per reader (default 100)")
    ap.add_argument("--chunk", type=int, default=100, help="readers per learn_many call (default 100)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write the figures to this JSON file")
    args = ap.parse_args(argv)
    res = run(args)
    report(res)
    if args.json:
        write_json(args.json, res)


if __name__ == "__main__":
    main()
