"""Prequential throughput of multinomial naive Bayes on SMS spam, side by side with the peers.

The SMS Spam Collection repeated ``--repeat`` times in one seeded shuffled order is streamed
through each contestant prequentially (every event is predicted before it is learned):

  sb-event       streambayes MultinomialNB, predict_proba_one then learn_one per event
  sb-batch       streambayes MultinomialNB, per mini-batch: featurize, predict_proba_many, learn_many
  river          River BagOfWords(our tokenizer) | MultinomialNB, predict_proba_one / learn_one
  river-default  the same with River's own tokenizer (and its accent stripping)
  sklearn        HashingVectorizer(norm=None, alternate_sign=False) + MultinomialNB.partial_fit
  floor          the bare floor of the work: tokenize + mmh3-hash every token, no cache, no counting
  featurize      streambayes Featurizer.featurize alone, per mini-batch (informational)

Every (contestant, repeat) runs in a fresh worker process (``--worker NAME``): it loads the
data, does its imports, then times only the predict+learn loop (featurization included) and
records the peak resident-memory growth over that loop (see ``_common.PeakMemory``).
Metrics are computed afterwards, in numpy, from the stored probabilities of ``spam``.

    /work/venv/bin/python bench/nb_throughput.py                 # full run, a few minutes
    /work/venv/bin/python bench/nb_throughput.py --limit 20000 --repeats 1 --only sb-batch,floor
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from _common import (
    PeakMemory,
    Rate,
    emit_worker_result,
    fmt,
    load_sms_spam,
    package_version,
    print_table,
    run_worker,
)

N_FEATURES = 2**20
POSITIVE = "spam"
CLASSES = ["ham", "spam"]
CONTESTANTS = {
    "sb-event": "streambayes MNB per-event",
    "sb-batch": "streambayes MNB mini-batch ({bs})",
    "river": "River BagOfWords|MNB per-event (our tokenizer)",
    "river-default": "River BagOfWords|MNB per-event (River tokenizer)",
    "sklearn": "sklearn HashingVectorizer+MNB.partial_fit ({bs})",
    "floor": "bare floor: tokenize + mmh3 hash",
    "featurize": "streambayes Featurizer.featurize alone ({bs})",
}
PREDICTS = {"sb-event", "sb-batch", "river", "river-default", "sklearn"}


# -- the stream -----------------------------------------------------------------------------
class Stream:
    """The shuffled repeated stream; texts are distinct string objects, as if freshly decoded."""

    def __init__(self, repeat: int, seed: int, limit: int | None) -> None:
        import numpy as np

        texts, labels = load_sms_spam()
        order = np.random.default_rng(seed).permutation(np.tile(np.arange(len(texts)), repeat))
        if limit is not None:
            order = order[:limit]
        self.texts = [texts[i].encode("utf-8").decode("utf-8") for i in order.tolist()]
        self.labels = [labels[i] for i in order.tolist()]
        self.is_positive = np.array([y == POSITIVE for y in self.labels])
        self.n = len(self.texts)

    def dicts(self) -> list[dict]:
        return [{"text": t} for t in self.texts]


def _spam_column(proba, classes: list):
    """P(spam) per row of a (n, classes) array; 0.5 before any training, 0 if spam unseen."""
    if not classes:
        return 0.5
    return proba[:, classes.index(POSITIVE)] if POSITIVE in classes else 0.0


# -- contestants: each returns a zero-argument run closure; imports happen before timing ----
def _per_event(model, inputs, ys, p) -> None:
    """Prequential per event: predict_proba_one, then learn_one (River's protocol)."""
    predict, learn = model.predict_proba_one, model.learn_one
    for i, x in enumerate(inputs):
        proba = predict(x)
        p[i] = proba.get(POSITIVE, 0.0) if proba else 0.5
        learn(x, ys[i])


def _sb_event(s: Stream, p, bs: int) -> Callable[[], None]:
    from streambayes.models.naive_bayes import MultinomialNB

    xs, ys = s.dicts(), s.labels

    def run() -> None:
        _per_event(MultinomialNB(alpha=1.0), xs, ys, p)
    return run


def _sb_batch(s: Stream, p, bs: int) -> Callable[[], None]:
    from streambayes.models.naive_bayes import MultinomialNB

    xs, ys = s.dicts(), s.labels

    def run() -> None:
        model = MultinomialNB(alpha=1.0)
        for lo in range(0, len(xs), bs):
            X = model.featurize(xs[lo:lo + bs])
            p[lo:lo + bs] = _spam_column(model.predict_proba_many(X), model.classes)
            model.learn_many(X, ys[lo:lo + bs])
    return run


def _river(s: Stream, p, river_tokenizer: bool) -> Callable[[], None]:
    from river import feature_extraction, naive_bayes

    from streambayes.features import Tokenizer

    texts, ys = s.texts, s.labels
    # Our tokenizer lower-cases and keeps accents: River gets exactly our tokens.
    ours = {"tokenizer": Tokenizer(), "lowercase": False, "strip_accents": False}
    bow_args = {} if river_tokenizer else ours

    def run() -> None:
        model = feature_extraction.BagOfWords(**bow_args) | naive_bayes.MultinomialNB(alpha=1)
        _per_event(model, texts, ys, p)
    return run


def _sklearn(s: Stream, p, bs: int) -> Callable[[], None]:
    from sklearn.feature_extraction.text import HashingVectorizer
    from sklearn.naive_bayes import MultinomialNB

    from streambayes.features import Tokenizer

    texts, ys = s.texts, s.labels

    def run() -> None:
        vec = HashingVectorizer(n_features=N_FEATURES, norm=None, alternate_sign=False,
                                tokenizer=Tokenizer(), lowercase=False, token_pattern=None)
        model = MultinomialNB(alpha=1.0)
        col = None
        for lo in range(0, len(texts), bs):
            X = vec.transform(texts[lo:lo + bs])
            p[lo:lo + bs] = 0.5 if col is None else model.predict_proba(X)[:, col]
            model.partial_fit(X, ys[lo:lo + bs], classes=CLASSES)
            col = list(model.classes_).index(POSITIVE)
    return run


def _floor(s: Stream, p, bs: int) -> Callable[[], int]:
    import mmh3

    from streambayes.features import Tokenizer

    texts, mask = s.texts, N_FEATURES - 1

    def run() -> int:
        tokenize, hash32 = Tokenizer(), mmh3.hash
        n_tokens = 0
        for text in texts:
            buckets = [hash32(w, 0, False) & mask for w in tokenize(text)]
            n_tokens += len(buckets)
        return n_tokens
    return run


def _featurize(s: Stream, p, bs: int) -> Callable[[], None]:
    from streambayes.features import Featurizer

    xs = s.dicts()

    def run() -> None:
        featurizer = Featurizer(n_features=N_FEATURES)
        for lo in range(0, len(xs), bs):
            featurizer.featurize(xs[lo:lo + bs])
    return run


SETUP = {
    "sb-event": _sb_event, "sb-batch": _sb_batch, "sklearn": _sklearn, "floor": _floor,
    "featurize": _featurize,
    "river": lambda s, p, bs: _river(s, p, river_tokenizer=False),
    "river-default": lambda s, p, bs: _river(s, p, river_tokenizer=True),
}


def source_digest() -> str:
    """A short digest of the streambayes sources this worker imported (to spot mid-run edits)."""
    import hashlib

    import streambayes

    h = hashlib.sha256()
    for path in sorted(Path(streambayes.__file__).parent.rglob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def worker(name: str, args: argparse.Namespace) -> None:
    """Time one run of one contestant in this process and print its result as JSON."""
    import time

    import numpy as np

    stream = Stream(args.repeat, args.seed, args.limit)
    p = np.full(stream.n, np.nan)
    run = SETUP[name](stream, p, args.batch_size)
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        extra = run()
        seconds = time.perf_counter() - t0
    result = {"name": name, "events": stream.n, "seconds": seconds, "peak_mib": mem.peak_mib,
              "memory_method": mem.method, "tokens": extra, "accuracy": None, "log_loss": None,
              "accuracy_after_first_batch": None, "source": source_digest()}
    if name in PREDICTS:
        if np.isnan(p).any():
            raise RuntimeError(f"{name}: {int(np.isnan(p).sum())} events got no prediction")
        y = stream.is_positive
        clipped = np.clip(p, 1e-15, 1 - 1e-15)
        result["accuracy"] = float(np.mean((p > 0.5) == y))  # argmax of (1-p, p); a tie is "ham"
        result["log_loss"] = float(-np.mean(np.where(y, np.log(clipped), np.log1p(-clipped))))
        warm = slice(args.batch_size, None)  # skip the cold start a mini-batch learner pays for
        result["accuracy_after_first_batch"] = float(np.mean((p[warm] > 0.5) == y[warm]))
    emit_worker_result(result)


# -- driver ---------------------------------------------------------------------------------
def collect(names: list[str], args: argparse.Namespace) -> dict[str, dict]:
    """Run every contestant ``--repeats`` times, round-robin, each run in a fresh process."""
    common = ["--repeat", str(args.repeat), "--seed", str(args.seed), "--batch-size", str(args.batch_size)]
    if args.limit is not None:
        common += ["--limit", str(args.limit)]
    runs: dict[str, list[dict]] = {name: [] for name in names}
    errors: dict[str, str] = {}
    for rep in range(args.repeats):
        for name in names:
            if name in errors:
                continue
            try:
                r = run_worker(Path(__file__), ["--worker", name, *common])
            except (RuntimeError, ValueError) as e:
                errors[name] = str(e)
                print(f"[{rep + 1}/{args.repeats}] {name}: FAILED\n{e}", file=sys.stderr)
                continue
            runs[name].append(r)
            print(f"[{rep + 1}/{args.repeats}] {name:13s} {r['events'] / r['seconds']:>12,.0f} ev/s "
                  f"{r['seconds']:7.2f} s  peak +{r['peak_mib']:.1f} MiB", file=sys.stderr, flush=True)
    return {name: summarize(rs) if rs else {"error": errors.get(name, "no runs")}
            for name, rs in runs.items()}


def summarize(rs: list[dict]) -> dict:
    rate = Rate.of(rs[0]["events"], [r["seconds"] for r in rs])
    accs = {r["accuracy"] for r in rs}
    return {"events": rs[0]["events"], "events_per_s": rate.median, "events_per_s_min": rate.low,
            "events_per_s_max": rate.high, "events_per_s_runs": list(rate.samples),
            "accuracy": rs[0]["accuracy"], "log_loss": rs[0]["log_loss"], "deterministic": len(accs) == 1,
            "peak_mib": max(r["peak_mib"] for r in rs), "memory_method": rs[0]["memory_method"],
            "tokens": rs[0]["tokens"], "accuracy_after_first_batch": rs[0]["accuracy_after_first_batch"],
            "sources": sorted({r["source"] for r in rs})}


def _ratio(res: dict, name: str, base: str) -> float | None:
    a, b = res.get(name, {}).get("events_per_s"), res.get(base, {}).get("events_per_s")
    return a / b if a and b else None


def targets(res: dict) -> list[dict]:
    """The issue's targets: (description, measured, threshold, PASS/MISS or n/a)."""
    def acc(name: str) -> float | None:
        return res.get(name, {}).get("accuracy")

    def diff(a: float | None, b: float | None) -> float | None:
        return a - b if a is not None and b is not None else None

    rows = [("mini-batch events/s >= 10x River per-event", _ratio(res, "sb-batch", "river"), 10.0, "x"),
            ("mini-batch events/s >= 0.5x bare tokenize+hash floor", _ratio(res, "sb-batch", "floor"), 0.5,
             "x"),
            ("per-event events/s >= 5x River per-event", _ratio(res, "sb-event", "river"), 5.0, "x"),
            ("per-event accuracy >= River's (difference)", diff(acc("sb-event"), acc("river")), 0.0, "acc"),
            ("mini-batch accuracy >= River's (difference)", diff(acc("sb-batch"), acc("river")), 0.0, "acc")]
    out = []
    for text, value, threshold, kind in rows:
        verdict = "n/a" if value is None else ("PASS" if value >= threshold else "MISS")
        out.append({"target": text, "measured": value, "threshold": threshold, "kind": kind,
                    "result": verdict})
    return out


def report(res: dict, args: argparse.Namespace) -> list[dict]:
    n = next((r["events"] for r in res.values() if "events" in r), 0)
    versions = ", ".join(f"{p} {package_version(p)}" for p in ("numpy", "river", "scikit-learn", "mmh3"))
    print(f"\nSMS Spam Collection x{args.repeat}, seed {args.seed}: {n:,} events, prequential; "
          f"batch size {args.batch_size}; median of {args.repeats} run(s), each in a fresh process")
    print(f"Python {sys.version.split()[0]}; {versions}")
    rows = []
    for name, r in res.items():
        label = CONTESTANTS[name].format(bs=args.batch_size)
        if "error" in r:
            rows.append([label, "FAILED", "", "", "", "", "", ""])
            continue
        rows.append([label, fmt(r["events_per_s"]),
                     f"{fmt(r['events_per_s_min'])}–{fmt(r['events_per_s_max'])}",
                     fmt(r["accuracy"], ".4f") + ("" if r["deterministic"] else " (varies!)"),
                     fmt(r["log_loss"], ".4f"), fmt(r["peak_mib"], ".1f"),
                     fmt(_ratio(res, name, "river"), ".2f"), fmt(_ratio(res, name, "floor"), ".3f")])
    print_table("Prequential naive Bayes throughput",
                ["contestant", "events/s", "min–max", "accuracy", "log loss", "peak MiB", "×River",
                 "×floor"], rows, [False] + [True] * 7, plain=args.plain)
    method = next((r["memory_method"] for r in res.values() if "memory_method" in r), "?")
    print(f"peak MiB: resident-memory growth over the timed loop ({method}), max over runs")
    floor = res.get("floor", {})
    if floor.get("tokens"):
        print(f"stream: {floor['tokens']:,} tokens ({floor['tokens'] / n:.1f}/event); floor hashes "
              f"{floor['tokens'] * floor['events_per_s'] / n:,.0f} tokens/s")
    warm = [f"{name} {r['accuracy_after_first_batch']:.4f}" for name, r in res.items()
            if r.get("accuracy_after_first_batch") is not None]
    if warm:
        print(f"accuracy without the first {args.batch_size} events (cold start): {', '.join(warm)}")
    mixed = [name for name, r in res.items() if len(r.get("sources", [])) > 1]
    if mixed:
        print(f"WARNING: streambayes sources changed between the runs of {', '.join(mixed)}; "
              "their medians mix code versions (see 'sources' in --json)")
    tgt = targets(res)
    print("\nTargets")
    for t in tgt:
        spec = "+.4f" if t["kind"] == "acc" else ".2f"
        shown = fmt(t["measured"], spec, "n/a") + ("x" if t["kind"] == "x" and t["measured"] else "")
        print(f"  {t['result']:4s}  {t['target']:52s} measured {shown}")
    return tgt


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=20, help="times the data set is repeated (default 20)")
    ap.add_argument("--seed", type=int, default=0, help="shuffle seed (default 0)")
    ap.add_argument("--limit", type=int, default=None, help="stop after this many events")
    ap.add_argument("--batch-size", type=int, default=1000, help="mini-batch size (default 1000)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per contestant (default 3)")
    ap.add_argument("--only", default=None, help=f"comma-separated subset of: {', '.join(CONTESTANTS)}")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    ap.add_argument("--plain", action="store_true", help="plain-text table even if rich is installed")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if min(args.repeat, args.batch_size, args.repeats, 1 if args.limit is None else args.limit) < 1:
        ap.error("--repeat, --batch-size, --repeats and --limit must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        worker(args.worker, args)
        return 0
    names = list(CONTESTANTS) if args.only is None else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONTESTANTS]
    if unknown:
        print(f"unknown contestant(s) {unknown}; choose from {', '.join(CONTESTANTS)}", file=sys.stderr)
        return 2
    res = collect(names, args)
    tgt = report(res, args)
    if args.json is not None:
        payload = {"config": {k: v for k, v in vars(args).items() if k not in ("json", "worker", "plain")},
                   "results": res, "targets": tgt,
                   "ratios": {n: {"x_river": _ratio(res, n, "river"), "x_floor": _ratio(res, n, "floor")}
                              for n in res}}
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
