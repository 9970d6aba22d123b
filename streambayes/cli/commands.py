"""What each command runs: builds the runtime's job from the parsed arguments and settings, runs
it, prints its summary line; signals make services stop cleanly."""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from streambayes.cli.arguments import PROG, _bounds, _loss_matrix, _per_key_bounds
from streambayes.config import Settings
from streambayes.errors import UsageError


def _run_rank(args: argparse.Namespace, settings: Settings) -> int:
    from streambayes.runtime.loops.rank import RankJob, run_rank

    keys = tuple(k.strip() for k in (args.key or "").split(",") if k.strip())
    job = RankJob(path=args.input, snapshots=args.snapshots, keys=keys, top=args.top, clues=args.clues,
                  limit=args.limit, format=args.format, text_field=args.text_field,
                  key_field=args.key_field, label_field=args.label_field, out=args.out,
                  dead_letter=args.dead_letter, **_per_key_bounds(args, settings))
    ranked = run_rank(job, settings)
    if args.out:
        print(f"ranked {ranked} articles for {len(keys) or 'each'} reader(s) into {args.out}")
    return 0


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

    # SIGUSR1 writes every thread's stack to stderr and the service goes on: what an operator
    # (or the test harness) reads when a service seems stuck. Registered before SIGTERM is
    # caught: the harness sends SIGUSR1 only to a process that catches SIGTERM.
    try:
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True, chain=False)
        dumps = True
    except (ValueError, OSError, RuntimeError):  # stderr closed, or without a file descriptor
        dumps = False
    old: dict[int, Any] = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            old[sig] = signal.signal(sig, handler)
        yield stop
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)
        if dumps:
            faulthandler.unregister(signal.SIGUSR1)


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
    from streambayes.runtime.observe import quiet_client_logs

    quiet_client_logs(logging.ERROR)  # the clients' own retry chatter: the runtime says what matters


def _run_learn(args: argparse.Namespace, settings: Settings) -> int:
    with _stop_on_signals() as stop:  # before the runtime's imports: a stop then ends cleanly too
        return _learn(args, settings, stop)


def _learn(args: argparse.Namespace, settings: Settings, stop: threading.Event) -> int:
    from streambayes.runtime.loops.learn import LearnJob
    from streambayes.runtime.loops.learn_run import run_learn

    job = LearnJob(source=args.source, snapshots=args.snapshots, model=args.model, every=args.every,
                   every_seconds=args.every_seconds, dead_letter=args.dead_letter,
                   partitions=args.partitions, format=args.format, label_field=args.label_field,
                   text_field=args.text_field, key_field=args.key_field, batch_size=args.batch_size,
                   follow=args.follow, network=args.network, keep=args.keep,
                   new_source=args.new_source, per_key=args.per_key,
                   calibrate=not args.no_calibration, metrics_port=args.metrics_port,
                   progress_seconds=args.progress_seconds, exactly_once=args.exactly_once,
                   **_per_key_bounds(args, settings), bounds=_bounds(args, settings))
    _logging()
    with _stopped_quietly(stop):
        stats = run_learn(job, settings, stop)
    last = stats.snapshots[-1].id if stats.snapshots else stats.restored
    dead = sum(stats.dead_letters.values())
    deleted = (f"; {stats.deleted} offsets were deleted from the topic before they were read "
               "(see the warnings)") if stats.deleted else ""
    print(f"learned {stats.events} events from {stats.records} records ({dead} dead letters) "
          f"in {stats.seconds:.2f} s; snapshot {last} in {args.snapshots}{deleted}")
    return 0


def _run_predict(args: argparse.Namespace, settings: Settings) -> int:
    with _stop_on_signals() as stop:  # before the runtime's imports: a stop then ends cleanly too
        return _predict(args, settings, stop)


def _predict(args: argparse.Namespace, settings: Settings, stop: threading.Event) -> int:
    from streambayes.runtime.loops.predict import PredictJob, run_predict

    job = PredictJob(source=args.source, sink=args.sink, snapshots=args.snapshots,
                     dead_letter=args.dead_letter, format=args.format,
                     label_field=args.label_field, text_field=args.text_field,
                     key_field=args.key_field, batch_size=args.batch_size, clues=args.clues,
                     follow=args.follow, reload_seconds=args.reload_seconds,
                     loss=_loss_matrix(args, settings), calibrated=not args.raw,
                     per_key=args.per_key, metrics_port=args.metrics_port,
                     progress_seconds=args.progress_seconds, **_per_key_bounds(args, settings),
                     exactly_once=args.exactly_once, transactional_id=args.transactional_id)
    if args.transactional_id and not args.exactly_once:
        raise UsageError("--transactional-id needs --exactly-once")
    _logging()
    with _stopped_quietly(stop):
        stats = run_predict(job, settings, stop)
    dead = sum(stats.dead_letters.values())
    deleted = (f"; {stats.deleted} offsets were deleted from the topic before they were read "
               "(see the warnings)") if stats.deleted else ""
    print(f"published {stats.posteriors} posteriors for {stats.records} records ({dead} dead "
          f"letters) in {stats.seconds:.2f} s; snapshot {stats.snapshot}{deleted}")
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

    from streambayes.runtime.loops.shards import (
        latest_all,
        merge_snapshots,
        open_stores,
        partition_shards,
        store_options,
    )
    from streambayes.runtime.loops.spill import check_build, restore_model
    from streambayes.snapshot.store import summarize

    if args.action == "merge":
        wheres, stores = [], []  # each store given, or its partition shards (a group's state)
        for given, store in zip(args.dirs, open_stores(args.dirs, settings), strict=True):
            for name, one in (partition_shards(store) or {"": store}).items():
                wheres.append(f"{str(given).rstrip('/')}/{name}" if name else str(given))
                stores.append(one)
        snaps = latest_all(stores)
        if snaps is None:
            raise UsageError("every shard directory needs a snapshot to merge")
        merged = merge_snapshots(snaps, partial(restore_model, **store_options(settings)))
        (store,) = open_stores([args.to], settings)
        info = store.write(merged.model.to_state(), model=merged.name, positions=merged.positions,
                           events=merged.events, config=_merged_config(wheres, merged))
        print(f"merged {len(snaps)} snapshots ({merged.events} events) into {args.to} as {info.id}")
        return 0
    if isinstance(args.dir, Path) and not args.dir.is_dir():
        raise UsageError(f"no snapshot directory {args.dir}")
    (store,) = open_stores([args.dir], settings)
    shards = partition_shards(store)  # a group's state: one shard per partition, by its name
    if args.action == "ls":
        for name, one in (shards or {"": store}).items():  # a group's shards: DIR/partition-*
            _list_snapshots(one.list(check_build), f"{name}/" if name else "")
        return 0
    if shards and not args.id:  # the newest snapshot of each partition shard
        print(json.dumps({name: summarize(s.latest_header(check_build) or {})
                          for name, s in shards.items()}, indent=2, ensure_ascii=False))
        return 0
    if shards:
        raise UsageError(f"{args.dir} holds partition shards: show one with DIR/<shard> --id")
    header = (store.load(args.id, check_build).header if args.id
              else store.latest_header(check_build))
    if header is None:
        raise UsageError(f"{args.dir} holds no snapshot")
    print(json.dumps(summarize(header), indent=2, ensure_ascii=False))
    return 0


def _list_snapshots(infos: list, prefix: str = "") -> None:
    for info in infos:
        state = "ok" if info.ok else f"CORRUPT ({info.error})"
        print(f"{prefix}{info.id}  {info.created_at or '-':<32}  {info.model or '-':<6}  "
              f"{info.events if info.events is not None else '-':>10}  {info.size:>10}  {state}")


def _run_demo(args: argparse.Namespace, settings: Settings) -> int:
    from streambayes.runtime.demo import run_demo

    run_demo(settings)
    return 0

