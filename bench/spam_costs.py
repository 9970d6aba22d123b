"""Cost-sensitive spam decisions and calibration on the SMS Spam Collection.

The collection, shuffled once (``--seed``), is streamed prequentially through streambayes
``MultinomialNB`` in mini-batches (``featurize`` → ``predict_log_proba_many`` → ``learn_many``):
every message gets P(spam) before it is learned. Messages predicted before the model knew both
classes are left out. An :class:`OnlineCalibrator` runs prequentially beside it (squash with the
current α, then update α).

The first half of the scored stream is the "replay": three-way cutoffs (ham / unsure / spam) are
tuned there to minimise the mean cost with a false positive (ham marked spam) costing ``--fp``,
a false negative ``--fn`` and an unsure answer ``--unsure``. The second half compares, by mean
cost per message and unsure rate, a fixed 0.5 threshold, the Bayes decision under the same loss
matrix (``argmin_i Σ_j λ_ij P(c_j|x)``; without and with the reject option, on raw and on
calibrated posteriors) and the tuned cutoffs. A second table gives log loss and calibration
error (ECE, 10 bins; of P(spam) and of the top class) before and after calibration.

    /work/venv/bin/python bench/spam_costs.py [--plot reliability.png]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
from _common import fmt, load_sms_spam, print_table

from streambayes.decide import UNSURE, LossMatrix, ThreeWay, decide, expected_cost, tune_cutoffs
from streambayes.evaluate.calibration import OnlineCalibrator, expected_calibration_error, log_loss, top_label
from streambayes.models import make_model

CLASSES = ("ham", "spam")


def stream_posteriors(texts: Sequence[str], labels: Sequence[str], batch_size: int,
                      half_life: float | None) -> dict:
    """Prequential log P(ham), log P(spam) per message: raw, and squashed by the online calibrator."""
    model = make_model("mnb")
    cal = OnlineCalibrator(half_life=half_life)
    raw, calibrated, truth = [], [], []
    for lo in range(0, len(texts), batch_size):
        xs = [{"text": t} for t in texts[lo:lo + batch_size]]
        ys = list(labels[lo:lo + batch_size])
        X = model.featurize(xs)
        if set(CLASSES) <= set(model.classes):
            lp = model.predict_log_proba_many(X)[:, [model.classes.index(c) for c in CLASSES]]
            y = np.array([CLASSES.index(label) for label in ys])
            calibrated.append(cal.transform(lp))  # predict with the current alpha, then update it
            cal.update(lp, y)
            raw.append(lp)
            truth.append(y)
        model.learn_many(X, ys)
    return {"raw": np.vstack(raw), "cal": np.vstack(calibrated), "y": np.concatenate(truth),
            "alpha": cal.alpha, "cold": len(texts) - sum(len(t) for t in truth)}


def rule_metrics(decisions: list[str], truths: list[str], loss: LossMatrix,
                 cutoffs: tuple[float, float] | None = None) -> dict:
    d, t = np.array(decisions), np.array(truths)
    low, high = cutoffs if cutoffs else (None, None)
    return {"cost": expected_cost(decisions, truths, loss), "unsure_rate": float((d == UNSURE).mean()),
            "fp": int(((d == "spam") & (t == "ham")).sum()), "fn": int(((d == "ham") & (t == "spam")).sum()),
            "unsure": int((d == UNSURE).sum()), "low": low, "high": high}


def run_seed(seed: int, texts: Sequence[str], labels: Sequence[str], args: argparse.Namespace) -> dict:
    """One shuffled stream: the decision rules on the test half and the calibration figures."""
    order = np.random.default_rng(seed).permutation(len(texts))
    s = stream_posteriors([texts[i] for i in order], [labels[i] for i in order], args.batch_size,
                          args.half_life)
    half = len(s["y"]) // 2
    truths = [CLASSES[i] for i in s["y"][half:]]
    p = {"raw": np.exp(s["raw"][:, 1]), "cal": np.exp(s["cal"][:, 1])}
    loss = LossMatrix.false_positive(CLASSES, positive="spam", fp=args.fp, fn=args.fn, reject=args.unsure)
    no_reject = LossMatrix.false_positive(CLASSES, positive="spam", fp=args.fp, fn=args.fn)
    tuned = {kind: tune_cutoffs(p[kind][:half], s["y"][:half] == 1, fp_cost=args.fp, fn_cost=args.fn,
                                unsure_cost=args.unsure) for kind in ("raw", "cal")}
    rules = {"fixed threshold 0.5": rule_metrics(
        ThreeWay("spam", "ham", 0.5, 0.5).decide(p["raw"][half:]), truths, loss, (0.5, 0.5))}
    for kind, suffix in (("raw", ""), ("cal", ", calibrated")):
        rows = s[kind][half:]
        rules["Bayes (no reject)" + suffix] = rule_metrics(decide(no_reject, rows, CLASSES, log=True),
                                                           truths, loss)
        rules["Bayes + reject" + suffix] = rule_metrics(decide(loss, rows, CLASSES, log=True), truths, loss)
        rules["three-way tuned on replay" + suffix] = rule_metrics(
            tuned[kind].rule("spam", "ham").decide(p[kind][half:]), truths, loss,
            (tuned[kind].low, tuned[kind].high))
    calibration = {}
    for part, sl in (("whole stream", slice(None)), ("test half", slice(half, None))):
        for kind in ("raw", "cal"):
            lp, y = s[kind][sl], s["y"][sl]
            top_p, right = top_label(lp, y)
            calibration[f"{part}, {'before' if kind == 'raw' else 'after'}"] = {
                "log_loss": log_loss(lp, y), "ece_spam": expected_calibration_error(np.exp(lp[:, 1]), y),
                "ece_top": expected_calibration_error(top_p, right), "accuracy": float(np.mean(right))}
    return {"seed": seed, "n": len(s["y"]), "half": half, "cold": s["cold"], "alpha": s["alpha"],
            "tuned": tuned, "rules": rules, "calibration": calibration, "p": p, "y": s["y"]}


def print_seed(r: dict) -> None:
    n, half = r["n"], r["half"]
    print(f"\nseed {r['seed']}: {r['cold']} messages predicted before both classes were known are left out; "
          f"{n} scored: replay (tuning) = first {half}, test = last {n - half}")
    rows = [[name, fmt(m["low"], ".4g"), fmt(m["high"], ".4g"), fmt(m["cost"], ".4f"),
             fmt(m["unsure_rate"], ".2%"), str(m["fp"]), str(m["fn"]), str(m["unsure"])]
            for name, m in r["rules"].items()]
    print_table(f"seed {r['seed']}: decisions on the test half ({n - half} messages)",
                ["rule", "low", "high", "cost/msg", "unsure", "FP", "FN", "#unsure"], rows)
    for kind, c in r["tuned"].items():
        print(f"  tuned on the replay ({kind}): cutoffs ({c.low:.4g}, {c.high:.4g}), "
              f"replay cost {c.cost:.4f}, unsure {c.unsure_rate:.2%}")
    rows = [[name, fmt(m["log_loss"], ".4f"), fmt(m["ece_spam"], ".4f"), fmt(m["ece_top"], ".4f"),
             fmt(m["accuracy"], ".4f")] for name, m in r["calibration"].items()]
    print_table(f"seed {r['seed']}: calibration (final alpha {r['alpha']:.4f})",
                ["events", "log loss", "ECE P(spam)", "ECE top", "accuracy"], rows)


def print_summary(runs: list[dict]) -> None:
    def stats(values: list[float], spec: str) -> list[str]:
        return [fmt(float(np.mean(values)), spec), f"{fmt(min(values), spec)}–{fmt(max(values), spec)}"]

    rows = [[name, *stats([r["rules"][name]["cost"] for r in runs], ".4f"),
             *stats([r["rules"][name]["unsure_rate"] for r in runs], ".2%"),
             fmt(float(np.mean([r["rules"][name]["fp"] for r in runs])), ".1f"),
             fmt(float(np.mean([r["rules"][name]["fn"] for r in runs])), ".1f")] for name in runs[0]["rules"]]
    print_table(f"Test half, {len(runs)} seeds: mean cost per message and unsure rate (mean, min–max)",
                ["rule", "cost/msg", "range", "unsure", "range", "FP", "FN"], rows)
    rows = [[name, *[cell for key in ("log_loss", "ece_spam", "ece_top")
                     for cell in stats([r["calibration"][name][key] for r in runs], ".4f")]]
            for name in runs[0]["calibration"]]
    alphas = ", ".join(f"{r['alpha']:.3f}" for r in runs)
    print_table(f"Calibration, {len(runs)} seeds (mean, min–max); final alpha per seed: {alphas}",
                ["events", "log loss", "range", "ECE P(spam)", "range", "ECE top", "range"], rows)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0, help="first shuffle seed (default 0)")
    ap.add_argument("--seeds", type=int, default=5, help="number of shuffles summarised (default 5)")
    ap.add_argument("--batch-size", type=int, default=64, help="prequential mini-batch (default 64)")
    ap.add_argument("--fp", type=float, default=10.0, help="cost of ham marked spam (default 10)")
    ap.add_argument("--fn", type=float, default=1.0, help="cost of spam let through (default 1)")
    ap.add_argument("--unsure", type=float, default=0.5, help="cost of an unsure answer (default 0.5)")
    ap.add_argument("--half-life", type=float, default=None, help="calibrator half-life in events")
    ap.add_argument("--plot", default=None, help="write a reliability diagram PNG (first seed) here")
    args = ap.parse_args(argv)

    texts, labels = load_sms_spam()
    print(f"SMS Spam Collection: {len(texts)} messages; streambayes MultinomialNB, prequential mini-batches "
          f"of {args.batch_size}; calibrator half-life {args.half_life}")
    print(f"costs: false positive (ham marked spam) {args.fp:g}, false negative {args.fn:g}, unsure "
          f"{args.unsure:g}. Bayes: spam iff P(spam) > {args.fp / (args.fp + args.fn):.4f}; with reject, "
          f"unsure iff {args.unsure / args.fn:.4g} < P(spam) < {1 - args.unsure / args.fp:.4g}")
    runs = [run_seed(seed, texts, labels, args) for seed in range(args.seed, args.seed + args.seeds)]
    print_seed(runs[0])
    print()
    print_summary(runs)
    if args.plot:
        from streambayes.evaluate.calibration_plots import reliability_diagram

        r = runs[0]
        fig = reliability_diagram(before=(r["p"]["raw"], r["y"]), after=(r["p"]["cal"], r["y"]),
                                  xlabel="predicted P(spam)", title=f"SMS spam, MultinomialNB prequential, "
                                  f"seed {r['seed']} (alpha {r['alpha']:.3f})")
        fig.savefig(args.plot, dpi=110)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
