"""``streambayes rank``: NewsWeeder-style reading lists (Lang 1995).

A window of unlabelled articles (a file, or a bounded range of a Kafka topic) is ranked for
each reader by the per-key model of the newest snapshots (learned with ``learn --per-key``):
by decreasing ``P(positive | article, reader)``, the reader's own profile backed off to the
global one, with the clues that put each article where it is. The readers are ``--key``
(every article is ranked for each of them), else each article's own key (articles are ranked
among those of the same key). Bad records go to the dead letters; one line each, JSONL.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from streambayes.config import Settings
from streambayes.errors import UsageError
from streambayes.models.perkey_rows import positive_log_odds
from streambayes.runtime.loops.learn import is_per_key, per_key_bounds
from streambayes.runtime.loops.predict import ModelWatcher
from streambayes.runtime.loops.replay import DEAD_LETTER_TOPIC, open_input
from streambayes.runtime.loops.shards import open_stores, store_options
from streambayes.runtime.records.decode import Decoded, Decoder
from streambayes.runtime.records.events import DeadLetter
from streambayes.runtime.records.limits import RecordLimits
from streambayes.runtime.records.sources import FileSource


@dataclass(frozen=True)
class RankJob:
    """Everything ``streambayes rank`` needs, as plain values (built by the CLI)."""

    path: Path | str  # a file, or kafka://HOST:PORT/TOPIC?from=...&to=...
    snapshots: tuple[str, ...]
    keys: tuple[str, ...] = ()  # the readers; empty: each article's own key
    top: int | None = None  # the first N of each reader's list (None: all)
    clues: int = 5
    limit: int | None = None  # articles in the window (None: the whole input)
    format: Any = None
    text_field: str | None = None
    key_field: str | None = None
    label_field: str = "label"
    out: str | None = None  # a JSONL file or kafka://HOST:PORT/TOPIC; None: standard output
    dead_letter: str | None = None
    max_resident: int | None = None
    max_resident_bytes: int | None = None
    max_keys: int | None = None


def rank_window(model: Any, articles: Sequence[Decoded], reader: str, top: int | None,
                clues: int) -> list[dict[str, Any]]:
    """The reading list of ``reader``: one record per article, best first (ties keep window
    order), with rank, id, p(positive), its log-odds and the top clues."""
    xs = [d.x for d in articles]
    lp = model.predict_log_proba_many(xs, reader)
    odds = positive_log_odds(lp, model.classes, model.positive)
    order = np.argsort(-odds, kind="stable")[: top if top is not None else len(xs)]
    j = list(model.classes).index(model.positive) if model.positive in model.classes else None
    chosen = [articles[i] for i in order]
    why = model.clues_many([d.x for d in chosen], reader, clues) if clues else [[] for _ in chosen]
    return [{"key": reader, "rank": r + 1, "id": d.event.id,
             "p_positive": None if j is None else float(np.exp(lp[i, j])),
             "log_odds": float(odds[i]), "positive": model.positive,
             "clues": [[name, round(weight, 6)] for name, weight in c]}
            for r, (i, d, c) in enumerate(zip(order.tolist(), chosen, why, strict=True))]


def run_rank(job: RankJob, settings: Settings) -> int:
    """Rank the window for every reader; returns the number of articles ranked (per reader)."""
    from streambayes.runtime.kafka.connect import open_sink
    from streambayes.runtime.loops.spill import restore_model

    if job.top is not None and job.top < 1:
        raise UsageError(f"--top must be >= 1, got {job.top}")
    watcher = ModelWatcher(open_stores(job.snapshots, settings),
                           partial(restore_model, bounds=per_key_bounds(job), **store_options(settings)),
                           per_key=True)
    if not watcher.check() or watcher.current is None or not is_per_key(watcher.current.model):
        raise UsageError(f"no snapshot to rank with in {', '.join(map(str, job.snapshots))} "
                         "(learn one with 'learn --per-key')")
    model = watcher.current.model
    articles, dead = _window(job, settings)
    out, topic = open_sink(job.out, settings, mode="w") if job.out else (None, "")
    letters, letters_topic = open_sink(job.dead_letter, settings) if job.dead_letter else (None, "")
    try:
        for letter in dead:
            if letters is not None:
                letters.send(letters_topic or DEAD_LETTER_TOPIC, None, letter)
        for reader, group in _readers(job, articles):
            for line in rank_window(model, group, reader, job.top, job.clues):
                if out is None:
                    sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
                else:
                    out.send(topic, reader, line)
    finally:
        for sink in (out, letters):
            if sink is not None:
                sink.flush()
                sink.close()
    if dead and letters is None:
        print(f"streambayes rank: {len(dead)} bad records skipped (--dead-letter FILE keeps them)",
              file=sys.stderr)
    return len(articles)


def _window(job: RankJob, settings: Settings) -> tuple[list[Decoded], list[DeadLetter]]:
    articles: list[Decoded] = []
    dead: list[DeadLetter] = []
    with open_input(job, settings) as source:
        fmt, header = (source.format, source.header) if isinstance(source, FileSource) else \
            (job.format or "jsonl", None)
        decoder = Decoder(fmt, label_field=job.label_field, text_field=job.text_field,
                          key_field=job.key_field, header=header, require_label=False,
                          limits=RecordLimits.from_settings(settings))
        while job.limit is None or len(articles) + len(dead) < job.limit:
            want = 512 if job.limit is None else min(512, job.limit - len(articles) - len(dead))
            records = source.poll(want)
            if not records:
                break
            for item in decoder.decode_many(records):
                (dead if isinstance(item, DeadLetter) else articles).append(item)
    return articles, dead


def _readers(job: RankJob, articles: list[Decoded]) -> list[tuple[str, list[Decoded]]]:
    if job.keys:
        return [(key, articles) for key in job.keys]
    groups: dict[str, list[Decoded]] = {}
    for d in articles:
        if not d.event.key:
            raise UsageError(f"article {d.event.id!r} has no key: name the readers with --key")
        groups.setdefault(d.event.key, []).append(d)
    return list(groups.items())
