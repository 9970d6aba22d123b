"""``streambayes learn`` put together: the source, decoder, store, sinks and observer of a
:class:`~streambayes.runtime.loops.learn.LearnJob`, run by a static
:class:`~streambayes.runtime.loops.learn.LearnLoop` or, on a Kafka topic without
``--partitions``, a group learner (:mod:`~streambayes.runtime.loops.group`)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from streambayes.config import Settings
from streambayes.errors import UsageError
from streambayes.runtime.loops.learn import LearnJob, LearnLoop, LearnStats, _decoder, per_key_bounds
from streambayes.runtime.records.limits import RecordLimits
from streambayes.runtime.records.sources import FileSource
from streambayes.snapshot.store import BaseSnapshotStore


def run_learn(job: LearnJob, settings: Settings, stop: threading.Event | None = None) -> LearnStats:
    """Build the source, decoder, store and sinks of ``job`` and run the loop until done."""
    from streambayes.runtime.kafka.connect import open_sink, open_source
    from streambayes.runtime.loops.build import build_models
    from streambayes.runtime.loops.spill import SPILL_DIR, new_per_key, spill_hooks
    from streambayes.runtime.observe import observer_for
    from streambayes.runtime.records.uri import parse_uri

    if job.exactly_once:
        from streambayes.runtime.loops.learn_exactly_once import check_targets

        check_targets(job.snapshots, job.dead_letter)  # exit 2 before anything is opened
    if job.partitions is None and not isinstance(parse_uri(job.source), Path):
        from streambayes.runtime.loops.group import run_group_learn

        return run_group_learn(job, settings, stop)  # a Kafka topic: join the consumer group
    stop = stop or threading.Event()
    source = open_source(job.source, settings, role="learn", partitions=job.partitions,
                         fmt=job.format, stop=stop, follow=job.follow)
    dead = open_sink(job.dead_letter, settings, stop=stop) \
        if job.dead_letter and not job.exactly_once else None
    store: Any = None
    try:
        decoder = _decoder(source, job, limits=RecordLimits.from_settings(settings))
        store = _open_learn_store(job, settings)
        if job.exactly_once:
            from streambayes.runtime.loops.learn_exactly_once import exactly_once_parts

            store, dead = exactly_once_parts(job, settings, store, stop)
        name = job.model

        def make() -> Any:
            if job.per_key:
                build_models([name or "nb"], job.network, job.label_field)  # checks the name
                return new_per_key(name or "nb", per_key_bounds(job), spill_dir, job.bounds,
                                   key=store.key, limits=store.limits)
            return build_models([name or "nb"], job.network, job.label_field,
                                job.bounds)[name or "nb"]

        spill_dir = Path(job.snapshots) / SPILL_DIR  # used by --per-key only (a local store)
        restore, on_checkpoint = spill_hooks(store, spill_dir, per_key_bounds(job))

        config = {"source": job.source, "partitions": list(job.partitions or []) or None,
                  "label_field": job.label_field, "format": decoder.format}
        with observer_for(job, "learn", source) as observer:
            loop = LearnLoop(source, decoder, store, make, "perkey" if job.per_key else name,
                             dead_letters=dead, every=job.every,
                             every_seconds=job.every_seconds, batch_size=job.batch_size,
                             stop_at_end=isinstance(source, FileSource) and not job.follow, stop=stop,
                             config=config, new_source=job.new_source, calibrate=job.calibrate,
                             restore_model=restore, on_checkpoint=on_checkpoint,
                             observer=observer)
            return loop.run()
    finally:
        source.close()
        if dead is not None:
            dead[0].close()
        release = getattr(store, "release", None)  # learn --exactly-once: its producer
        if release is not None:
            release()


def _open_learn_store(job: LearnJob, settings: Settings) -> BaseSnapshotStore:
    """The store named by ``--snapshots`` (a directory or a kafka:// or s3:// URI); per-key
    models spill learners next to their snapshots, so they need a directory."""
    from streambayes.runtime.stores import is_local, location, open_store

    where = location(job.snapshots)
    if job.per_key and not is_local(where):
        raise UsageError(f"--per-key needs a snapshot directory (its spill files live beside the "
                         f"snapshots), not {where}")
    return open_store(where, settings, keep=job.keep)
