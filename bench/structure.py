"""Structure learning by hill climbing (BIC): streambayes next to pgmpy's HillClimbSearch, one run.

For each network, ``--rows`` rows are sampled once (forward sampling, ``--seed``); then, for
``--shuffles`` orders of the columns (the same rows, the variables listed in another order),
each contestant learns a DAG and is scored by the structural Hamming distance to the true DAG:
on the skeleton (an edge in one graph only) and directed (missing, extra and reversed edges).

  sb           ``hill_climb(codes, states, score="bic")``: ties by variable name, max in-degree 3
  sb+restarts  the same with ``restarts=3, perturb=6`` (seeded random moves, then climb again)
  pgmpy        ``HillClimbSearch(df).estimate(scoring_method="bic-d")`` (its defaults: tabu 100,
               no in-degree bound, epsilon 1e-4)

Networks: alarm and child from the shared data, and insurance from the BIF files that pgmpy's
wheel ships (a network the team did not use elsewhere). Prints, per network and contestant, the
median skeleton and directed SHD over the shuffles, their min-max spread and the median seconds.
Targets (issue 14): median skeleton SHD <= pgmpy's, spread <= 25% of it, >= 5x faster than pgmpy.

    python bench/structure.py                         # alarm, child, insurance; 5 shuffles
    python bench/structure.py --networks child --shuffles 2 --rows 5000
"""

from __future__ import annotations

import argparse
import gzip
import logging
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from _common import data_path, package_version, print_table

from streambayes.models.bayesnet import read_bif
from streambayes.models.bayesnet.sampling import forward_sample
from streambayes.models.bayesnet.search import hill_climb, structural_hamming_distance


def load_network(name: str):
    if name in ("alarm", "child", "asia", "sachs"):
        return read_bif(data_path("bif", f"{name}.bif"))
    import pgmpy

    packed = Path(pgmpy.__file__).parent / "utils" / "example_models" / f"{name}.bif.gz"
    with tempfile.NamedTemporaryFile("wb", suffix=".bif", delete=False) as tmp:
        tmp.write(gzip.decompress(packed.read_bytes()))
    return read_bif(Path(tmp.name))


def run_sb(codes, states, **kwargs):
    start = time.perf_counter()
    dag = hill_climb(codes, states, score="bic", **kwargs)
    return dag, time.perf_counter() - start


def run_pgmpy(codes, states):
    import pandas as pd
    from pgmpy.estimators import HillClimbSearch

    frame = pd.DataFrame({v: np.array(states[v], dtype=object)[codes[:, i]]
                          for i, v in enumerate(states)})
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dag = HillClimbSearch(frame).estimate(scoring_method="bic-d", show_progress=False)
    seconds = time.perf_counter() - start
    parents = {v: tuple(dag.get_parents(v)) if v in dag else () for v in states}
    return parents, seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--networks", default="alarm,child,insurance")
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--shuffles", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-pgmpy", action="store_true")
    args = p.parse_args(argv)
    logging.getLogger("pgmpy").setLevel(logging.ERROR)
    print(f"streambayes {package_version('streambayes')}, pgmpy {package_version('pgmpy')}; "
          f"{args.rows:,} rows, {args.shuffles} column orders")
    rows = []
    for name in args.networks.split(","):
        net = load_network(name)
        codes = forward_sample(net, args.rows, seed=args.seed)
        names = list(net.states)
        contestants = {"sb": lambda c, s: run_sb(c, s),
                       "sb+restarts": lambda c, s: run_sb(c, s, restarts=3, perturb=6, seed=1)}
        if not args.no_pgmpy:
            contestants["pgmpy"] = run_pgmpy
        results: dict[str, list] = {k: [] for k in contestants}
        for shuffle in range(args.shuffles):
            perm = np.random.default_rng(100 + shuffle).permutation(len(names)) if shuffle else \
                np.arange(len(names))
            states = {names[i]: net.states[names[i]] for i in perm}
            columns = codes[:, perm]
            for label, run in contestants.items():
                dag, seconds = run(columns, states)
                results[label].append((structural_hamming_distance(dag, net.parents),
                                       structural_hamming_distance(dag, net.parents, directed=True),
                                       seconds))
                print(f"  {name} shuffle {shuffle} {label}: SHD {results[label][-1][0]} "
                      f"({seconds:.1f} s)", file=sys.stderr)
        pg = statistics.median(s for *_, s in results["pgmpy"]) if "pgmpy" in results else None
        pg_shd = statistics.median(r[0] for r in results["pgmpy"]) if "pgmpy" in results else None
        for label, res in results.items():
            skel = [r[0] for r in res]
            directed = [r[1] for r in res]
            secs = statistics.median(r[2] for r in res)
            med = statistics.median(skel)
            rows.append([name, label, f"{med:g}", f"{min(skel)}-{max(skel)}",
                         f"{(max(skel) - min(skel)) / med:.0%}" if med else "0%",
                         f"{statistics.median(directed):g}", f"{secs:.2f}",
                         f"{pg / secs:.1f}x" if pg and label != "pgmpy" else "",
                         ("PASS" if med <= pg_shd else "MISS") if pg_shd is not None and label != "pgmpy"
                         else ""])
    print_table("hill climbing (BIC): structural Hamming distance to the true DAG",
                ["network", "contestant", "skeleton SHD", "min-max", "spread", "directed SHD",
                 "seconds", "speed vs pgmpy", "SHD <= pgmpy"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
