"""The ``streambayes`` command (DESIGN §6): parses arguments, builds settings, calls runtime.

Exit status: 0 success; 2 bad usage or a missing input (one line on stderr, no traceback);
1 any other streambayes failure (one line). Each subcommand is a :class:`Command` in
:data:`COMMANDS`. ``learn`` and ``predict`` stop cleanly on SIGTERM or SIGINT (a final snapshot
for ``learn``) and exit 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError

from streambayes import __version__
from streambayes.config import Settings
from streambayes.errors import StreambayesError, UsageError

PROG = "streambayes"
# replay's largest mini-batch: small, so prequential scores stay close to per-event ones on streams
# that change (enron1-3: 0.9828 at 8, 0.9798 at 256); = runtime.loops.replay.DEFAULT_BATCH_SIZE
REPLAY_BATCH_SIZE = 8


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors raise :class:`UsageError` (one line, exit 2)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: error: {message}")


@dataclass(frozen=True)
class Command:
    """A subcommand: its help line, how it adds its arguments, and what it runs."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Settings], int]


def _positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _count(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _partition_list(text: str) -> tuple[int, ...]:
    try:
        parts = tuple(int(p) for p in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected partitions like 0,1,2, got {text!r}") from None
    if any(p < 0 for p in parts) or len(set(parts)) != len(parts):
        raise argparse.ArgumentTypeError(f"expected distinct partitions >= 0, got {text!r}")
    return parts


def _dir_list(text: str) -> tuple[Path, ...]:
    dirs = tuple(Path(d.strip()) for d in text.split(",") if d.strip())
    if not dirs:
        raise argparse.ArgumentTypeError(f"expected DIR[,DIR...], got {text!r}")
    return dirs


def _loss_mapping(text: str) -> dict:
    """``--loss``: a JSON object ``{"decided": {"truth": cost}}``, inline or in a file."""
    source = text
    path = Path(text)
    if not text.lstrip().startswith("{") and path.is_file():
        source = path.read_text(encoding="utf-8")
    try:
        mapping = json.loads(source)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"expected a JSON object or a JSON file, got {text!r} "
                                         f"({exc.msg})") from None
    if not isinstance(mapping, dict) or not all(isinstance(v, dict) for v in mapping.values()):
        raise argparse.ArgumentTypeError('expected {"decided class": {"true class": cost, ...}, ...}')
    return mapping


def _loss_matrix(args: argparse.Namespace, settings: Settings):
    """The LossMatrix of ``--loss``/``--reject``, else of ``STREAMBAYES_LOSS``/``_REJECT`` (or None)."""
    from streambayes.decide import LossMatrix
    from streambayes.errors import ModelError

    loss = args.loss if args.loss is not None else settings.loss
    reject = args.reject if args.reject is not None else settings.reject
    if loss is None and reject is None:
        return None
    if loss is None:
        raise UsageError("--reject needs --loss (the costs of the decisions it is weighed against)")
    try:
        return LossMatrix.from_mapping(loss, reject=reject)
    except ModelError as exc:
        raise UsageError(f"--loss: {exc}") from None


def _add_decision_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--loss", type=_loss_mapping, metavar="JSON|FILE",
                   help='loss matrix {"decided": {"truth": cost}} (missing: 0 on the diagonal, '
                        '1 off it); decisions minimise the expected cost')
    p.add_argument("--reject", type=float, metavar="COST",
                   help="cost of answering 'unsure' (the reject option; needs --loss)")


def _megabytes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of MiB, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of MiB, got {text!r}")
    return value


def _add_per_key_bounds(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-resident", type=_positive_int, metavar="N",
                   help="per-key: live models at most (least recently used spill to disk and come "
                        "back on demand; default: STREAMBAYES_MAX_RESIDENT, 10000)")
    p.add_argument("--max-resident-mb", type=_megabytes, metavar="M",
                   help="per-key: MiB of live models at most (default: STREAMBAYES_MAX_RESIDENT_MB, "
                        "1024)")


def _per_key_bounds(args: argparse.Namespace, settings: Settings) -> dict[str, int]:
    """``--max-resident``/``--max-resident-mb`` over the settings, and ``STREAMBAYES_MAX_KEYS``."""
    count = args.max_resident if args.max_resident is not None else settings.max_resident
    mib = args.max_resident_mb if args.max_resident_mb is not None else settings.max_resident_mb
    return {"max_resident": count, "max_resident_bytes": max(1, int(mib * 2**20)),
            "max_keys": settings.max_keys}


def _model_list(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected NAME[,NAME...], got {text!r}")
    return names


def _add_record_arguments(p: argparse.ArgumentParser, label: bool = True) -> None:
    p.add_argument("--format", choices=("jsonl", "tsv", "csv"),
                   help="record format (default: from the file name; jsonl for Kafka)")
    if label:
        p.add_argument("--label-field", default="label", metavar="F",
                       help="label column/field (default: label)")
    p.add_argument("--text-field", metavar="F", help="text column/field")
    p.add_argument("--key-field", metavar="F", help="key column/field")


def _add_learn_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", required=True, metavar="URI",
                   help="labelled events: a JSONL/TSV/CSV file or kafka://HOST:PORT/TOPIC")
    p.add_argument("--snapshots", required=True, type=Path, metavar="DIR",
                   help="snapshot directory (restored on start, written every N events / T s)")
    p.add_argument("--model", metavar="NAME",
                   help="model to learn (default: the snapshot's, else nb)")
    p.add_argument("--every", type=_positive_int, default=10_000, metavar="N",
                   help="snapshot every N records (default: 10000)")
    p.add_argument("--every-seconds", type=_seconds, default=60.0, metavar="T",
                   help="and at least every T seconds while records arrive (default: 60)")
    p.add_argument("--dead-letter", metavar="URI",
                   help="bad records: a JSONL file or kafka://HOST:PORT/TOPIC (default: logged)")
    p.add_argument("--partitions", type=_partition_list, metavar="0,1,...",
                   help="Kafka partitions this learner owns (default: all; scale-out shards)")
    p.add_argument("--batch-size", type=_positive_int, default=1000, metavar="N",
                   help="records per mini-batch (default: 1000)")
    p.add_argument("--follow", action="store_true", help="with a file: wait for appended lines")
    p.add_argument("--keep", type=_positive_int, default=5, metavar="K",
                   help="snapshots kept (default: 5)")
    p.add_argument("--network", type=Path, metavar="FILE.bif", help="Bayesian network for bn")
    p.add_argument("--per-key", action="store_true",
                   help="one model per event key (user), backed off to a global model")
    p.add_argument("--new-source", action="store_true",
                   help="continue a snapshot learned from another source (default: refuse)")
    p.add_argument("--no-calibration", action="store_true",
                   help="do not fit the calibration exponent the predictor serves with")
    _add_per_key_bounds(p)
    _add_bound_arguments(p)
    _add_record_arguments(p)


def _add_predict_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", required=True, metavar="URI",
                   help="unlabelled events: a JSONL/TSV/CSV file or kafka://HOST:PORT/TOPIC")
    p.add_argument("--sink", required=True, metavar="URI",
                   help="posteriors: a JSONL file or kafka://HOST:PORT/TOPIC")
    p.add_argument("--snapshots", required=True, type=_dir_list, metavar="DIR[,DIR...]",
                   help="snapshot directory; several shards are merged")
    p.add_argument("--dead-letter", metavar="URI", help="bad records: a JSONL file or Kafka topic")
    p.add_argument("--batch-size", type=_positive_int, default=500, metavar="N",
                   help="events per micro-batch (default: 500)")
    p.add_argument("--clues", type=_count, default=5, metavar="K",
                   help="top-K features per posterior (default: 5; 0: none)")
    p.add_argument("--reload-seconds", type=_seconds, default=1.0, metavar="T",
                   help="look for a newer snapshot every T seconds (default: 1)")
    p.add_argument("--follow", action="store_true", help="with a file: wait for appended lines")
    p.add_argument("--raw", action="store_true",
                   help="serve the model's raw posteriors, not the snapshot's calibrated ones")
    _add_decision_arguments(p)
    p.add_argument("--per-key", action="store_true",
                   help="the snapshots must hold a per-key model (learned with 'learn --per-key')")
    _add_per_key_bounds(p)
    _add_record_arguments(p)


def _add_produce_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, metavar="FILE", help="a JSONL, TSV or CSV file")
    p.add_argument("--to", required=True, metavar="URI", help="kafka://HOST:PORT/TOPIC (or a file)")
    p.add_argument("--limit", type=_count, metavar="N", help="send the first N records only")
    p.add_argument("--partitions", type=_positive_int, metavar="N",
                   help="create the topic with N partitions if it does not exist")
    p.add_argument("--no-label", action="store_true",
                   help="drop labels (an unlabelled stream for predict)")
    _add_record_arguments(p)


def _add_snapshot_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = sub.add_parser("ls", help="list the snapshots of a directory")
    ls.add_argument("dir", type=Path, metavar="DIR")
    show = sub.add_parser("show", help="print the newest good snapshot's header as JSON")
    show.add_argument("dir", type=Path, metavar="DIR")
    show.add_argument("--id", metavar="ID", help="a given snapshot instead of the newest")
    merge = sub.add_parser("merge", help="merge the newest snapshots of shard directories")
    merge.add_argument("dirs", type=Path, nargs="+", metavar="DIR")
    merge.add_argument("--to", required=True, type=Path, metavar="DIR",
                       help="directory to write the merged snapshot to")


def _add_bound_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-classes", type=_positive_int, metavar="N",
                   help="classes per model (default: STREAMBAYES_MAX_CLASSES, else 1000); an event "
                        "with one more label is a dead letter 'limit'")
    p.add_argument("--max-fields", type=_positive_int, metavar="N",
                   help="categorical + numeric field names per model (default: "
                        "STREAMBAYES_MAX_FIELDS, else 10000; 100 for aode/spode/tan/kdb); past "
                        "it: dead letter 'limit'")
    p.add_argument("--max-values", type=_positive_int, metavar="N",
                   help="values per categorical field (default: STREAMBAYES_MAX_VALUES, else "
                        "100000; 1000 for aode/spode/tan/kdb); past it: dead letter 'limit'")


def _bounds(args: argparse.Namespace, settings: Settings) -> dict[str, int]:
    """The bounds set on the command line, else in the settings (unset: the model's default)."""
    out = {}
    for name in ("max_classes", "max_fields", "max_values"):
        value = getattr(args, name, None)
        value = value if value is not None else getattr(settings, name)
        if value is not None:
            out[name] = value
    return out


def _add_replay_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="SOURCE",
                   help="a JSONL, TSV or CSV file, or kafka://HOST:PORT/TOPIC?from=...&to=...")
    p.add_argument("--model", type=_model_list, default=("nb",), metavar="NAME[,NAME...]",
                   help="models to evaluate side by side (default: nb)")
    p.add_argument("--format", choices=("jsonl", "tsv", "csv"),
                   help="input format (default: from the file name; no extension = tsv)")
    p.add_argument("--label-field", default="label", metavar="F",
                   help="label column/field (default: label)")
    p.add_argument("--text-field", metavar="F", help="text column/field")
    p.add_argument("--key-field", metavar="F", help="key column/field")
    p.add_argument("--limit", type=_count, metavar="N", help="stop after N records")
    p.add_argument("--batch-size", type=_positive_int, default=REPLAY_BATCH_SIZE, metavar="N",
                   help="largest mini-batch: predict N events, then learn them; batches grow 1, 2, 4, ... up "
                        f"to N (default: {REPLAY_BATCH_SIZE}: close to per-event scores; larger is faster)")
    p.add_argument("--positive", metavar="LABEL",
                   help="positive class for ROC AUC (default: the larger of two labels)")
    p.add_argument("--dead-letter", type=Path, metavar="PATH",
                   help="JSONL file for bad records (default: DIR/dead_letters.jsonl with "
                        "--report, else ./streambayes-dead-letters.jsonl; written only if any)")
    p.add_argument("--report", type=Path, metavar="DIR",
                   help="write DIR/metrics.json and DIR/learning_curves.png")
    p.add_argument("--network", type=Path, metavar="FILE.bif",
                   help="Bayesian network for --model bn (its class variable is the label field)")
    _add_decision_arguments(p)
    p.add_argument("--per-key", action="store_true",
                   help="one model per event key (user), backed off to a global model; reports "
                        "precision of each key's top 10%% and NDCG")
    p.add_argument("--label-delay", type=_count, metavar="N",
                   help="labels arrive N events after their event (as spam reports do); adds "
                        "sliding-window and fading accuracy and ADWIN drift points")
    _add_per_key_bounds(p)
    _add_bound_arguments(p)


def _run_replay(args: argparse.Namespace, settings: Settings) -> int:
    from streambayes.runtime.loops.replay import FileReplay, replay_file
    from streambayes.runtime.records.uri import parse_uri

    source = parse_uri(args.source)  # a file path, or a Kafka range checked here
    job = FileReplay(
        path=source if isinstance(source, Path) else args.source, models=args.model,
        format=args.format,
        label_field=args.label_field, text_field=args.text_field, key_field=args.key_field,
        limit=args.limit, batch_size=args.batch_size, positive=args.positive,
        dead_letter=args.dead_letter, report=args.report, network=args.network,
        loss=_loss_matrix(args, settings), per_key=args.per_key,
        label_delay=args.label_delay, **_per_key_bounds(args, settings),
        bounds=_bounds(args, settings))
    replay_file(job, settings=settings)
    return 0


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT (the loops finish their batch, snapshot and exit 0)."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, frame: object) -> None:
        logging.getLogger(PROG).info("signal %d: stopping after this batch", signum)
        stop.set()

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


class _Stopped(Exception):
    """SIGTERM/SIGINT arrived while the broker was still being waited for: nothing to save."""


@contextlib.contextmanager
def _stopped_quietly(stop: threading.Event) -> Iterator[None]:
    """A stop request during the wait for the broker ends the command with status 0."""
    from streambayes.errors import NetworkUnavailable

    try:
        yield
    except NetworkUnavailable:
        if not stop.is_set():
            raise
        print("stopped before the broker answered; nothing to save")
        raise _Stopped from None


def _logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("kafka", "confluent_kafka"):
        logging.getLogger(noisy).setLevel(logging.ERROR)


def _run_learn(args: argparse.Namespace, settings: Settings) -> int:
    from streambayes.runtime.loops.learn import LearnJob, run_learn

    job = LearnJob(source=args.source, snapshots=args.snapshots, model=args.model, every=args.every,
                   every_seconds=args.every_seconds, dead_letter=args.dead_letter,
                   partitions=args.partitions, format=args.format, label_field=args.label_field,
                   text_field=args.text_field, key_field=args.key_field, batch_size=args.batch_size,
                   follow=args.follow, network=args.network, keep=args.keep,
                   new_source=args.new_source, per_key=args.per_key,
                   calibrate=not args.no_calibration,
                   **_per_key_bounds(args, settings), bounds=_bounds(args, settings))
    _logging()
    with _stop_on_signals() as stop, _stopped_quietly(stop):
        stats = run_learn(job, settings, stop)
    last = stats.snapshots[-1].id if stats.snapshots else stats.restored
    dead = sum(stats.dead_letters.values())
    print(f"learned {stats.events} events from {stats.records} records ({dead} dead letters) "
          f"in {stats.seconds:.2f} s; snapshot {last} in {args.snapshots}")
    return 0


def _run_predict(args: argparse.Namespace, settings: Settings) -> int:
    from streambayes.runtime.loops.predict import PredictJob, run_predict

    job = PredictJob(source=args.source, sink=args.sink, snapshots=args.snapshots,
                     dead_letter=args.dead_letter, format=args.format,
                     label_field=args.label_field, text_field=args.text_field,
                     key_field=args.key_field, batch_size=args.batch_size, clues=args.clues,
                     follow=args.follow, reload_seconds=args.reload_seconds,
                     loss=_loss_matrix(args, settings), calibrated=not args.raw,
                     per_key=args.per_key, **_per_key_bounds(args, settings))
    _logging()
    with _stop_on_signals() as stop, _stopped_quietly(stop):
        stats = run_predict(job, settings, stop)
    dead = sum(stats.dead_letters.values())
    print(f"published {stats.posteriors} posteriors for {stats.records} records ({dead} dead "
          f"letters) in {stats.seconds:.2f} s; snapshot {stats.snapshot}")
    return 0


def _run_produce(args: argparse.Namespace, settings: Settings) -> int:
    from streambayes.runtime.loops.produce import ProduceJob, produce_file

    job = ProduceJob(path=args.file, to=args.to, format=args.format, label_field=args.label_field,
                     text_field=args.text_field, key_field=args.key_field,
                     drop_label=args.no_label, limit=args.limit, partitions=args.partitions)
    with _stop_on_signals() as stop:
        sent = produce_file(job, settings, stop)
    print(f"produced {sent} records to {args.to}")
    return 0


def _merged_config(dirs: list, merged: Any) -> dict:
    """The config of a merged snapshot: where it came from, and the shards' calibration added."""
    from streambayes.runtime.loops.calibrate import CONFIG_KEY, to_config

    config: dict = {"merged_from": [f"{d}:{i}" for d, i in zip(dirs, merged.ids, strict=True)]}
    if merged.calibration is not None:
        config[CONFIG_KEY] = to_config(merged.calibration)
    return config


def _run_snapshot(args: argparse.Namespace, settings: Settings) -> int:
    from functools import partial

    from streambayes.runtime.loops.shards import latest_all, merge_snapshots, open_stores, store_options
    from streambayes.runtime.loops.spill import check_build, restore_model
    from streambayes.snapshot.store import summarize

    if args.action == "merge":
        snaps = latest_all(open_stores(args.dirs, settings))
        if snaps is None:
            raise UsageError("every shard directory needs a snapshot to merge")
        merged = merge_snapshots(snaps, partial(restore_model, **store_options(settings)))
        (store,) = open_stores([args.to], settings)
        info = store.write(merged.model.to_state(), model=merged.name, positions=merged.positions,
                           events=merged.events,
                           config=_merged_config(args.dirs, merged))
        print(f"merged {len(snaps)} snapshots ({merged.events} events) into {args.to} as {info.id}")
        return 0
    if not args.dir.is_dir():
        raise UsageError(f"no snapshot directory {args.dir}")
    (store,) = open_stores([args.dir], settings)
    if args.action == "ls":
        for info in store.list(check_build):
            state = "ok" if info.ok else f"CORRUPT ({info.error})"
            print(f"{info.id}  {info.created_at or '-':<32}  {info.model or '-':<6}  "
                  f"{info.events if info.events is not None else '-':>10}  {info.size:>10}  {state}")
        return 0
    header = (store.load(args.id, check_build).header if args.id
              else store.latest_header(check_build))
    if header is None:
        raise UsageError(f"{args.dir} holds no snapshot")
    print(json.dumps(summarize(header), indent=2, ensure_ascii=False))
    return 0


def _run_demo(args: argparse.Namespace, settings: Settings) -> int:
    from streambayes.runtime.demo import run_demo

    run_demo(settings)
    return 0


COMMANDS: dict[str, Command] = {
    "demo": Command("replay SMS spam with three naive Bayes models and explain a few messages",
                    lambda p: None, _run_demo),
    "replay": Command("prequential (predict, then learn) evaluation of models on a file or topic",
                      _add_replay_arguments, _run_replay),
    "learn": Command("learn from labelled events (file or Kafka) with exactly-once snapshots",
                     _add_learn_arguments, _run_learn),
    "predict": Command("publish a posterior for every unlabelled event, from the newest snapshot",
                       _add_predict_arguments, _run_predict),
    "produce": Command("load a JSONL, TSV or CSV file into a Kafka topic, keyed",
                       _add_produce_arguments, _run_produce),
    "snapshot": Command("list, show or merge snapshots (ls DIR | show DIR | merge DIR... --to DIR)",
                        _add_snapshot_arguments, _run_snapshot),
}


def build_parser() -> argparse.ArgumentParser:
    """The ``streambayes`` argument parser with one subparser per :data:`COMMANDS` entry."""
    parser = _Parser(prog=PROG, description="Incremental Bayesian classifiers on event streams.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.add_arguments(sub.add_parser(name, help=command.help, description=command.help))
    return parser


def _settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        var = "STREAMBAYES_" + "_".join(str(p) for p in first["loc"]).upper()
        raise UsageError(f"bad environment variable {var}: {first['msg']}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``streambayes`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            raise UsageError(f"missing command (choose from {', '.join(COMMANDS)}); "
                             f"see '{PROG} --help'")
        return COMMANDS[args.command].run(args, _settings())
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else 0
    except _Stopped:
        return 0
    except UsageError as exc:
        _fail(exc, prefix=PROG)
        return 2
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
        _fail(exc, prefix=PROG)
        return 2
    except (StreambayesError, OSError) as exc:
        _fail(exc, prefix=PROG)
        return 1
    except KeyboardInterrupt:
        return 130


def _fail(exc: BaseException, prefix: str) -> None:
    message = _one_line(exc)
    if not message.startswith(prefix):
        message = f"{prefix}: error: {message}"
    print(message, file=sys.stderr)
