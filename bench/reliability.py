"""Reliability figures of issue 10, one part per kind of trouble; prints tables, asserts nothing.

Parts (``--parts``, comma-separated; default all):

  kills   for each of ``nb`` (SMS Spam Collection, text), ``aode`` (UCI nursery, categorical) and
          ``bn`` with online EM (asia classifying ``lung``, 10% of the other cells missing),
          events are produced to a fresh topic on the local broker at a steady pace while
          ``streambayes learn`` consumes them as a subprocess; whenever its snapshots show
          progress it is killed with SIGKILL at a random moment (up to 0.6 s later) and
          restarted, ``--kills`` times; production stops once every kill has happened and the
          learner catches up. The final snapshot is compared, array by array, with one
          uninterrupted ``streambayes learn`` of the same events from a JSONL file (other batch
          limits than the Kafka polls). Columns: events produced, kills, identical (every array
          ``np.array_equal``, every scalar equal), the largest absolute difference of any array,
          the first difference, and the wall seconds of the killed run (kills, restarts, catch-up).
          Machinery: ``streambayes.devtools.kills``; the CI version is
          ``tests/integration/test_crash.py`` (3 kills each).

Adding a part: write ``part_<name>(args, env) -> None`` (print its own table; ``env.bootstrap()``
starts the broker once, on first use) and register it in ``PARTS``.

    .venv/bin/python bench/reliability.py --parts kills --kills 20        # ~9 minutes on 2 busy cores
    .venv/bin/python bench/reliability.py --parts kills --kills 3 --models bn
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import data_dir, print_table

from streambayes.devtools.broker import broker_info
from streambayes.devtools.kills import CASES, crash_case, learn_file, learn_with_kills, state_difference
from streambayes.runtime.kafka import kafka_python


class Env:
    """What the parts share: a scratch directory and one local broker started on first use."""

    def __init__(self, stack: contextlib.ExitStack, workdir: Path) -> None:
        self._stack, self.workdir, self._bootstrap = stack, workdir, None
        self._topics = 0

    def bootstrap(self) -> str:
        if self._bootstrap is None:
            info = self._stack.enter_context(broker_info())
            print(f"broker: {info}", flush=True)
            self._bootstrap = info.bootstrap
        return self._bootstrap

    def new_topic(self, prefix: str, partitions: int = 1) -> str:
        self._topics += 1
        name = f"{prefix}-{self._topics}-{time.time_ns() % 1_000_000}"
        kafka_python.create_topic(self.bootstrap(), name, partitions)
        return name

    def scratch(self, name: str) -> Path:
        path = self.workdir / name
        path.mkdir(parents=True)
        return path


# -- part: kills ---------------------------------------------------------------------------------
KAFKA_OPTIONS = ["--every", "2000", "--every-seconds", "0.5", "--batch-size", "500"]


def _em_note(a: dict, b: dict) -> str:
    """For ``bn``: the largest CPT difference of the EM states and both step counts."""
    if not (isinstance(a.get("em"), dict) and isinstance(b.get("em"), dict)):
        return ""
    cpts = max((state_difference(a["em"][k], b["em"][k])[1] for k in a["em"] if k.startswith("cpts:")),
               default=0.0)
    return f"; EM CPTs {cpts:.3g}, n_steps {int(a['em']['n_steps'])} vs {int(b['em']['n_steps'])}"


def _kill_row(model: str, args: argparse.Namespace, env: Env, rng: random.Random) -> list[str]:
    make, options, rate = crash_case(model, data_dir())
    work = env.scratch(f"kills-{model}")
    run = learn_with_kills(env.bootstrap(), env.new_topic(f"kills-{model}"), make, [*options, *KAFKA_OPTIONS],
                           work, kills=args.kills, rng=rng, rate=args.rate or rate, minimum=args.min_events)
    reference = learn_file(run.events, options, work)
    crashed, uninterrupted = run.snapshot.state, reference.state
    first, diff, where = state_difference(crashed, uninterrupted)
    n = len(run.events)
    if not run.snapshot.events == reference.events == n:
        first = f"events {run.snapshot.events:,} / reference {reference.events:,} / produced {n:,}"
    mid = "" if all(0 < k < n for k in run.kills) else " (not all mid-stream)"
    print(f"{model}: kills at {run.kills} of {n:,} events; first difference: {first}", flush=True)
    detail = f" ({where.removeprefix('state.')}{_em_note(crashed, uninterrupted)})" if diff else ""
    return [model, f"{n:,}", f"{len(run.kills)}{mid}", "yes" if first is None else "no",
            f"{diff:.3g}{detail}", first or "", f"{run.seconds:.1f}"]


def part_kills(args: argparse.Namespace, env: Env) -> None:
    rng = random.Random(args.seed)
    rows = []
    for model in args.models.split(","):
        try:
            rows.append(_kill_row(model, args, env, rng))
        except Exception as exc:  # noqa: BLE001 (a figure, not a crash: say what failed and go on)
            rows.append([model, "", "", "error", "", f"{type(exc).__name__}: {exc}", ""])
    print_table(f"kill -9 on Kafka (seed {args.seed}): final state against an uninterrupted file run",
                ["model", "events", "kills", "identical", "max abs diff", "first difference", "seconds"],
                rows, plain=args.plain)


PARTS: dict[str, Callable[[argparse.Namespace, Env], None]] = {"kills": part_kills}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of: {', '.join(PARTS)}")
    ap.add_argument("--kills", type=int, default=20, help="kill -9 per model (part kills; default 20)")
    ap.add_argument("--models", default=",".join(CASES), help=f"part kills: of {', '.join(CASES)}")
    ap.add_argument("--min-events", type=int, default=5_000, help="part kills: produce at least this many")
    ap.add_argument("--rate", type=float,
                    help="part kills: events/s produced (default 3,000 for nb, 2,000 others)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--plain", action="store_true", help="plain-text tables")
    args = ap.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    unknown = [p for p in parts if p not in PARTS]
    if unknown or args.kills < 1:
        print(f"reliability.py: unknown part {unknown[0]!r} (parts: {', '.join(PARTS)})" if unknown
              else "reliability.py: --kills must be >= 1", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        env = Env(stack, Path(tmp))
        for part in parts:
            PARTS[part](args, env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
