"""Semi-naive Bayes on the UCI categorical sets: NB, AODE, SPODE, TAN and kDB side by side.

For each of car, mushroom, nursery, tic-tac-toe and vote (``$STREAMBAYES_DATA/uci``), rows in
one seeded shuffled order, and for each contestant (``catnb`` = categorical naive Bayes with
Laplace smoothing, ``aode``, ``spode``, ``tan``, ``kdb``, ``kdb2`` = kDB with k = 2; those absent
from ``streambayes.models.MODELS`` are listed and skipped). ``--datasets wide`` adds a synthetic
audiology-like set (24 classes, 60 attributes of 2 to 150 values, 226 rows; ``wide_stream``),
whose dense class × value³ table would need ~35 GB. The targets include memory: AODE and kDB-2
``memory_bytes()`` <= 50 MiB on every set run:

  cv error      10-fold cross-validation: 10 contiguous folds of the shuffled rows; train on 9
                with ``learn_many`` (mini-batches of ``--batch-size``), predict the held-out
                fold with ``predict_proba_many``; error = 1 - accuracy (argmax, ties -> first
                column); mean and sample std over the folds
  preq error    prequential (test-then-train) over the shuffled rows, per event with
                ``predict_proba_one`` / ``learn_one`` (``--preq-batch 1``) or per mini-batch;
                a prediction before any training is an error. A (set, model) whose per-event
                run passes ``--preq-budget`` seconds finishes in mini-batches of
                ``--preq-fallback`` (marked ``*``)
  learn ev/s    events / seconds of featurize + learn_many over the shuffled rows in mini-batches
                of 1000 from an empty model; median of ``--repeats``
  predict ev/s  events / seconds of featurize + predict_proba_many in mini-batches of 1000 on the
                trained model; median of ``--repeats``
  memory KiB    ``memory_bytes()`` of the model trained on the full set

Weka (bench/_weka.py; ``--no-weka`` to skip; said so when absent): NaiveBayes, AODE, BayesNet with
TAN and with K2 search (alpha 0.5, missing cells filled with the mode) on the same 10 folds, in one
JVM; targets: the best streambayes learner's error <= the best Weka error, and ``tan`` <= Weka TAN
+ 0.005, on every set. ``soybean`` and ``breast-cancer`` are the all-nominal UCI sets Weka ships
(``/usr/share/doc/weka/examples``), with many missing cells; ``tanv`` is TAN with a missing cell
as a value of its own (``missing="value"``, the set's attributes as schema).

A reference row, scikit-learn's ``CategoricalNB`` (alpha 1, ordinal codes, ``min_categories``
from the full set so unseen values work, a missing value as a category of its own), gives the
10-fold error of NB on the same folds, with the share of held-out rows where it predicts the
same class as ``catnb``.

    /work/venv/bin/python bench/seminaive.py                       # everything, a few minutes
    /work/venv/bin/python bench/seminaive.py --models catnb,aode --datasets nursery --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np
from _common import (
    Rate,
    fmt,
    load_uci,
    package_version,
    print_table,
    timed,
)
from _weka import EXAMPLES, NOMINAL_EXAMPLES, WEKA, load_arff, weka_folds, weka_targets
from _weka import available as weka_available

from streambayes.devtools.datasets import wide_stream
from streambayes.models import MODELS, make_model

DATASETS = ("car", "mushroom", "nursery", "tic-tac-toe", "vote", *NOMINAL_EXAMPLES)  # the last: Weka's
CONTESTANTS = ("catnb", "aode", "spode", "tan", "tanv", "kdb", "kdb2")
# contestant → (registered model, parameters); missing="value" gets the set's attributes as schema
VARIANTS = {"kdb2": ("kdb", {"k": 2}), "tanv": ("tan", {"missing": "value"})}
_SCHEMA: list = []  # the attributes of the set being run
WIDE = "wide"  # the synthetic audiology-like set (``--datasets wide``), see wide_stream()
MEMORY_TARGET = (("aode", 50 * 2**20), ("kdb2", 50 * 2**20))  # memory_bytes() on every set
NB = "catnb"
REF = "sklearn CategoricalNB (ref)"
TARGETS = (("aode", "nursery", "learn", 50_000.0), ("aode", "nursery", "predict", 10_000.0))
THROUGHPUT_BATCH = 1000


# -- measurements ---------------------------------------------------------------------------
def _make(name: str):
    """A fresh contestant: a registered model, or a variant of one (``kdb2`` = kDB with k = 2)."""
    model, params = VARIANTS.get(name, (name, {}))
    if params.get("missing") == "value":
        params = {**params, "schema": _SCHEMA}
    return make_model(model, **params)


def _labels(proba: np.ndarray, classes: list) -> np.ndarray:
    """Predicted labels: argmax per row, ties to the first column; None before any training."""
    if proba.shape[1] == 0:
        return np.full(proba.shape[0], None, dtype=object)
    return np.array(classes, dtype=object)[proba.argmax(axis=1)]


def _learn(model, xs: list, ys: list, bs: int) -> None:
    for lo in range(0, len(xs), bs):
        model.learn_many(model.featurize(xs[lo:lo + bs]), ys[lo:lo + bs])


def _predict(model, xs: list, bs: int) -> np.ndarray:
    return np.concatenate([_labels(model.predict_proba_many(model.featurize(xs[lo:lo + bs])),
                                   model.classes) for lo in range(0, len(xs), bs)])


def cross_validate(name: str, xs: list, ys: np.ndarray, folds: list[np.ndarray], bs: int) -> dict:
    """k-fold error of a fresh model per fold; ``pred`` holds every row's held-out prediction."""
    pred = np.full(len(xs), None, dtype=object)
    errors = []
    for k, test in enumerate(folds):
        train = np.concatenate([f for j, f in enumerate(folds) if j != k]).tolist()
        model = _make(name)
        _learn(model, [xs[i] for i in train], ys[train].tolist(), bs)
        pred[test] = _predict(model, [xs[i] for i in test.tolist()], len(test))
        errors.append(float(np.mean(pred[test] != ys[test])))
    return {"cv_error": statistics.fmean(errors), "cv_std": statistics.stdev(errors),
            "fold_errors": errors, "pred": pred}


def prequential(name: str, xs: list, ys: list, batch: int, budget: float, fallback: int) -> dict:
    """Test-then-train error; per event while within ``budget`` seconds, then in mini-batches."""
    model, errors, i, t0 = _make(name), 0, 0, time.perf_counter()
    if batch == 1:
        predict, learn = model.predict_proba_one, model.learn_one
        while i < len(xs) and not (budget and time.perf_counter() - t0 > budget):
            p = predict(xs[i])
            errors += not p or max(p, key=p.get) != ys[i]  # dict in classes order: ties -> first
            learn(xs[i], ys[i])
            i += 1
    per_event, size = i if batch == 1 else 0, batch if batch > 1 else fallback
    for lo in range(i, len(xs), size):
        X, y = model.featurize(xs[lo:lo + size]), ys[lo:lo + size]
        errors += int(np.sum(_labels(model.predict_proba_many(X), model.classes) != np.array(y, object)))
        model.learn_many(X, y)
    return {"preq_error": errors / len(xs), "preq_per_event": per_event,
            "preq_batch": None if per_event == len(xs) else size,
            "preq_fallback": batch == 1 and per_event < len(xs), "preq_seconds": time.perf_counter() - t0}


def throughput(name: str, xs: list, ys: list, repeats: int) -> dict:
    """Median learn and predict events/s in mini-batches of 1000, and the trained model's memory."""
    models = [_make(name) for _ in range(repeats)]
    learn_s = [timed(lambda m=m: _learn(m, xs, ys, THROUGHPUT_BATCH))[0] for m in models]
    model = models[-1]
    predict_s = [timed(lambda: _predict(model, xs, THROUGHPUT_BATCH))[0] for _ in range(repeats)]
    learn, predict = Rate.of(len(xs), learn_s), Rate.of(len(xs), predict_s)
    return {"learn_per_s": learn.median, "learn_per_s_runs": list(learn.samples),
            "predict_per_s": predict.median, "predict_per_s_runs": list(predict.samples),
            "memory_bytes": int(model.memory_bytes())}


def sklearn_reference(xs: list, ys: np.ndarray, folds: list[np.ndarray]) -> dict:
    """scikit-learn CategoricalNB on the same folds; a missing value is a category of its own."""
    from sklearn.naive_bayes import CategoricalNB
    from sklearn.preprocessing import OrdinalEncoder

    raw = np.array([["\0missing" if v is None else v for v in x.values()] for x in xs], dtype=object)
    encoder = OrdinalEncoder().fit(raw)
    codes = encoder.transform(raw).astype(np.int64)
    n_categories = [len(c) for c in encoder.categories_]
    pred = np.full(len(xs), None, dtype=object)
    errors = []
    for k, test in enumerate(folds):
        train = np.concatenate([f for j, f in enumerate(folds) if j != k])
        model = CategoricalNB(alpha=1.0, min_categories=n_categories).fit(codes[train], ys[train])
        pred[test] = model.predict(codes[test])
        errors.append(float(np.mean(pred[test] != ys[test])))
    return {"cv_error": statistics.fmean(errors), "cv_std": statistics.stdev(errors),
            "fold_errors": errors, "pred": pred}


def _guarded(what: str, stage: str, fn, *args) -> dict:
    """``fn(*args)``, or ``{"error_<stage>": ...}`` (the innermost frames on stderr): one failure
    never stops the run."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - a benchmark reports a failing contestant and goes on
        print(f"{what} {stage}: FAILED\n{traceback.format_exc(limit=-4)}", file=sys.stderr)
        return {f"error_{stage}": f"{type(e).__name__}: {e}"}


# -- per data set ---------------------------------------------------------------------------
def run_dataset(ds: str, names: list[str], args: argparse.Namespace) -> dict:
    xs_file, ys_file = (wide_stream() if ds == WIDE else load_arff(EXAMPLES / f"{ds}.arff")
                        if ds in NOMINAL_EXAMPLES else load_uci(ds))
    order = np.random.default_rng(args.seed).permutation(len(xs_file)).tolist()
    xs, ys = [xs_file[i] for i in order], [ys_file[i] for i in order]
    _SCHEMA[:] = sorted({f for x in xs for f in x})
    y_arr = np.array(ys, dtype=object)
    folds = np.array_split(np.arange(len(xs)), args.folds)
    out = {"events": len(xs), "attributes": len(xs[0]), "classes": sorted(set(ys)),
           "missing_cells": sum(v is None for x in xs for v in x.values()), "models": {}}
    for name in names:
        t0 = time.perf_counter()
        what = f"{ds}/{name}"
        r = _guarded(what, "cv", cross_validate, name, xs, y_arr, folds, args.batch_size)
        r |= _guarded(what, "preq", prequential, name, xs, ys, args.preq_batch, args.preq_budget,
                      args.preq_fallback)
        r |= _guarded(what, "throughput", throughput, name, xs, ys, args.repeats)
        out["models"][name] = r
        print(f"{ds:12s} {name:6s} cv {fmt(r.get('cv_error'), '.4f')}  preq {fmt(r.get('preq_error'), '.4f')}"
              f"  {time.perf_counter() - t0:6.1f} s", file=sys.stderr, flush=True)
    if args.weka:
        out["weka"] = _guarded(f"{ds}/weka", "weka", weka_folds, xs, ys, folds)
    if args.reference:
        out["reference"] = _guarded(f"{ds}/sklearn", "cv", sklearn_reference, xs, y_arr, folds)
        if NB in out["models"]:
            _compare_reference(out, xs, y_arr, folds, args.batch_size)
    return out


def _compare_reference(out: dict, xs: list, ys: np.ndarray, folds: list, bs: int) -> None:
    """Agreement of catnb with sklearn; with missing cells, also catnb given missing as a value."""
    ref, nb = out["reference"], out["models"][NB]
    if "pred" not in ref or "pred" not in nb:
        return
    ref["agree_with_catnb"] = float(np.mean(ref["pred"] == nb["pred"]))
    if out["missing_cells"]:
        as_value = [{k: "?" if v is None else v for k, v in x.items()} for x in xs]
        r = cross_validate(NB, as_value, ys, folds, bs)
        ref["catnb_missing_as_value"] = {"cv_error": r["cv_error"], "cv_std": r["cv_std"],
                                         "agree_with_sklearn": float(np.mean(r["pred"] == ref["pred"]))}


def _err(r: dict, key: str = "cv_error") -> str:
    if f"error_{key.split('_')[0]}" in r:
        return "FAILED"
    if key == "cv_error":
        return f"{fmt(r.get('cv_error'), '.4f')} ± {fmt(r.get('cv_std'), '.4f')}"
    mark = "*" if r.get("preq_fallback") else ""
    return fmt(r.get("preq_error"), ".4f") + mark


def report_dataset(ds: str, res: dict, args: argparse.Namespace) -> None:
    rows = [[name, _err(r), _err(r, "preq_error"),
             *(["FAILED"] * 3 if "error_throughput" in r else
               [fmt(r["learn_per_s"]), fmt(r["predict_per_s"]), fmt(r["memory_bytes"] / 1024, ",.1f")])]
            for name, r in res["models"].items()]
    ref = res.get("reference")
    if ref is not None:
        rows.append([REF, _err(ref), "–", "–", "–", "–"])
    for name, r in res.get("weka", {}).items():
        rows.append([name, fmt(r.get("cv_error"), ".4f"), "–", "–", "–", "–"])
    title = (f"{ds}: {res['events']:,} events, {res['attributes']} attributes, "
             f"{len(res['classes'])} classes, {res['missing_cells']:,} missing cells")
    print()
    print_table(title, ["model", f"{args.folds}-fold cv error ± std", "preq error", "learn ev/s",
                        "predict ev/s", "memory KiB"], rows, [False] + [True] * 5, plain=args.plain)
    for name, r in res["models"].items():
        if r.get("preq_fallback"):
            print(f"  * {name}: per event for the first {r['preq_per_event']:,} events (budget "
                  f"{args.preq_budget:g} s), then test-then-train in mini-batches of {r['preq_batch']}")
        for stage in ("cv", "preq", "throughput"):
            if f"error_{stage}" in r:
                print(f"  {name} {stage} FAILED: {r[f'error_{stage}']}")
    if ref and "agree_with_catnb" in ref:
        agree = ref["agree_with_catnb"]
        print(f"  reference: sklearn predicts the class catnb predicts on {agree:.2%} of the held-out rows")
        alt = ref.get("catnb_missing_as_value")
        if alt:
            print(f"  catnb skips a missing cell, sklearn counts it as a category; catnb given missing as "
                  f"a value '?': cv error {alt['cv_error']:.4f}, same class as sklearn on "
                  f"{alt['agree_with_sklearn']:.2%}")


# -- summary --------------------------------------------------------------------------------
def summary(results: dict, names: list[str], args: argparse.Namespace) -> dict:
    cv = {ds: {n: r["models"][n].get("cv_error") for n in names} for ds, r in results.items()}
    rows = []
    for ds, errs in cv.items():
        best = min((e for e in errs.values() if e is not None), default=None)
        cells = [("–" if e is None else f"{e:.4f}" + (" *" if e == best else "  ")) for e in errs.values()]
        ref = results[ds].get("reference", {}).get("cv_error")
        weka = [fmt(results[ds].get("weka", {}).get(w, {}).get("cv_error"), ".4f") for w in WEKA]
        rows.append([ds, *cells] + ([fmt(ref, ".4f")] if args.reference else [])
                    + (weka if args.weka else []))
    print()
    print_table(f"{args.folds}-fold cv error (* = best of the models)", ["data set", *names]
                + (["sklearn ref"] if args.reference else []) + (list(WEKA) if args.weka else []),
                rows, plain=args.plain)
    wins = {}
    for n in names:
        pairs = [(e[n], e[NB]) for e in cv.values() if e.get(n) is not None and e.get(NB) is not None]
        wins[n] = {"below_nb": sum(a < b for a, b in pairs), "compared": len(pairs)}
    a = wins.get("aode")
    if a is None or NB not in names:
        print(f"AODE below NB: n/a (needs both aode and {NB})")
    else:
        print(f"AODE below NB on {a['below_nb']} of {a['compared']} sets")
    others = [f"{n} {w['below_nb']}/{w['compared']}" for n, w in wins.items() if n not in (NB, "aode")]
    if others and NB in names:
        print(f"(below NB: {', '.join(others)})")
    return {"cv_error": cv, "below_nb": wins}


def targets(results: dict) -> list[dict]:
    out = []
    print(f"\nTargets (mini-batches of {THROUGHPUT_BATCH}, median of runs)")
    for model, ds, kind, threshold in TARGETS:
        r = results.get(ds, {}).get("models", {}).get(model, {})
        value = r.get(f"{kind}_per_s")
        verdict = "n/a" if value is None else ("PASS" if value >= threshold else "MISS")
        why = "" if value is not None else (f" ({model} not run)" if not r else " (failed)")
        print(f"  {verdict:4s}  {model.upper()} {kind:7s} on {ds} >= {threshold:>6,.0f} events/s"
              f"   measured {fmt(value, ',.0f', 'n/a')}{why}")
        out.append({"model": model, "dataset": ds, "kind": kind, "threshold": threshold,
                    "measured": value, "result": verdict})
    for model, bound in MEMORY_TARGET:
        for ds, res in results.items():
            value = res.get("models", {}).get(model, {}).get("memory_bytes")
            verdict = "n/a" if value is None else ("PASS" if value <= bound else "MISS")
            print(f"  {verdict:4s}  {model.upper()} memory on {ds} <= {bound / 2**20:g} MiB"
                  f"   measured {fmt(None if value is None else value / 2**20, ',.2f', 'n/a')} MiB")
            out.append({"model": model, "dataset": ds, "kind": "memory_bytes", "threshold": bound,
                        "measured": value, "result": verdict})
    return out


# -- driver ---------------------------------------------------------------------------------
def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=_csv, default=list(CONTESTANTS),
                    help=f"comma-separated model names (default {','.join(CONTESTANTS)})")
    ap.add_argument("--datasets", type=_csv, default=list(DATASETS),  # also: wide (synthetic)
                    help=f"comma-separated subset of {','.join(DATASETS)}")
    ap.add_argument("--seed", type=int, default=1, help="shuffle seed (default 1)")
    ap.add_argument("--folds", type=int, default=10, help="cross-validation folds (default 10)")
    ap.add_argument("--batch-size", type=int, default=1000, help="cv training mini-batch (default 1000)")
    ap.add_argument("--preq-batch", type=int, default=1, help="prequential mini-batch; 1 = per event")
    ap.add_argument("--preq-budget", type=float, default=15.0,
                    help="seconds of per-event prequential per (set, model) before falling back to "
                         "mini-batches; 0 = no limit (default 15)")
    ap.add_argument("--preq-fallback", type=int, default=100, help="fallback mini-batch (default 100)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs for events/s (default 3)")
    ap.add_argument("--no-reference", dest="reference", action="store_false",
                    help="skip the scikit-learn CategoricalNB reference row")
    ap.add_argument("--no-weka", dest="weka", action="store_false",
                    help="skip Weka's NaiveBayes, AODE, BayesNet TAN and K2 on the same folds")
    ap.add_argument("--json", type=Path, default=None, help="also write all figures to this file")
    ap.add_argument("--plain", action="store_true", help="plain-text tables even if rich is installed")
    args = ap.parse_args(argv)
    if min(args.batch_size, args.preq_batch, args.preq_fallback, args.repeats) < 1 or args.folds < 2:
        ap.error("--batch-size, --preq-batch, --preq-fallback, --repeats must be >= 1, --folds >= 2")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    names = [n for n in args.models if n in MODELS or n in VARIANTS]
    missing = [n for n in args.models if n not in MODELS and n not in VARIANTS]
    datasets = [d for d in args.datasets if d in (*DATASETS, WIDE)]
    versions = ", ".join(f"{p} {package_version(p)}" for p in ("numpy", "scikit-learn"))
    print(f"Semi-naive Bayes on UCI sets; seed {args.seed}; Python {sys.version.split()[0]}; {versions}")
    absent = f"; not in streambayes.models.MODELS: {', '.join(missing)}" if missing else ""
    print(f"models: {', '.join(names) or 'none'}{absent}")
    preq = ("per event" if args.preq_batch == 1 else f"per mini-batch of {args.preq_batch}") + (
        f" (after {args.preq_budget:g} s: mini-batches of {args.preq_fallback})"
        if args.preq_batch == 1 and args.preq_budget else "")
    print(f"cv: {args.folds} folds of the shuffled rows, training mini-batch {args.batch_size}; "
          f"prequential: {preq}; events/s: mini-batches of {THROUGHPUT_BATCH}, median of {args.repeats}")
    why = weka_available() if args.weka else "--no-weka"
    args.weka = args.weka and why is None
    print("Weka: " + (f"{', '.join(WEKA)} on the same folds (bench/_weka.py)" if args.weka else
                      f"not run ({why})"))
    unknown = sorted(set(args.datasets) - {*DATASETS, WIDE})
    if unknown:
        print(f"unknown data set(s) skipped: {', '.join(unknown)}")
    results: dict[str, dict] = {}
    for ds in datasets:
        try:
            results[ds] = run_dataset(ds, names, args)
        except (OSError, ValueError) as e:
            print(f"{ds}: cannot load: {e}")
            continue
        report_dataset(ds, results[ds], args)
    summ = summary(results, names, args) if results else {}
    tgt = targets(results) + (weka_targets(results, names) if args.weka else [])
    seconds = time.perf_counter() - t0
    print(f"\ntotal {seconds:.0f} s")
    if args.json is not None:
        _write_json(args, names, missing, results, summ, tgt, seconds)
    return 0


def _write_json(args, names, missing, results, summ, tgt, seconds) -> None:
    def strip(r: dict) -> dict:
        return {k: v for k, v in r.items() if k != "pred"}

    for res in results.values():
        res["models"] = {n: strip(r) for n, r in res["models"].items()}
        if "reference" in res:
            res["reference"] = strip(res["reference"])
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    payload = {"config": config, "models": names, "models_missing": missing, "results": results,
               "summary": summ, "targets": tgt, "seconds": seconds,
               "versions": {p: package_version(p) for p in ("numpy", "scikit-learn")}}
    args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    sys.exit(main())
