"""Weka's Bayesian classifiers on the same folds as the streambayes contestants.

The shuffled rows of a set are written once as ARFF (all attributes nominal, ``?`` for a missing
cell, the class last), and one JVM runs every Weka classifier on the given contiguous folds
(train on the other folds, test on the fold; :func:`weka_folds`): a small Java driver compiled
with ``javac`` into a cache directory the first time. Weka is looked up at ``$WEKA_JAR`` or
``/usr/share/java/weka.jar`` (Debian's ``weka`` package); :func:`available` says why not when it
is absent, and the bench then prints the streambayes rows alone.

The classifiers (Weka 3.6 defaults unless named):

  weka NB     weka.classifiers.bayes.NaiveBayes
  weka AODE   weka.classifiers.bayes.AODE (frequency limit 1)
  weka TAN    BayesNet -D, search local.TAN (BAYES score), SimpleEstimator alpha 0.5
  weka K2     BayesNet -D, search local.K2 (at most 1 parent besides the class), alpha 0.5

BayesNet replaces a missing nominal cell by the training mode (its ReplaceMissingValues filter),
for learning and for prediction.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

WEKA = {
    "weka NB": "weka.classifiers.bayes.NaiveBayes",
    "weka AODE": "weka.classifiers.bayes.AODE",
    "weka TAN": "weka.classifiers.bayes.BayesNet -D -Q weka.classifiers.bayes.net.search.local.TAN "
                "-- -S BAYES -E weka.classifiers.bayes.net.estimate.SimpleEstimator -- -A 0.5",
    "weka K2": "weka.classifiers.bayes.BayesNet -D -Q weka.classifiers.bayes.net.search.local.K2 "
               "-- -P 1 -S BAYES -E weka.classifiers.bayes.net.estimate.SimpleEstimator -- -A 0.5",
}

_DRIVER = r"""
import weka.classifiers.Classifier;
import weka.classifiers.Evaluation;
import weka.core.Instances;
import weka.core.Utils;
import java.io.*;

public class WekaFolds {
  // args: data.arff, fold bounds "0,130,260,...", then classifier specs (class name + options)
  public static void main(String[] args) throws Exception {
    Instances data = new Instances(new BufferedReader(new FileReader(args[0])));
    data.setClassIndex(data.numAttributes() - 1);
    String[] b = args[1].split(",");
    for (int c = 2; c < args.length; c++) {
      String[] opts = Utils.splitOptions(args[c]);
      String name = opts[0];
      opts[0] = "";
      for (int k = 0; k + 1 < b.length; k++) {
        int lo = Integer.parseInt(b[k]), hi = Integer.parseInt(b[k + 1]);
        Instances train = new Instances(data, 0), test = new Instances(data, 0);
        for (int i = 0; i < data.numInstances(); i++)
          (i >= lo && i < hi ? test : train).add(data.instance(i));
        Classifier model = Classifier.forName(name, opts.clone());
        model.buildClassifier(train);
        Evaluation ev = new Evaluation(train);
        ev.evaluateModel(model, test);
        System.out.println((c - 2) + " " + k + " " + ev.errorRate());
      }
    }
  }
}
"""


def jar() -> Path:
    return Path(os.environ.get("WEKA_JAR", "/usr/share/java/weka.jar"))


def available() -> str | None:
    """None when Weka can run here, else why not."""
    if not jar().is_file():
        return f"Weka not found at {jar()} (apt-get install weka, or set WEKA_JAR)"
    if not shutil.which("java") or not shutil.which("javac"):
        return "Weka needs java and javac on PATH"
    return None


def _driver() -> Path:
    """The compiled driver's directory (compiled once per user)."""
    out = Path(tempfile.gettempdir()) / f"streambayes-weka-{os.getuid()}"
    if not (out / "WekaFolds.class").exists():
        out.mkdir(exist_ok=True)
        (out / "WekaFolds.java").write_text(_DRIVER, encoding="utf-8")
        subprocess.run(["javac", "-nowarn", "-cp", str(jar()), "-d", str(out), str(out / "WekaFolds.java")],
                       check=True, capture_output=True, text=True)
    return out


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_arff(path: Path, xs: list[dict], ys: list) -> None:
    """Nominal ARFF of the rows in order; values declared in order of appearance."""
    names = list(xs[0])
    domains = {a: list(dict.fromkeys(x[a] for x in xs if x[a] is not None)) for a in names}
    lines = ["@relation streambayes", ""]
    for i, a in enumerate(names):
        lines.append(f"@attribute a{i} {{{','.join(_quote(str(v)) for v in domains[a]) or _quote('none')}}}")
    lines.append(f"@attribute class {{{','.join(_quote(str(c)) for c in dict.fromkeys(ys))}}}")
    lines += ["", "@data"]
    for x, y in zip(xs, ys, strict=True):
        cells = ["?" if x[a] is None else _quote(str(x[a])) for a in names]
        lines.append(",".join([*cells, _quote(str(y))]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def weka_folds(xs: list[dict], ys: list, folds: list, classifiers: dict = WEKA) -> dict:
    """{name: {"cv_error", "fold_errors"}} of each Weka classifier on the contiguous ``folds``
    (index arrays in row order, as ``np.array_split`` gives them)."""
    bounds = [0]
    for f in folds:
        if len(f) and (int(f[0]) != bounds[-1] or int(f[-1]) != bounds[-1] + len(f) - 1):
            raise ValueError("weka_folds needs contiguous folds in row order")
        bounds.append(bounds[-1] + len(f))
    with tempfile.TemporaryDirectory() as tmp:
        arff = Path(tmp) / "data.arff"
        write_arff(arff, xs, ys)
        cp = f"{jar()}{os.pathsep}{_driver()}"
        run = subprocess.run(["java", "-Xmx1g", "-cp", cp, "WekaFolds", str(arff),
                              ",".join(map(str, bounds)), *classifiers.values()],
                             capture_output=True, text=True, timeout=3600)
    if run.returncode:
        raise RuntimeError(f"Weka failed: {run.stderr.strip().splitlines()[-1:]}")
    names = list(classifiers)
    errors: dict[str, list[float]] = {n: [] for n in names}
    for line in run.stdout.split("\n"):
        parts = line.split()
        if len(parts) == 3:
            errors[names[int(parts[0])]].append(float(parts[2]))
    return {n: {"cv_error": sum(e) / len(e), "fold_errors": e} for n, e in errors.items() if e}


# -- Weka's own example sets (Debian's weka package) ----------------------------------------
EXAMPLES = Path("/usr/share/doc/weka/examples")
NOMINAL_EXAMPLES = ("soybean", "breast-cancer")  # all-nominal UCI sets Weka ships, with missing cells


def load_arff(path: Path) -> tuple[list[dict], list[str]]:
    """A nominal ARFF file as (xs, ys): the last attribute is the class, ``?`` is None."""
    import csv

    names, rows = [], []
    with Path(path).open(encoding="utf-8", errors="replace") as fh:
        lines = (line.strip() for line in fh)
        for line in lines:
            if line.lower().startswith("@attribute"):
                names.append(line.split(None, 2)[1].strip("'\""))
            elif line.lower().startswith("@data"):
                break
        data = [line for line in lines if line and not line.startswith("%")]
    for cells in csv.reader(data, quotechar="'", skipinitialspace=True):
        if len(cells) != len(names):
            raise ValueError(f"{path}: a row has {len(cells)} cells for {len(names)} attributes")
        rows.append(cells)
    xs = [{a: (None if v == "?" else v) for a, v in zip(names[:-1], r[:-1], strict=True)} for r in rows]
    return xs, [r[-1] for r in rows]


# -- reporting (bench/seminaive.py) ---------------------------------------------------------
TAN_SLACK = 0.005  # target: streambayes TAN <= Weka TAN + this, on every set


def weka_targets(results: dict, names: list[str]) -> list[dict]:
    """Print and return the Weka targets per set: the best streambayes learner's cv error <= the
    best Weka classifier's, and streambayes ``tan`` <= Weka TAN + :data:`TAN_SLACK`."""
    out = []
    for ds, res in results.items():
        weka = {n: r["cv_error"] for n, r in res.get("weka", {}).items() if "cv_error" in r}
        ours = {n: res["models"][n].get("cv_error") for n in names}
        ours = {n: e for n, e in ours.items() if e is not None}
        if not weka or not ours:
            continue
        (bw, ew), (bo, eo) = min(weka.items(), key=lambda t: t[1]), min(ours.items(), key=lambda t: t[1])
        verdict = "PASS" if eo <= ew + 1e-12 else "MISS"
        print(f"  {verdict:4s}  best streambayes <= best Weka on {ds:13s}  {bo} {eo:.4f} vs {bw} {ew:.4f}")
        out.append({"dataset": ds, "kind": "best_vs_weka", "ours": [bo, eo], "weka": [bw, ew],
                    "result": verdict})
        if "tan" in ours and "weka TAN" in weka:
            e, w = ours["tan"], weka["weka TAN"]
            verdict = "PASS" if e <= w + TAN_SLACK + 1e-12 else "MISS"
            print(f"  {verdict:4s}  tan <= Weka TAN + {TAN_SLACK} on {ds:13s}  {e:.4f} vs {w:.4f}")
            out.append({"dataset": ds, "kind": "tan_vs_weka", "ours": e, "weka": w, "result": verdict})
    return out
