"""NewsWeeder simulation on 20 Newsgroups: per-reader vs global vs backed-off interest models.

After Lang (1995), "NewsWeeder: Learning to filter netnews". ``--readers`` simulated readers
(seeded) are each interested in 1–3 of the 20 groups. The train split (11,314 posts; the file
is ordered by group, so it is shuffled once with ``--seed``) is streamed in windows of
``--window`` articles. For every window and every reader:

1. rank the window by ``P(interesting | article)`` three ways, and score the precision of the
   top 10% (the share of those articles that are in the reader's groups):
     own       the reader's own model only (window order until it has seen both labels)
     global    one model learned from every reader's labels pooled, i.e. from the
               (article, that reader's label) pairs: the population's notion of "interesting".
               It cannot personalise: every reader gets the same ranking.
     backoff   streambayes PerKeyModel: own and global interpolated in log-odds with
               λ = n / (n + --backoff), n = the reader's labels so far
2. then feedback: every reader labels ``--labels-per-window`` articles of the window, drawn at
   random (not the top of the ranking, so the three models see the same labels), as
   ``interesting`` (one of the reader's groups) or ``not``; all are learned after every reader
   has been scored on the window (no label of a window helps rank that same window).

All three come from one PerKeyModel over ``mnb`` (hashed to ``--n-features`` buckets; at most
``--max-resident`` reader models live, the rest kept as snapshot states). Precision is
reported at the points where every reader has about 50, 200 and 1,000 labels: the mean over
readers and over the ``--span`` windows starting there. ``random`` is the expected precision
of a random ranking (the share of interesting articles in those windows).

    /work/venv/bin/python bench/interest.py                       # ~1–2 minutes on 2 cores
    /work/venv/bin/python bench/interest.py --readers 10 --max-resident 4
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import numpy as np
from _common import data_path, fmt, print_table, write_json

from streambayes.models.perkey import PerKeyModel, positive_log_odds
from streambayes.snapshot.codec import encode_state

POSITIVE, NEGATIVE = "interesting", "not"
APPROACHES = ("own", "global", "backoff")


def load_train() -> tuple[list[str], list[str]]:
    """(texts, groups) of the train split, in file order."""
    texts: list[str] = []
    groups: list[str] = []
    with gzip.open(data_path("20newsgroups", "20news-bydate.jsonl.gz"), "rt", encoding="utf-8") as fh:
        for line in fh:
            post = json.loads(line)
            if post["split"] == "train":
                texts.append(post["text"])
                groups.append(post["group"])
    return texts, groups


def make_readers(n: int, groups: list[str], rng: np.random.Generator) -> dict[str, set[str]]:
    names = sorted(set(groups))
    return {f"reader-{r:02d}": set(rng.choice(names, int(rng.integers(1, 4)), replace=False).tolist())
            for r in range(n)}


def precision_at(scores: np.ndarray, relevant: np.ndarray, k: int) -> float:
    """Share of relevant items among the ``k`` best scores (ties keep window order)."""
    return float(relevant[np.argsort(-scores, kind="stable")[:k]].mean())


def score_window(model: PerKeyModel, batch, readers: dict, window_groups: list[str], k: int) -> dict:
    """Precision@k of every approach for every reader on one window (the model is only read)."""
    lo_global = positive_log_odds(model.global_model.predict_log_proba_many(batch), model.classes, POSITIVE)
    out = {a: [] for a in APPROACHES} | {"random": []}
    for key, liked in readers.items():
        relevant = np.array([g in liked for g in window_groups])
        own = model.user_model(key)
        lo_own = (np.zeros(batch.n) if own is None else
                  positive_log_odds(own.predict_log_proba_many(batch), own.classes, POSITIVE))
        lo_back = positive_log_odds(model.predict_log_proba_many(batch, key), model.classes, POSITIVE)
        for name, scores in zip(APPROACHES, (lo_own, lo_global, lo_back), strict=True):
            out[name].append(precision_at(scores, relevant, k))
        out["random"].append(float(relevant.mean()))
    return out


def simulate(args: argparse.Namespace) -> dict:
    texts, groups = load_train()
    rng = np.random.default_rng(args.seed)
    readers = make_readers(args.readers, groups, rng)
    order = rng.permutation(len(texts))
    if args.limit is not None:
        order = order[:args.limit]
    model = PerKeyModel("mnb", {"n_features": args.n_features, **json.loads(args.params)},
                        backoff=args.backoff, max_resident=args.max_resident, positive=POSITIVE)
    k = max(1, round(args.window * args.top))
    history = []  # per window: labels per reader before it, precision lists per approach
    t0 = time.perf_counter()
    for w, lo in enumerate(range(0, len(order) - args.window + 1, args.window)):
        idx = order[lo:lo + args.window].tolist()
        xs = [{"text": texts[i]} for i in idx]
        window_groups = [groups[i] for i in idx]
        batch = model.featurize(xs)
        history.append({"labels": w * args.labels_per_window,
                        **score_window(model, batch, readers, window_groups, k)})
        fx, fy, fk = [], [], []
        for key, liked in readers.items():  # feedback, learned after every reader was scored
            for j in rng.choice(args.window, args.labels_per_window, replace=False).tolist():
                fx.append(xs[j])
                fy.append(POSITIVE if window_groups[j] in liked else NEGATIVE)
                fk.append(key)
        model.learn_many(fx, fy, keys=fk)
    seconds = time.perf_counter() - t0
    _, arrays = encode_state(model.to_state())
    return {"readers": {k: sorted(v) for k, v in readers.items()}, "history": history, "seconds": seconds,
            "windows": len(history), "k": k, "events": model.n_events,
            "resident": len(model.resident_keys), "state_mib": sum(a.nbytes for a in arrays.values()) / 2**20}


def summarise(res: dict, args: argparse.Namespace) -> list[dict]:
    rows = []
    span = args.span * args.labels_per_window
    for target in args.checkpoints:
        windows = [h for h in res["history"] if target <= h["labels"] < target + span]
        if not windows:
            continue
        row = {"labels": target, "windows": len(windows)}
        for name in (*APPROACHES, "random"):
            row[name] = float(np.mean([np.mean(h[name]) for h in windows]))
        rows.append(row)
    return rows


def report(res: dict, rows: list[dict], args: argparse.Namespace) -> None:
    n_interest = [len(v) for v in res["readers"].values()]
    print(f"20 Newsgroups train, {res['windows']} windows of {args.window} (seed {args.seed}), "
          f"{args.readers} readers ({np.mean(n_interest):.1f} groups each on average), "
          f"{args.labels_per_window} labels per reader per window, mnb base {args.params}, "
          f"backoff {args.backoff}")
    print_table(f"Precision of the top {res['k']} of {args.window} (top {args.top:.0%}), mean over readers",
                ["labels/reader", "windows", "own", "global", "backoff", "random"],
                [[str(r["labels"]), str(r["windows"]), *(fmt(r[a], ".3f") for a in (*APPROACHES, "random"))]
                 for r in rows], plain=args.plain)
    print(f"{res['events']:,} labelled events in {res['seconds']:.1f} s; {res['resident']} reader models "
          f"resident (max {args.max_resident}), state {res['state_mib']:.1f} MiB")


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--readers", type=int, default=50, help="simulated readers (default 50)")
    ap.add_argument("--window", type=int, default=100, help="articles per window (default 100)")
    ap.add_argument("--labels-per-window", type=int, default=10, help="labels per reader per window (10)")
    ap.add_argument("--top", type=float, default=0.1, help="share of the window scored (default 0.1)")
    ap.add_argument("--backoff", type=float, default=20.0, help="global prior strength in events (20)")
    ap.add_argument("--max-resident", type=int, default=25, help="live reader models (default 25)")
    ap.add_argument("--n-features", type=int, default=2**18, help="hashed buckets (default 2^18)")
    ap.add_argument("--checkpoints", type=_ints, default=[50, 200, 1000], help="labels per reader")
    ap.add_argument("--span", type=int, default=5, help="windows averaged per checkpoint (default 5)")
    ap.add_argument("--seed", type=int, default=0, help="readers, shuffle and feedback seed (default 0)")
    ap.add_argument("--limit", type=int, default=None, help="stream only this many articles")
    ap.add_argument("--params", default="{}",
                    help='mnb parameters as JSON, e.g. \'{"alpha": 1.0}\' or \'{"tf": "log", "idf": true}\'')
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    ap.add_argument("--plain", action="store_true", help="plain-text table even if rich is installed")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    res = simulate(args)
    rows = summarise(res, args)
    report(res, rows, args)
    if args.json is not None:
        write_json(args.json, {"args": vars(args), "checkpoints": rows, "seconds": res["seconds"],
                               "readers": res["readers"]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
