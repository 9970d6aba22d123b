"""The ``streambayes`` command (DESIGN §6): parses arguments, builds settings, calls runtime.

Exit status: 0 success; 2 bad usage or a missing input (one line on stderr, no traceback);
1 any other streambayes failure (one line). Each subcommand is a :class:`Command` in
:data:`COMMANDS`. ``learn`` and ``predict`` stop cleanly on SIGTERM or SIGINT (a final snapshot
for ``learn``) and exit 0.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from pydantic import ValidationError

from streambayes import __version__
from streambayes.cli.arguments import (
    PROG,
    _add_learn_arguments,
    _add_predict_arguments,
    _add_produce_arguments,
    _add_rank_arguments,
    _add_replay_arguments,
    _add_snapshot_arguments,
)
from streambayes.cli.commands import (
    _run_demo,
    _run_learn,
    _run_predict,
    _run_produce,
    _run_rank,
    _run_replay,
    _run_snapshot,
    _Stopped,
)
from streambayes.config import Settings
from streambayes.errors import StreambayesError, UsageError


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


COMMANDS: dict[str, Command] = {
    "demo": Command("replay SMS spam with three naive Bayes models and explain a few messages",
                    lambda p: None, _run_demo),
    "replay": Command("prequential (predict, then learn) evaluation of models on a file or topic",
                      _add_replay_arguments, _run_replay),
    "learn": Command("learn from labelled events (file or Kafka) with exactly-once snapshots",
                     _add_learn_arguments, _run_learn),
    "predict": Command("publish a posterior for every unlabelled event, from the newest snapshot",
                       _add_predict_arguments, _run_predict),
    "rank": Command("rank unlabelled articles for each reader by a per-key model (NewsWeeder)",
                    _add_rank_arguments, _run_rank),
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

