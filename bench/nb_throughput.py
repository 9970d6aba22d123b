"""Prequential throughput of multinomial naive Bayes on text, side by side with the peers.

``--corpus sms`` (default): the SMS Spam Collection repeated ``--repeat`` times in one seeded
shuffled order. ``--corpus enron`` / ``--corpus newsgroups``: long texts (see ``_corpora.py``):
enron1-3 in file order as handed over, 20 Newsgroups posts with headers in one seeded shuffled
order; there ``--batch-size`` defaults to 256 and mini-batches grow 1, 2, 4, ... to it, as
replay's do (``sb-replay`` batches as replay does by default: up to 256 events, each predicted by
the model of all events before it; ``--replay-batch-size`` bounds it). The stream goes through
each contestant prequentially (every event is predicted before it is learned):

  sb-event       streambayes MultinomialNB, predict_proba_one then learn_one per event
  sb-batch       streambayes MultinomialNB, per mini-batch: featurize, predict_proba_many, learn_many
  sb-replay      ``replay()`` of the stream as a JSONL file, default model and batching: reading,
                 decoding, validating, featurizing, predicting, scoring and learning (long corpora)
  river          River BagOfWords(our tokenizer) | MultinomialNB, predict_proba_one / learn_one
  river-default  the same with River's own tokenizer (and its accent stripping)
  sklearn        HashingVectorizer(norm=None, alternate_sign=False) + MultinomialNB.partial_fit
  floor          the bare floor of the work: tokenize + mmh3-hash every token, no cache, no counting
  featurize      streambayes Featurizer.featurize alone, per mini-batch (informational)

Every (contestant, repeat) runs in a fresh worker process (``--worker NAME``): it loads the
data, does its imports, then times only the predict+learn loop (featurization included) and
records the peak resident-memory growth over that loop (see ``_common.PeakMemory``).
Metrics are computed afterwards, in numpy, from each event's stored probability of its true
class and whether the top class was right.

    /work/venv/bin/python bench/nb_throughput.py                 # full run, a few minutes
    /work/venv/bin/python bench/nb_throughput.py --limit 20000 --repeats 1 --only sb-batch,floor
    /work/venv/bin/python bench/nb_throughput.py --corpus enron  # long mail: batch, replay, River, floor
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
    package_version,
    print_table,
    run_worker,
)
from _corpora import CORPORA, growing, load_corpus, replay_file, score_rows

N_FEATURES = 2**20
POSITIVE = "spam"
CONTESTANTS = {
    "sb-event": "streambayes MNB per-event",
    "sb-batch": "streambayes MNB mini-batch ({bs})",
    "sb-replay": "streambayes replay, default model and batching",
    "river": "River BagOfWords|MNB per-event (our tokenizer)",
    "river-default": "River BagOfWords|MNB per-event (River tokenizer)",
    "sklearn": "sklearn HashingVectorizer+MNB.partial_fit ({bs})",
    "floor": "bare floor: tokenize + mmh3 hash",
    "featurize": "streambayes Featurizer.featurize alone ({bs})",
}
PREDICTS = {"sb-event", "sb-batch", "river", "river-default", "sklearn"}
LONG_DEFAULT = ("sb-batch", "sb-replay", "river", "floor")  # the contestants of --corpus enron/newsgroups


# -- the stream -----------------------------------------------------------------------------
class Stream:
    """The repeated stream (shuffled but for enron, in file order); texts are distinct string
    objects, as if freshly decoded."""

    def __init__(self, repeat: int, seed: int, limit: int | None, corpus: str = "sms") -> None:
        import numpy as np

        texts, labels, self.path = load_corpus(corpus)
        self.corpus = corpus
        order = np.tile(np.arange(len(texts)), repeat)
        if corpus != "enron":
            order = np.random.default_rng(seed).permutation(order)
        self.as_handed_over = corpus == "enron" and repeat == 1 and limit is None
        if limit is not None:
            order = order[:limit]
        self.texts = [texts[i].encode("utf-8").decode("utf-8") for i in order.tolist()]
        self.labels = [labels[i] for i in order.tolist()]
        self.classes = sorted(set(self.labels))
        self.first = self.classes[0]  # scored as an untrained model's prediction (ham for SMS)
        self.n = len(self.texts)

    def dicts(self) -> list[dict]:
        return [{"text": t} for t in self.texts]


# -- contestants: each returns a zero-argument run closure; imports happen before timing ----
def _per_event(model, inputs, ys, p, right) -> None:
    """Prequential per event: predict_proba_one, then learn_one (River's protocol)."""
    predict, learn = model.predict_proba_one, model.learn_one
    first = min(ys)  # what an untrained model predicts here (as in score_rows)
    for i, x in enumerate(inputs):
        proba = predict(x)
        p[i] = proba.get(ys[i], 0.0) if proba else 0.5
        right[i] = max(proba, key=proba.get) == ys[i] if proba else ys[i] == first
        learn(x, ys[i])


def _sb_event(s: Stream, p, right, bs: int) -> Callable[[], None]:
    from streambayes.models.naive_bayes import MultinomialNB

    xs, ys = s.dicts(), s.labels

    def run() -> None:
        _per_event(MultinomialNB(alpha=1.0), xs, ys, p, right)
    return run


def _sb_batch(s: Stream, p, right, bs: int, grow: bool = False) -> Callable[[], None]:
    from streambayes.models.naive_bayes import MultinomialNB

    xs, ys = s.dicts(), s.labels

    def run() -> None:
        model = MultinomialNB(alpha=1.0)
        for lo, hi in growing(len(xs), bs, grow):
            X = model.featurize(xs[lo:hi])
            score_rows(model.predict_proba_many(X), model.classes, ys[lo:hi], p, right, lo, s.first)
            model.learn_many(X, ys[lo:hi])
    return run


def _sb_replay(s: Stream, p, right, bs: int) -> Callable[[], dict]:
    """``replay()`` as ``streambayes replay FILE`` runs it (the file written before timing)."""
    import river.metrics  # noqa: F401 (replay's scoring imports it when it starts: 0.7 s of scipy)

    from streambayes.runtime.loops.replay import build_models, replay
    from streambayes.runtime.records.decode import Decoder
    from streambayes.runtime.records.sinks import MemorySink
    from streambayes.runtime.records.sources import FileSource

    path = s.path if s.as_handed_over else replay_file(s.texts, s.labels)

    def run() -> dict:
        with FileSource(path) as source:
            result = replay(source, Decoder(source.format, header=source.header), build_models(["nb"]),
                            MemorySink(), topic=str(path), batch_size=bs)
        if path != s.path:
            path.unlink()
        m = result.run.summary()["nb"]
        return {"accuracy": m["accuracy"], "log_loss": m["log_loss"], "events": m["events"]}
    return run


def _river(s: Stream, p, right, river_tokenizer: bool) -> Callable[[], None]:
    from river import feature_extraction, naive_bayes

    from streambayes.features import Tokenizer

    texts, ys = s.texts, s.labels
    # Our tokenizer lower-cases and keeps accents: River gets exactly our tokens.
    ours = {"tokenizer": Tokenizer(), "lowercase": False, "strip_accents": False}
    bow_args = {} if river_tokenizer else ours

    def run() -> None:
        model = feature_extraction.BagOfWords(**bow_args) | naive_bayes.MultinomialNB(alpha=1)
        _per_event(model, texts, ys, p, right)
    return run


def _sklearn(s: Stream, p, right, bs: int) -> Callable[[], None]:
    from sklearn.feature_extraction.text import HashingVectorizer
    from sklearn.naive_bayes import MultinomialNB

    from streambayes.features import Tokenizer

    texts, ys = s.texts, s.labels

    def run() -> None:
        vec = HashingVectorizer(n_features=N_FEATURES, norm=None, alternate_sign=False,
                                tokenizer=Tokenizer(), lowercase=False, token_pattern=None)
        model = MultinomialNB(alpha=1.0)
        fitted = False
        for lo in range(0, len(texts), bs):
            X = vec.transform(texts[lo:lo + bs])
            proba, classes = (model.predict_proba(X), list(model.classes_)) if fitted else (None, [])
            score_rows(proba, classes, ys[lo:lo + bs], p, right, lo, s.first)
            model.partial_fit(X, ys[lo:lo + bs], classes=s.classes)
            fitted = True
    return run


def _floor(s: Stream, p, right, bs: int) -> Callable[[], int]:
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


def _featurize(s: Stream, p, right, bs: int) -> Callable[[], None]:
    from streambayes.features import Featurizer

    xs = s.dicts()

    def run() -> None:
        featurizer = Featurizer(n_features=N_FEATURES)
        for lo in range(0, len(xs), bs):
            featurizer.featurize(xs[lo:lo + bs])
    return run


SETUP = {
    "sb-event": _sb_event, "sklearn": _sklearn, "floor": _floor, "featurize": _featurize,
    "sb-batch": lambda s, p, right, bs: _sb_batch(s, p, right, bs, grow=s.corpus != "sms"),
    "sb-replay": _sb_replay,
    "river": lambda s, p, right, bs: _river(s, p, right, river_tokenizer=False),
    "river-default": lambda s, p, right, bs: _river(s, p, right, river_tokenizer=True),
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

    stream = Stream(args.repeat, args.seed, args.limit, args.corpus)
    p, right = np.full(stream.n, np.nan), np.zeros(stream.n, bool)
    run = SETUP[name](stream, p, right, args.replay_batch_size if name == "sb-replay" else args.batch_size)
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        extra = run()
        seconds = time.perf_counter() - t0
    result = {"name": name, "events": stream.n, "seconds": seconds, "peak_mib": mem.peak_mib,
              "memory_method": mem.method, "tokens": extra, "accuracy": None, "log_loss": None,
              "accuracy_after_first_batch": None, "source": source_digest()}
    if isinstance(extra, dict):  # sb-replay: replay's own figures
        if extra["events"] != stream.n:
            raise RuntimeError(f"{name}: {extra['events']} events scored of {stream.n}")
        result |= {"tokens": None, "accuracy": extra["accuracy"], "log_loss": extra["log_loss"]}
    elif name in PREDICTS:
        if np.isnan(p).any():
            raise RuntimeError(f"{name}: {int(np.isnan(p).sum())} events got no prediction")
        result["accuracy"] = float(np.mean(right))
        result["log_loss"] = float(-np.mean(np.log(np.clip(p, 1e-15, 1.0))))
        warm = slice(args.batch_size, None)  # skip the cold start a mini-batch learner pays for
        result["accuracy_after_first_batch"] = float(np.mean(right[warm]))
    emit_worker_result(result)


# -- driver ---------------------------------------------------------------------------------
def collect(names: list[str], args: argparse.Namespace) -> dict[str, dict]:
    """Run every contestant ``--repeats`` times, round-robin, each run in a fresh process."""
    common = ["--repeat", str(args.repeat), "--seed", str(args.seed), "--batch-size", str(args.batch_size),
              "--corpus", args.corpus]
    if args.limit is not None:
        common += ["--limit", str(args.limit)]
    if args.replay_batch_size is not None:
        common += ["--replay-batch-size", str(args.replay_batch_size)]
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
            ("replay events/s >= 10x River per-event", _ratio(res, "sb-replay", "river"), 10.0, "x"),
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
    order = "file order" if args.corpus == "enron" else f"seed {args.seed}"
    grow = "" if args.corpus == "sms" else " (growing 1, 2, 4, ... as replay's)"
    print(f"\n{args.corpus} x{args.repeat}, {order}: {n:,} events, prequential; batch size "
          f"{args.batch_size}{grow}; median of {args.repeats} run(s), each in a fresh process")
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
    ap.add_argument("--corpus", choices=CORPORA, default="sms", help="the texts (default sms)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="times the data set is repeated (default 20 for sms, else 1)")
    ap.add_argument("--seed", type=int, default=0, help="shuffle seed (default 0)")
    ap.add_argument("--limit", type=int, default=None, help="stop after this many events")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="mini-batch size (default 1000 for sms, else 256)")
    ap.add_argument("--replay-batch-size", type=int, default=None,
                    help="sb-replay's largest mini-batch (default: replay's own default batching)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per contestant (default 3)")
    ap.add_argument("--only", default=None, help=f"comma-separated subset of: {', '.join(CONTESTANTS)}")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    ap.add_argument("--plain", action="store_true", help="plain-text table even if rich is installed")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    long = args.corpus != "sms"
    args.repeat = args.repeat if args.repeat is not None else (1 if long else 20)
    args.batch_size = args.batch_size if args.batch_size is not None else (256 if long else 1000)
    if min(args.repeat, args.batch_size, args.repeats, 1 if args.limit is None else args.limit) < 1:
        ap.error("--repeat, --batch-size, --repeats and --limit must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        worker(args.worker, args)
        return 0
    every = [n for n in CONTESTANTS if n != "sb-replay"] if args.corpus == "sms" else list(LONG_DEFAULT)
    names = every if args.only is None else [n.strip() for n in args.only.split(",") if n.strip()]
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
