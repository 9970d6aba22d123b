"""The learn loop (DESIGN §4): poll → validate → featurize → ``learn_many`` → snapshot.

Exactly-once state. The snapshot holds the learner state and, per topic-partition, the next
offset after the last record the state reflects; on start the newest good snapshot is restored
and the source sought to those offsets. A checkpoint is, in this order: flush the dead-letter
sink (every dead letter of the records covered is acknowledged), write the snapshot (atomic), then
commit the offsets to the consumer group (for lag monitoring only: the snapshot is the truth). A
crash anywhere loses nothing and counts nothing twice in the state; dead letters of the records
after the last snapshot may be written again (at least once).

Before a micro-batch is learned, the model predicts it and the outcomes fit the calibration
exponent that the predictor serves with (:mod:`streambayes.runtime.loops.calibrate`); the calibrator's
statistics travel in the snapshot's config.

Checkpoints happen every ``every`` records or ``every_seconds`` seconds (when something was
read since the last one), at the end of a file source, and on stop (SIGTERM/SIGINT).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streambayes.errors import BrokerError, FeatureError, LimitError, UsageError
from streambayes.models.usage import first_batch_note
from streambayes.runtime.heap import freeze_long_lived
from streambayes.runtime.loops.skipped import Skipped, adds_up, offset_jumps
from streambayes.runtime.records.decode import Decoded, Decoder, dead_letter
from streambayes.runtime.records.events import DeadLetter
from streambayes.runtime.records.limits import RecordLimits
from streambayes.runtime.records.sinks import Sink
from streambayes.runtime.records.sources import FileSource, Format, Positions, Source
from streambayes.snapshot.store import BaseSnapshotStore, Snapshot, SnapshotInfo

if TYPE_CHECKING:
    from streambayes.runtime.observe import Observer

logger = logging.getLogger(__name__)
IDLE_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class LearnJob:
    """Everything ``streambayes learn`` needs, as plain values (built by the CLI)."""

    source: str
    snapshots: Path | str  # a directory, or a store URI (kafka://..., s3://...)
    model: str | None = None  # None: the snapshot's model, else "nb"
    every: int = 10_000
    every_seconds: float = 60.0
    dead_letter: str | None = None
    partitions: tuple[int, ...] | None = None
    format: Format | None = None
    label_field: str = "label"
    text_field: str | None = None
    key_field: str | None = None
    batch_size: int = 1000
    follow: bool = False
    network: Path | None = None
    keep: int = 5
    per_key: bool = False  # one model per event key, backed off to a global model
    new_source: bool = False  # continue a snapshot learned from another source
    calibrate: bool = True  # fit the served calibration exponent prequentially
    max_resident: int | None = None  # --per-key: live per-key learners (the rest spill to disk)
    max_resident_bytes: int | None = None  # --per-key: bytes of the live per-key learners
    max_keys: int | None = None  # --per-key: keys ever learned (new keys past it: dead letters)
    bounds: Mapping[str, int] | None = None  # max_classes, max_fields, max_values of a new model
    metrics_port: int | None = None  # serve Prometheus metrics on this port (None: no endpoint)
    progress_seconds: float = 10.0  # a progress line (counts, rate, lag) every so many seconds
    exactly_once: bool = False  # dead letters and snapshots in one Kafka transaction (a kafka:// store)


@dataclass
class LearnStats:
    """What a run did; ``snapshots`` lists the checkpoints written, oldest first."""

    records: int = 0
    events: int = 0  # learned in this run
    dead_letters: Counter[str] = field(default_factory=Counter)
    snapshots: list[SnapshotInfo] = field(default_factory=list)
    restored: str | None = None
    seconds: float = 0.0
    # offsets the snapshot's positions owed but the topic no longer held when reading resumed
    # (retention or DeleteRecords while the learner was away): their events are not learned
    deleted: int = 0


def merge_positions(base: Mapping[str, Mapping[str, int]],
                    update: Mapping[str, Mapping[str, int]]) -> Positions:
    """``base`` with ``update``'s partitions laid over it, topic by topic.

    >>> merge_positions({"a": {"0": 5, "1": 2}, "b": {"0": 1}}, {"a": {"1": 7}})
    {'a': {'0': 5, '1': 7}, 'b': {'0': 1}}
    """
    out = {topic: dict(parts) for topic, parts in base.items()}
    for topic, parts in update.items():
        out.setdefault(topic, {}).update(parts)
    return out


def is_per_key(model: Any) -> bool:
    return getattr(model, "name", None) == "perkey"


def keyed_events(model: Any, good: list[Decoded],
                 dead: Callable[[DeadLetter], None]) -> list[Decoded]:
    """``good`` unchanged, or for a per-key model those with a key (the rest dead-lettered)."""
    if not is_per_key(model):
        return good
    kept = []
    for d in good:
        if d.event.key:
            kept.append(d)
        else:
            dead(dead_letter(d.record, "bad_feature", f"event {d.event.id!r} has no key: a per-key "
                             "model needs one per event (give it a 'key', or name a field with "
                             "--key-field)"))
    return kept


def send_dead_letter(letter: DeadLetter, counts: Counter[str],
                     dead_letters: tuple[Sink, str] | None) -> None:
    """Count ``letter`` and send it to the dead-letter sink (or log it when there is none)."""
    counts[letter.reason] += 1
    if dead_letters is None:
        logger.warning("dead letter (%s) at %s[%d]@%d: %s", letter.reason, letter.source.topic,
                       letter.source.partition, letter.source.offset, letter.error)
        return
    sink, topic = dead_letters
    sink.send(topic, None, letter)


class LearnLoop:
    """One learner fed by one source; :meth:`run` until the source ends or ``stop`` is set.

    The parts are given ready-made so that tests can use memory sources and stores; the CLI
    builds them with :func:`run_learn`. ``restore()`` must be called before ``run()``.
    """

    def __init__(
        self,
        source: Source,
        decoder: Decoder,
        store: BaseSnapshotStore,
        make_model: Callable[[], Any],
        model_name: str | None,
        *,
        dead_letters: tuple[Sink, str] | None = None,
        every: int = 10_000,
        every_seconds: float = 60.0,
        batch_size: int = 1000,
        stop_at_end: bool = True,
        stop: threading.Event | None = None,
        config: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        new_source: bool = False,
        calibrate: bool = True,
        restore_model: Callable[[Snapshot], Any] | None = None,
        on_checkpoint: Callable[[SnapshotInfo, Mapping[str, Any]], None] | None = None,
        observer: Observer | None = None,
    ) -> None:
        if every < 1 or batch_size < 1 or every_seconds <= 0:
            raise UsageError("--every, --every-seconds and the batch size must be positive")
        self.source = source
        self.decoder = decoder
        self.store = store
        self.make_model = make_model
        self.model_name = model_name
        self.dead_letters = dead_letters
        self.every = every
        self.every_seconds = every_seconds
        self.batch_size = batch_size
        self.stop_at_end = stop_at_end
        self.stop = stop or threading.Event()
        self.config = dict(config or {})
        self.clock = clock
        self.new_source = new_source
        self.calibrate = calibrate
        self.calibrator: Any = None
        self.restore_model = restore_model  # None: model_from_state(snapshot.state)
        self.on_checkpoint = on_checkpoint  # after each snapshot write (e.g. spill collection)
        self.observer = observer  # progress lines and metrics (None: none)
        self.stats = LearnStats()
        self.model: Any = None
        self.events_total = 0
        self._positions: Positions = {}
        # partition -> the offset a restored snapshot resumes it at, until its first record
        self._resumed: dict[int, int] = {}
        self.deleted_upto: dict[int, int] = {}  # partition -> deleted offsets reported below this
        # jumps in the offsets read while running: retention deleting what this learner is behind
        self.skipped = Skipped(getattr(source, "topic", "?"), getattr(source, "log_starts", None),
                               clock=clock)
        self._unsaved = 0  # records read since the last checkpoint
        self._fields_noted = False  # said which fields the model uses (at the first events)

    def restore(self) -> None:
        """Load the newest good snapshot (or start fresh) and seek the source to its positions."""
        from streambayes.models import model_from_state
        from streambayes.runtime.loops.spill import check_build

        snap = self.store.latest(check_build)  # newest whose state rebuilds; bad ones skipped
        if snap is None:
            self.model = self.make_model()
            self.model_name = self.model_name or self.model.name
            self._start_calibration(None)
            return
        if self.model_name is not None and self.model_name != snap.model:
            raise UsageError(f"{self.store}: snapshot {snap.id} holds model {snap.model!r}, not "
                             f"{self.model_name!r} (use another --snapshots directory)")
        topic = getattr(self.source, "topic", None)
        if snap.positions and topic is not None and topic not in snap.positions \
                and not self.new_source:
            raise UsageError(
                f"{self.store}: snapshot {snap.id} was learned from {', '.join(snap.positions)}, "
                f"not {topic}; reading it would add its events on top (give the same --source "
                "as before, or --new-source to continue this model on another stream)")
        self.model = snap.learner if snap.learner is not None else \
            self.restore_model(snap) if self.restore_model else model_from_state(snap.state)
        self.model_name = snap.model
        self.events_total = snap.events
        self._positions = snap.positions
        self.source.seek(self._positions)
        reads = getattr(self.source, "assigned", None)  # the partitions read, where known
        self._resumed = {int(p): int(offset)
                         for p, offset in snap.positions.get(topic or "", {}).items()
                         if reads is None or int(p) in reads}
        self._start_calibration(snap.header.get("config"))
        self.stats.restored = snap.id
        logger.info("restored snapshot %s (%d events) at %s", snap.id, snap.events, snap.positions)

    def run(self) -> LearnStats:
        """:meth:`_run`; a sink failure with records read since the last snapshot is raised as a
        plain :class:`BrokerError` saying so (never the quiet "stopped while waiting" kind)."""
        try:
            return self._run()
        except BrokerError as exc:
            if not self._unsaved:
                raise
            raise self._undelivered(exc) from exc

    def _undelivered(self, exc: BrokerError) -> BrokerError:
        last = self.stats.snapshots[-1].id if self.stats.snapshots else self.stats.restored
        since = f"snapshot {last}" if last else "the beginning"
        what = "dead letters could not be delivered" if self.dead_letters is not None \
            else "the run failed"
        return BrokerError(
            f"{what} ({' '.join(str(exc).split())}); the {self._unsaved} records read since "
            f"{since} are not saved: a restart learns them again from there (exactly once)")

    def _run(self) -> LearnStats:
        if self.model is None:
            self.restore()
        freeze_long_lived()  # the collector walks only what the stream allocates (runtime/heap.py)
        start = self.clock()
        last = self.clock()
        since = 0  # records read since the last checkpoint
        topic = getattr(self.source, "topic", None)
        watch = self.skipped.ask is not None and topic is not None  # jumps: see skipped.py
        before = self.source.positions().get(topic, {}) if watch else {}
        while not self.stop.is_set():
            # a new model learns in growing batches (1, 2, 4, ...): its calibration starts early
            want = min(self.batch_size, max(1, self.events_total))
            records = self.source.poll(want, timeout=IDLE_POLL_SECONDS)
            if records:
                if watch:
                    after = self.source.positions().get(topic, {})
                    if not adds_up(before, after, len(records)):
                        self.skipped.add(offset_jumps({int(p): o for p, o in before.items()},
                                                      records, self._resumed))
                    before = after
                self._learn(records)
                since += len(records)
            self.check_skipped()  # jumps waiting (skipped.py), after every poll
            if not records and self.stop_at_end:
                break
            if since and (since >= self.every or self.clock() - last >= self.every_seconds):
                self.checkpoint()
                since, last = 0, self.clock()
            if self.observer is not None:
                self.observer.tick()
        self.check_skipped(force=True)  # the jumps still waiting for a question
        if since or not self.store.ids():
            self.checkpoint()
        self.stats.seconds = self.clock() - start
        return self.stats

    def _learn(self, records: list) -> None:
        if self._resumed:
            self._look_for_deleted(records)
        if self.observer is not None:
            self.observer.records(len(records))
        self.stats.records += len(records)
        self._unsaved += len(records)  # counted first: a dead letter failing below is unsaved
        plain = None if is_per_key(self.model) else self.decoder.plain_batch(records)
        good: list[Decoded] | None = None  # (a plain batch: no object per event unless it fails)
        if plain is None:
            good = self._decoded(records)
            if not good:
                return
            plain = [d.x for d in good], [d.label for d in good]
        xs, labels = plain
        weights = [1.0] * len(xs) if good is None else [d.weight for d in good]
        if not self._fields_noted:  # the first events: a model that sees nothing warns
            self._fields_noted = True
            note = first_batch_note(self.model_name or "model", self.model, xs)
            if note is not None:
                (logger.warning if note[0] else logger.info)(note[1])
        try:
            X = self.model.featurize(xs)
            self._calibrate(X, labels, weights)
            keys = {"keys": [d.event.key for d in good]} if is_per_key(self.model) else {}
            self.model.learn_many(X, labels, weights, **keys)
            learned = len(xs)
        except Exception:  # noqa: BLE001 (learn one by one: keep the good events, letter the bad)
            learned = self._learn_each(self._decoded(records) if good is None else good)
        self.stats.events += learned
        self.events_total += learned
        if self.observer is not None:
            self.observer.events(learned)

    def check_skipped(self, force: bool = False) -> None:
        """Count what :class:`~.skipped.Skipped` finds deleted among the jumps waiting (when it
        is time to ask, or ``force``)."""
        if self.skipped.pending:
            self.stats.deleted += self.skipped.check(self.deleted_upto, force)

    def _look_for_deleted(self, records: list) -> None:
        """At the first record of each partition after a restore: if it lies past the offset the
        snapshot resumes at, ask the source where the partition now begins. Offsets the snapshot
        owed below that start (and below the first record: retention may move on after the
        fetch) were deleted (retention or DeleteRecords) before this learner could read them:
        warned and counted (``stats.deleted``), never silent; ``deleted_upto`` (partition ->
        offset) keeps what was already reported, so a shard restored again from the same snapshot
        does not count the same offsets twice. A gap that the start does not explain (transaction
        markers, compaction) is not reported; one the broker cannot explain (no answer) is
        warned as not read. A source without ``log_starts`` reports nothing."""
        wanted, firsts = self._resumed, {}
        for r in records:
            if r.partition in wanted and r.partition not in firsts:
                firsts[r.partition] = r.offset
                if len(firsts) == len(wanted):
                    break
        jumped = {p: (wanted[p], first) for p, first in firsts.items() if first > wanted[p]}
        for p in firsts:
            del wanted[p]
        ask = getattr(self.source, "log_starts", None)
        if not jumped or ask is None:
            return
        topic = getattr(self.source, "topic", "?")
        try:
            starts = ask(sorted(jumped))
        except Exception as exc:  # noqa: BLE001 (a report, not the stream: never ends the run)
            logger.info("where %s begins is unknown: %s", topic, exc)
            starts = None
        for p, (resume, first) in sorted(jumped.items()):
            if starts is None:
                logger.warning("%s[%d]: resumed at offset %d but read on from %d; the broker did "
                               "not say whether offsets %d-%d were deleted (retention) or hold no "
                               "records (transaction markers, compaction)", topic, p, resume,
                               first, resume, first - 1)
                continue
            gone = min(starts.get(p, 0), first)  # offsets below it are deleted
            since = max(resume, self.deleted_upto.get(p, resume))  # not reported yet
            if gone > since:
                self.stats.deleted += gone - since
                self.deleted_upto[p] = gone
                logger.warning(
                    "%s[%d]: offsets %d-%d were deleted from the topic (retention or "
                    "DeleteRecords) before this learner read them; their events are not in the "
                    "model, which resumes at %d (snapshot %s)", topic, p, since, gone - 1, first,
                    self.stats.restored)

    def _decoded(self, records: list) -> list[Decoded]:
        """The records decoded (dead letters sent) and, for a per-key model, keyed."""
        good: list[Decoded] = []
        for item in self.decoder.decode_many(records):
            if isinstance(item, DeadLetter):
                self._dead(item)
            else:
                good.append(item)
        return self._with_keys(good)

    def _learn_each(self, good: list[Decoded]) -> int:
        """Learn ``good`` one event at a time, dead-lettering those refused; how many learned."""
        learned = 0
        for d in good:
            try:
                self._learn_batch([d])
                learned += 1
            except LimitError as exc:  # past a bound (max_classes...): nothing changed
                self._dead(dead_letter(d.record, "limit", str(exc)))
            except FeatureError as exc:  # refused before anything changed
                self._dead(dead_letter(d.record, "bad_feature", str(exc)))
            except Exception as exc:  # noqa: BLE001 (a learner bug must not stop the stream)
                logger.exception("learner failed on %s@%d", d.record.topic, d.record.offset)
                self._dead(dead_letter(d.record, "model_error", f"{type(exc).__name__}: {exc}"))
        return learned

    def _learn_batch(self, ds: list[Decoded], X: Any = None) -> None:
        keys = {"keys": [d.event.key for d in ds]} if is_per_key(self.model) else {}
        if X is None:
            X = self.model.featurize([d.x for d in ds])
        self.model.learn_many(X, [d.label for d in ds], [d.weight for d in ds], **keys)

    def _start_calibration(self, config: Mapping[str, Any] | None) -> None:
        from streambayes.runtime.loops.calibrate import OnlineCalibrator, can_calibrate, from_config

        if self.calibrate and can_calibrate(self.model):
            self.calibrator = from_config(config) or OnlineCalibrator()

    def _calibrate(self, X: Any, labels: list, weights: list[float]) -> None:
        """Prequential calibration: the batch's outcomes under the model not yet trained on it."""
        if self.calibrator is None:
            return
        from streambayes.runtime.loops.calibrate import update_before_learning

        try:
            update_before_learning(self.model, self.calibrator, X, labels, weights)
        except Exception as exc:  # noqa: BLE001 (calibration is a refinement: never lose a batch to it)
            logger.warning("calibration skipped a batch: %s: %s", type(exc).__name__, exc)

    def _with_keys(self, good: list[Decoded]) -> list[Decoded]:
        """For a per-key model, the events with a key; the others become dead letters."""
        return keyed_events(self.model, good, self._dead)

    def _dead(self, letter: DeadLetter) -> None:
        if self.observer is not None:
            self.observer.dead_letter(letter.reason)
        send_dead_letter(letter, self.stats.dead_letters, self.dead_letters)

    def checkpoint(self) -> SnapshotInfo:
        """Flush dead letters, write the snapshot, then commit offsets (lag monitoring only)."""
        from streambayes.runtime.loops.checkpoint import checkpoint_in_order

        commit = getattr(self.source, "commit", None)
        info = checkpoint_in_order(self.dead_letters, self.save,
                                   lambda _: commit(self._positions) if commit else None)
        logger.info("snapshot %s: %d events at %s", info.id, self.events_total, self._positions)
        return info

    def save(self) -> SnapshotInfo:
        """Write the snapshot of the state and positions (the middle step of :meth:`checkpoint`;
        the group learner's checkpoint calls it per partition shard)."""
        positions = merge_positions(self._positions, self.source.positions())
        state = self.model.to_state()
        config = self.config
        if self.calibrator is not None:
            from streambayes.runtime.loops.calibrate import CONFIG_KEY, to_config

            config = {**config, CONFIG_KEY: to_config(self.calibrator)}
        info = self.store.write(state, model=self.model_name, positions=positions,
                                events=self.events_total, config=config)
        self._positions = positions
        if self.on_checkpoint is not None:
            self.on_checkpoint(info, state)
        self.stats.snapshots.append(info)
        self._unsaved = 0
        if self.observer is not None:
            self.observer.snapshot(info.id)
        return info


def _decoder(source: Source, job: LearnJob | Any, require_label: bool = True,
             limits: RecordLimits | None = None) -> Decoder:
    """The decoder for a source: a file's own format and header, else ``job.format`` (jsonl);
    ``limits`` per record (default :class:`RecordLimits`)."""
    if isinstance(source, FileSource):
        fmt, header = source.format, source.header
    else:
        fmt, header = job.format or "jsonl", None
        if fmt == "csv":
            raise UsageError("a Kafka topic carries JSONL or TSV records, not CSV (no header row)")
    return Decoder(fmt, label_field=job.label_field, text_field=job.text_field,
                   key_field=job.key_field, header=header, require_label=require_label,
                   limits=limits)


def per_key_bounds(job: Any) -> dict[str, int | None]:
    """The per-key memory bounds of a learn/predict/replay job (None: unbounded)."""
    return {"max_resident": job.max_resident, "max_resident_bytes": job.max_resident_bytes,
            "max_keys": job.max_keys}


