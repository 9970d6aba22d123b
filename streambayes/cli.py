"""The ``streambayes`` command (DESIGN §6): parses arguments, builds settings, calls runtime.

Exit status: 0 success; 2 bad usage or a missing input (one line on stderr, no traceback);
1 any other streambayes failure (one line). Each subcommand is a :class:`Command` in
:data:`COMMANDS`; later ones (learn, predict, produce, snapshot) slot in the same way.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from pydantic import ValidationError

from streambayes import __version__
from streambayes.config import Settings
from streambayes.errors import StreambayesError, UsageError

PROG = "streambayes"
PLANNED = ("learn", "predict", "produce", "snapshot")


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


def _model_list(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected NAME[,NAME...], got {text!r}")
    return names


def _add_replay_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="SOURCE", help="a JSONL, TSV or CSV file")
    p.add_argument("--model", type=_model_list, default=("nb",), metavar="NAME[,NAME...]",
                   help="models to evaluate side by side (default: nb)")
    p.add_argument("--format", choices=("jsonl", "tsv", "csv"),
                   help="input format (default: from the file name; no extension = tsv)")
    p.add_argument("--label-field", default="label", metavar="F",
                   help="label column/field (default: label)")
    p.add_argument("--text-field", metavar="F", help="text column/field")
    p.add_argument("--key-field", metavar="F", help="key column/field")
    p.add_argument("--limit", type=_count, metavar="N", help="stop after N records")
    p.add_argument("--batch-size", type=_positive_int, default=256, metavar="N",
                   help="mini-batch size: predict N events, then learn them (default: 256)")
    p.add_argument("--positive", metavar="LABEL",
                   help="positive class for ROC AUC (default: the larger of two labels)")
    p.add_argument("--dead-letter", type=Path, metavar="PATH",
                   help="JSONL file for bad records (default: DIR/dead_letters.jsonl with "
                        "--report, else ./streambayes-dead-letters.jsonl; written only if any)")
    p.add_argument("--report", type=Path, metavar="DIR",
                   help="write DIR/metrics.json and DIR/learning_curves.png")
    p.add_argument("--network", type=Path, metavar="FILE.bif",
                   help="Bayesian network for --model bn (its class variable is the label field)")


def _run_replay(args: argparse.Namespace, settings: Settings) -> int:
    from streambayes.runtime.replay import FileReplay, replay_file

    if "://" in args.source:
        raise UsageError(f"replay reads files only in this version, got {args.source!r}")
    job = FileReplay(
        path=Path(args.source), models=args.model, format=args.format,
        label_field=args.label_field, text_field=args.text_field, key_field=args.key_field,
        limit=args.limit, batch_size=args.batch_size, positive=args.positive,
        dead_letter=args.dead_letter, report=args.report, network=args.network)
    replay_file(job)
    return 0


def _run_demo(args: argparse.Namespace, settings: Settings) -> int:
    from streambayes.runtime.demo import run_demo

    run_demo(settings)
    return 0


COMMANDS: dict[str, Command] = {
    "demo": Command("replay SMS spam with three naive Bayes models and explain a few messages",
                    lambda p: None, _run_demo),
    "replay": Command("prequential (predict, then learn) evaluation of models on a file",
                      _add_replay_arguments, _run_replay),
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
        if argv and argv[0] in PLANNED:
            raise UsageError(f"'{argv[0]}' is not available in this version "
                             f"(commands: {', '.join(COMMANDS)})")
        args = build_parser().parse_args(argv)
        if args.command is None:
            raise UsageError(f"missing command (choose from {', '.join(COMMANDS)}); "
                             f"see '{PROG} --help'")
        return COMMANDS[args.command].run(args, _settings())
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else 0
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
