"""Per-event semi-naive learners: ``predict_proba_one`` + ``learn_one`` (River style, test then
train) against the same models in mini-batches, with River's per-event naive Bayes as the peer.

For each UCI set (``$STREAMBAYES_DATA/uci``, and Weka's soybean and breast-cancer when Weka's
examples are installed) and River's bundled Phishing set (1,250 events of 9 numbers: the learners
bin them, equal-frequency, after a warm-up of 100), rows in one seeded shuffled order:

  per event     events/s of ``p = predict_proba_one(x); learn_one(x, y)`` from an empty model,
                over the rows or until ``--budget`` seconds (wall clock); median of ``--repeats``
  mini-batch    events/s of test-then-train in mini-batches of 1000 (``featurize`` +
                ``predict_proba_many`` + ``learn_many``) over all the rows; median of ``--repeats``
  River         the same per-event loop with River's ``OneHotEncoder() | MultinomialNB(alpha=1)``
                (its categorical naive Bayes; on Phishing, numbers, its ``GaussianNB``), the peer
                where comparable: ratio = ours / River's

Models: ``catnb``, ``aode``, ``spode``, ``tan``, ``tan@1000`` and ``kdb@1000`` (structure refit
every 1,000 events), ``kdb`` (k = 1), ``kdb2`` (k = 2: its triple counts take the mini-batch path
per event), and ``aode/numpy``: AODE per event without its compiled kernels (numba, the ``fast``
extra), the path taken where numba is not installed. Every model first runs 300 events untimed
(numba compiles its kernels at their first call, after the binned numbers' warm-up of 100).
Target (issue 13 item 6): AODE per event >= 10,000 events/s on nursery.

    /work/venv/bin/python bench/seminaive_events.py --datasets nursery --budget 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
from _common import fmt, load_uci, package_version, print_table
from _weka import EXAMPLES, NOMINAL_EXAMPLES, load_arff

from streambayes.models import make_model
from streambayes.models.seminaive import compiled

DATASETS = ("car", "mushroom", "nursery", "tic-tac-toe", "vote", *NOMINAL_EXAMPLES, "phishing")
NUMERIC = ("phishing",)  # River's bundled sets of numbers
MODELS = {"catnb": ("catnb", {}), "aode": ("aode", {}), "aode/numpy": ("aode", {}),
          "spode": ("spode", {}), "tan": ("tan", {}),
          "tan@1000": ("tan", {"refit_every": 1000}), "kdb": ("kdb", {}),
          "kdb@1000": ("kdb", {"refit_every": 1000}), "kdb2": ("kdb", {"k": 2})}
TARGET = ("aode", "nursery", 10_000.0)


def per_event(make, xs: list, ys: list, budget: float, cpu: bool = False) -> float:
    """Events/s by the wall clock, or (``cpu``) by this process's CPU time (``process_time``: on
    a loaded machine, the rate the code reaches while it runs)."""
    clock = time.process_time if cpu else time.perf_counter
    model, n, t0 = make(), 0, clock()
    predict, learn = model.predict_proba_one, model.learn_one
    for x, y in zip(xs, ys, strict=True):
        predict(x)
        learn(x, y)
        n += 1
        if not n % 64 and clock() - t0 > budget:
            break
    return n / (clock() - t0)


def mini_batch(make, xs: list, ys: list, size: int = 1000) -> float:
    model, t0 = make(), time.perf_counter()
    for lo in range(0, len(xs), size):
        batch = model.featurize(xs[lo:lo + size])
        if model.classes:
            model.predict_proba_many(batch)
        model.learn_many(batch, ys[lo:lo + size])
    return len(xs) / (time.perf_counter() - t0)


def river_model():
    from river import naive_bayes, preprocessing

    return preprocessing.OneHotEncoder() | naive_bayes.MultinomialNB(alpha=1.0)


def river_gaussian():
    from river import naive_bayes

    return naive_bayes.GaussianNB()


def _load(ds: str, seed: int) -> tuple[list, list]:
    if ds in NUMERIC:
        from river import datasets

        rows = list(datasets.Phishing())
        xs, ys = [dict(x) for x, _ in rows], [str(y) for _, y in rows]
    else:
        xs, ys = load_arff(EXAMPLES / f"{ds}.arff") if ds in NOMINAL_EXAMPLES else load_uci(ds)
    order = np.random.default_rng(seed).permutation(len(xs)).tolist()
    return [xs[i] for i in order], [ys[i] for i in order]


def run(ds: str, names: list[str], args: argparse.Namespace) -> tuple[list, dict]:
    xs, ys = _load(ds, args.seed)
    rates: dict[str, tuple] = {}
    try:
        peer = river_gaussian if ds in NUMERIC else river_model
        river_rate = statistics.median(per_event(peer, xs, ys, args.budget) for _ in range(args.repeats))
    except ImportError:
        river_rate = None
    for name in names:
        model, params = MODELS[name]
        make = lambda model=model, params=params: make_model(model, **params)  # noqa: E731
        compiled.ENABLED = not name.endswith("/numpy")
        try:
            per_event(make, xs[:300], ys[:300], args.budget)  # untimed: numba compiles here (after
            # the warm-up of binned numbers: 100 events)
            one = [per_event(make, xs, ys, args.budget) for _ in range(args.repeats)]
            many = [mini_batch(make, xs, ys) for _ in range(args.repeats)]
            cpu = statistics.median(per_event(make, xs, ys, args.budget, cpu=True)
                                    for _ in range(args.repeats))
        finally:
            compiled.ENABLED = True
        rates[name] = (statistics.median(one), min(one), max(one), statistics.median(many), cpu)
    rows = [[name, fmt(o), f"{fmt(lo)}–{fmt(hi)}", fmt(c), fmt(b), fmt(o / b, ".2f"),
             fmt(None if river_rate is None else o / river_rate, ".2f")]
            for name, (o, lo, hi, b, c) in rates.items()]
    rows.append(["River GaussianNB" if ds in NUMERIC else "River OneHot|MultinomialNB", fmt(river_rate),
                 "", "", "", "", "1.00"])
    return rows, {"per_event": {n: r[0] for n, r in rates.items()},
                  "per_event_cpu": {n: r[4] for n, r in rates.items()}, "river": river_rate,
                  "events": len(xs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--budget", type=float, default=3.0, help="seconds per per-event run (default 3)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per figure, median (default 3)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--plain", action="store_true")
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n in MODELS]
    if args.budget <= 0 or args.repeats < 1 or not names:
        ap.error("need --budget > 0, --repeats >= 1 and at least one known model")
    kernels = "compiled" if compiled.kernels() is not None else "numpy (numba is not installed)"
    print(f"Per-event semi-naive learners; seed {args.seed}; budget {args.budget:g} s, median of "
          f"{args.repeats}; numpy {package_version('numpy')}, numba {package_version('numba')}, "
          f"river {package_version('river')}; AODE per event: {kernels}")
    results = {}
    for ds in args.datasets.split(","):
        try:
            rows, results[ds] = run(ds, names, args)
        except (OSError, ValueError) as e:
            print(f"{ds}: cannot load: {e}")
            continue
        print()
        print_table(f"{ds}: {results[ds]['events']:,} events", ["model", "per event ev/s", "min–max",
                    "per event ev/s (CPU)", "mini-batch ev/s", "per event / mini-batch",
                    "per event / River"], rows, [False] + [True] * 6, plain=args.plain)
    model, ds, bound = TARGET
    print(f"\nload: {' '.join(f'{v:.1f}' for v in os.getloadavg())} (1, 5, 15 min) on {os.cpu_count()} CPUs")
    for kind in ("per_event", "per_event_cpu"):
        got = results.get(ds, {}).get(kind, {}).get(model)
        verdict = "n/a" if got is None else ("PASS" if got >= bound else "MISS")
        clock = "CPU time" if kind.endswith("cpu") else "wall clock"
        print(f"  {verdict:4s}  {model.upper()} per event (predict_proba_one + learn_one) on {ds} >= "
              f"{bound:,.0f} events/s ({clock})   measured {fmt(got)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
