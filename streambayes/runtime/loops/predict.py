"""The predict loop (DESIGN §4): poll unlabelled events → predict in micro-batches → decide → publish.

Each event gets exactly one :class:`~streambayes.runtime.records.events.Posterior` on the sink, keyed by
the event's ``key`` or else its ``id``, naming the model and the snapshot it came from. When the
snapshot carries a calibration exponent (fitted by the learner, :mod:`.calibrate`) the posterior
and the decision are calibrated and the model's raw log-posterior rides along; bad
records become dead letters. The model is the newest good snapshot of each ``--snapshots``
directory, merged when several shards are given; the loop looks for newer snapshots every
``reload_seconds`` and swaps to them between micro-batches, without a restart. With a Kafka
source the loop reads in a consumer group and commits offsets after the posteriors of a
micro-batch are acknowledged (at least once across a rebalance or a crash).

``latency_ms`` is the time from the record's timestamp (Kafka's create time; for a file, the
moment it was read) to the posterior's hand-over to the sink.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from streambayes.config import Settings
from streambayes.errors import FeatureError, LimitError, ModelError, UsageError
from streambayes.models.clues import gc_paused
from streambayes.runtime.kafka.pipelined import Settler, unacknowledged
from streambayes.runtime.loops.learn import is_per_key, keyed_events, send_dead_letter
from streambayes.runtime.loops.shards import (
    open_stores,
    store_options,
)
from streambayes.runtime.loops.watcher import ModelWatcher, Reloader  # noqa: E402 (re-exported)
from streambayes.runtime.records.decode import Decoded, Decoder, dead_letter
from streambayes.runtime.records.events import DeadLetter, PosteriorJSON, clue_json
from streambayes.runtime.records.sinks import MessageTooLarge, Sink
from streambayes.runtime.records.sources import FileSource, Format, Source

logger = logging.getLogger(__name__)
RELOAD_WAIT = 5.0  # seconds a stopping predictor waits for a snapshot load in flight


@dataclass(frozen=True)
class PredictJob:
    """Everything ``streambayes predict`` needs, as plain values (built by the CLI)."""

    source: str
    sink: str
    snapshots: tuple[Path, ...]
    dead_letter: str | None = None
    format: Format | None = None
    label_field: str = "label"
    text_field: str | None = None
    key_field: str | None = None
    batch_size: int = 500
    clues: int = 5
    follow: bool = False
    reload_seconds: float = 1.0
    wait_seconds: float | None = None  # for the first snapshot; None: forever (Kafka), 0 (file)
    loss: Any = None  # a streambayes.decide.LossMatrix; None: the most probable class
    calibrated: bool = True  # serve with the snapshot's calibration exponent when it has one
    per_key: bool = False  # the snapshots must hold a per-key model
    max_resident: int | None = None  # per-key: live learners (the rest read from spill files)
    max_resident_bytes: int | None = None  # per-key: bytes of the live learners
    max_keys: int | None = None  # per-key: not used by prediction (it creates no key)
    exactly_once: bool = False  # one Kafka transaction per micro-batch (loops/exactly_once.py)
    transactional_id: str | None = None  # exactly once: None is <group>-<hostname>
    metrics_port: int | None = None  # serve Prometheus metrics on this port (None: no endpoint)
    progress_seconds: float = 10.0  # a progress line (counts, rate, lag) every so many seconds


@dataclass
class PredictStats:
    records: int = 0
    posteriors: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)
    reloads: int = 0
    snapshot: str | None = None
    seconds: float = 0.0
    deleted: int = 0  # offsets the group owed that retention deleted before they were read


class PredictLoop:
    """Serve posteriors for the events of ``source`` on ``sink``; :meth:`run` until done or stopped."""

    def __init__(
        self,
        source: Source,
        decoder: Decoder,
        watcher: ModelWatcher,
        sink: tuple[Sink, str],
        *,
        dead_letters: tuple[Sink, str] | None = None,
        batch_size: int = 500,
        clues: int = 5,
        reload_seconds: float = 1.0,
        wait_seconds: float | None = None,
        stop_at_end: bool = True,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        loss: Any = None,
        calibrated: bool = True,
        settle_seconds: float = 0.5,
        commit_seconds: float = 0.1,
        freeze_gc: bool = False,
        observer: Any = None,
    ) -> None:
        if batch_size < 1 or clues < 0 or reload_seconds <= 0:
            raise UsageError("the batch size and --reload-seconds must be positive, --clues >= 0")
        self.source = source
        self.decoder = decoder
        self.watcher = watcher
        self.sink = (OversizeToDeadLetter(sink[0], self), sink[1])
        self.records: dict[str | None, Any] = {}  # event id -> record, of the batch served
        self.dead_letters = dead_letters
        self.batch_size = batch_size
        self.clues = clues
        self._batch_clues: list | None = None  # clues scored with the batch's predictions
        self.reload_seconds = reload_seconds
        self.wait_seconds = wait_seconds
        self.stop_at_end = stop_at_end
        self.stop = stop or threading.Event()
        self.clock = clock
        self.loss = loss
        self.calibrated = calibrated
        self._warned: set[str] = set()
        self.settler = Settler(settle_seconds, commit_seconds, clock)
        self.freeze_gc = freeze_gc  # gc.freeze() after each model load (a process-wide setting)
        self.observer = observer  # progress lines and metrics (None: none)
        self.stats = PredictStats()

    def wait_for_model(self) -> None:
        """Block until every store has a good snapshot (or ``wait_seconds`` pass: then fail)."""
        start = self.clock()
        warned = False
        while not self.watcher.check() and self.watcher.current is None:
            if self.wait_seconds is not None and self.clock() - start >= self.wait_seconds:
                dirs = ", ".join(str(s) for s in self.watcher.stores)
                raise UsageError(f"no snapshot to serve in {dirs} (run 'streambayes learn' first)")
            if not warned:
                logger.warning("waiting for a first snapshot in %s", self.watcher.stores)
                warned = True
            if self.stop.wait(min(self.reload_seconds, 0.5)):
                return

    def run(self) -> PredictStats:
        self.wait_for_model()
        self._loaded()
        start = last_check = self.clock()
        reloader = Reloader(self.watcher)  # newer snapshots loaded on its thread, swapped here
        while not self.stop.is_set() and self.watcher.current is not None:
            if self.clock() - last_check >= self.reload_seconds:
                last_check = self.clock()
                reloader.start()
            loaded = reloader.take()
            if loaded is not None and self.watcher.adopt(loaded):
                self.stats.reloads += 1
                self._loaded()
            if not self._step():
                break
        reloader.wait(RELOAD_WAIT)  # a load in flight ends before the stores and sinks close
        if self.settler.pending():
            self._settle(force=True)
        self.stats.seconds = self.clock() - start
        self.stats.snapshot = self.watcher.current.label if self.watcher.current else None
        return self.stats

    def _step(self) -> bool:
        """One poll and the batch it brought served (with nothing: what is due settled); False
        when the source has ended and the loop stops there."""
        if self.observer is not None:
            self.observer.tick()
        wait = min(0.2, self.reload_seconds, self.settler.wait())
        records = self.source.poll(self.batch_size, timeout=wait)
        if records:
            self._serve(records)
        elif self.stop_at_end:
            return False
        elif self.settler.pending():
            self._settle()
        return True

    def _loaded(self) -> None:
        """A model was loaded: tell the observer; freeze the collector (tails) when asked."""
        if self.observer is not None and self.watcher.current is not None:
            self.observer.snapshot(self.watcher.current.label)
        if self.freeze_gc:  # the model and imports out of the collector's passes
            gc.freeze()

    def _serve(self, records: list) -> None:
        self._publish(records)
        self._settle()

    def _settle(self, force: bool = False) -> None:
        """Commit the offsets served once acknowledged (:class:`~.pipelined.Settler`)."""
        sinks = [self.sink[0]] + ([self.dead_letters[0]] if self.dead_letters is not None else [])
        self.settler.settle(self.source, sinks, force)

    def _publish(self, records: list) -> None:
        polled = time.time()
        self.stats.records += len(records)
        good: list[Decoded] = []
        for item in self.decoder.decode_many(records):
            if isinstance(item, DeadLetter):
                self._dead(item)
            else:
                good.append(item)
        served = self.watcher.current
        good, log_proba = self._predict(served.model, good)
        classes = list(served.model.classes)
        sink, topic = self.sink
        alpha, raw = self._alpha(served), log_proba
        if alpha is not None and len(log_proba):
            from streambayes.runtime.loops.calibrate import squash

            log_proba = squash(raw, alpha)
        decisions = self._decisions(classes, log_proba)
        for i, (d, row, clues, decision) in enumerate(zip(
                good, log_proba, self._clues(served.model, good), decisions, strict=True)):
            posterior = dict(zip(classes, np.exp(row).tolist(), strict=True))
            stamp = d.record.timestamp if d.record.timestamp is not None else polled * 1000
            latency = max(0.0, time.time() * 1000 - stamp)
            sink.send(topic, d.event.key or d.event.id, PosteriorJSON.of(
                id=d.event.id, key=d.event.key, model=served.name, snapshot=served.label,
                posterior=posterior, decision=decision, clues=clues, latency_ms=round(latency, 3),
                calibration_alpha=alpha, raw_log_proba=None if alpha is None else {
                    str(c): (float(v) if np.isfinite(v) else None)
                    for c, v in zip(classes, raw[i].tolist(), strict=True)}))
        self.stats.posteriors += len(good)
        if self.observer is not None:
            self.observer.records(len(records))
            self.observer.events(len(good))
            now = time.time() * 1000
            self.observer.latencies(max(0.0, now - (d.record.timestamp if d.record.timestamp
                                                    is not None else polled * 1000)) / 1000
                                    for d in good)

    def _alpha(self, served: Any) -> float | None:
        """The calibration exponent to serve with: the snapshot's, unless ``calibrated`` is off."""
        if not self.calibrated or served.calibration is None or not served.calibration.n_events:
            return None
        return round(float(served.calibration.alpha), 6)

    def _decisions(self, classes: list, log_proba: np.ndarray) -> list[str | None]:
        """Minimum expected cost under the loss matrix (``unsure`` past the reject cost), else the
        most probable class. A model class the matrix does not name: most probable, warned once."""
        if not classes:
            return [None] * len(log_proba)
        argmax = [classes[int(i)] for i in np.argmax(log_proba, axis=1)] if len(log_proba) else []
        if self.loss is None:
            return argmax
        from streambayes.decide import decide

        try:
            return decide(self.loss, log_proba, [str(c) for c in classes], log=True)
        except ModelError as exc:
            if str(exc) not in self._warned:
                self._warned.add(str(exc))
                logger.error("loss matrix does not fit the model (%s); deciding by the most "
                             "probable class", exc)
            return argmax

    def _clues(self, model: Any, good: list[Decoded]) -> list[list[tuple[str, float]]]:
        """The top clues of every event (batched when the model can; a per-key model's from the
        event's key), or none for a model that gives no clues."""
        if not self.clues or not model.classes or not good or \
                not (hasattr(model, "clues_many") or hasattr(model, "clues_one")):
            return [[] for _ in good]
        scored, self._batch_clues = self._batch_clues, None
        if scored is not None and len(scored) == len(good):  # with the predictions
            return scored
        many = getattr(model, "clues_many", None)
        try:
            if is_per_key(model):
                return model.clues_many([d.x for d in good], [d.event.key for d in good], self.clues)
            if many is not None:
                return many([d.x for d in good], self.clues)
            return [model.clues_one(d.x, self.clues) for d in good]
        except Exception:  # noqa: BLE001 (clues are evidence, not the answer: serve without them)
            logger.exception("clues failed; posteriors of this batch carry none")
            return [[] for _ in good]

    def _clue_records(self, clues: Any) -> list:
        """The batch's clues as each posterior carries them: their JSON made at once
        (:func:`clue_json`), else lists; none (logged) if both fail."""
        try:
            made = clue_json(clues)
        except Exception:  # noqa: BLE001 (a defect of the fast way: the lists say the same)
            logger.exception("clue JSON failed; this batch's clues are made as lists")
            made = None
        if made is not None:
            return made
        try:
            with gc_paused():
                return clues.lists()
        except Exception:  # noqa: BLE001 (clues are evidence, not the answer)
            logger.exception("clues failed; posteriors of this batch carry none")
            return [[] for _ in range(clues.n)]

    def _predict(self, model: Any, good: list[Decoded]) -> tuple[list[Decoded], np.ndarray]:
        """Log-posteriors of the batch; events the model cannot featurize become dead letters."""
        self._batch_clues = None
        good = keyed_events(model, good, self._dead)
        self.records = {d.event.id: d.record for d in good}  # for OversizeToDeadLetter
        if not good:
            return good, np.zeros((0, len(model.classes)))

        def predict(ds: list[Decoded], with_clues: bool = False) -> np.ndarray:
            batched = getattr(model, "predict_log_proba_and_clue_batch", None)
            if with_clues and batched is not None:
                model._name_places = True  # the words' places kept from the first batch on
            X = model.featurize([d.x for d in ds])
            if is_per_key(model):
                return model.predict_log_proba_many(X, [d.event.key for d in ds])
            if with_clues and batched is not None:
                try:  # one scoring for both
                    log_proba, clues = batched(X, self.clues)
                except Exception:  # noqa: BLE001 (asked apart below: a clue failure is _clues')
                    clues = None
                if clues is not None:
                    self._batch_clues = self._clue_records(clues)
                    return log_proba
            both = getattr(model, "predict_log_proba_and_clues_many", None)
            if with_clues and both is not None:
                try:  # one scoring for both
                    log_proba, self._batch_clues = both(X, self.clues)
                    return log_proba
                except Exception:  # noqa: BLE001 (asked apart below: a clue failure is _clues')
                    self._batch_clues = None
            return model.predict_log_proba_many(X)

        try:
            return good, predict(good, with_clues=bool(self.clues) and bool(model.classes))
        except Exception:  # noqa: BLE001 (one by one: serve the good events, letter the bad)
            self._batch_clues = None
            kept, rows = [], []
            for d in good:
                try:
                    rows.append(predict([d])[0])
                    kept.append(d)
                except LimitError as exc:
                    self._dead(dead_letter(d.record, "limit", str(exc)))
                except FeatureError as exc:
                    self._dead(dead_letter(d.record, "bad_feature", str(exc)))
                except Exception as exc:  # noqa: BLE001 (a learner bug must not stop the stream)
                    logger.exception("model failed on %s@%d", d.record.topic, d.record.offset)
                    self._dead(dead_letter(d.record, "model_error", f"{type(exc).__name__}: {exc}"))
            return kept, np.array(rows).reshape(len(rows), len(model.classes))

    def _dead(self, letter: DeadLetter) -> None:
        if self.observer is not None:
            self.observer.dead_letter(letter.reason)
        send_dead_letter(letter, self.stats.dead_letters, self.dead_letters)


class OversizeToDeadLetter:
    """The posterior sink of a :class:`PredictLoop`: a posterior too large for the sink (a huge
    id or key; :class:`~.sinks.MessageTooLarge`) is not sent; its event becomes a dead letter."""

    def __init__(self, sink: Sink, loop: PredictLoop) -> None:
        self.sink = sink
        self.loop = loop

    def send(self, topic: str, key: str | bytes | None, value: Any) -> None:
        try:
            self.sink.send(topic, key, value)
        except MessageTooLarge as exc:
            record = self.loop.records.get(getattr(value, "id", None))
            if record is None:
                raise
            self.loop._dead(dead_letter(record, "invalid_event", f"posterior not sent: {exc}"))
            self.loop.stats.posteriors -= 1  # the batch adds every event it served

    def flush(self) -> None:
        self.sink.flush()

    def unacknowledged(self) -> int | None:
        return unacknowledged(self.sink)

    def close(self) -> None:
        self.sink.close()


def run_predict(job: PredictJob, settings: Settings, stop: threading.Event | None = None,
                group_options: dict[str, Any] | None = None) -> PredictStats:
    """Build the parts of ``job`` and serve until the source ends (files) or ``stop`` is set."""
    from streambayes.runtime.kafka.connect import client_options, open_sink, open_source
    from streambayes.runtime.kafka.options import low_latency
    from streambayes.runtime.loops.learn import _decoder, per_key_bounds
    from streambayes.runtime.loops.spill import restore_model
    from streambayes.runtime.observe import observer_for
    from streambayes.runtime.records.limits import RecordLimits
    from streambayes.runtime.records.uri import KafkaURI, parse_uri

    stop = stop or threading.Event()
    if not job.snapshots:
        raise UsageError("predict needs --snapshots DIR[,DIR...]")
    if job.exactly_once:
        from streambayes.runtime.loops.exactly_once import run_exactly_once

        return run_exactly_once(job, settings, stop, group_options)
    stores = open_stores(job.snapshots, settings)
    consumer = low_latency(settings.kafka_client, "consumer", client_options(
        settings, "consumer")) if isinstance(parse_uri(job.source), KafkaURI) else {}
    source = open_source(job.source, settings, role="predict", fmt=job.format, stop=stop,
                         group_options={**consumer, **(group_options or {})}, follow=job.follow)
    is_file = isinstance(source, FileSource)
    try:
        decoder = _decoder(source, job, require_label=False,
                           limits=RecordLimits.from_settings(settings))
        producer = low_latency(settings.kafka_client, "producer", client_options(
            settings, "producer")) if isinstance(parse_uri(job.sink), KafkaURI) else {}
        sink = open_sink(job.sink, settings, stop=stop, defaults=producer)
        dead = open_sink(job.dead_letter, settings, stop=stop) if job.dead_letter else None
        wait = job.wait_seconds if job.wait_seconds is not None else (0.0 if is_file else None)
        try:
            restore = partial(restore_model, bounds=per_key_bounds(job), **store_options(settings))
            watcher = ModelWatcher(stores, restore, per_key=job.per_key)
            with observer_for(job, "predict", source) as observer:
                loop = PredictLoop(source, decoder, watcher, sink, dead_letters=dead,
                                   batch_size=job.batch_size, clues=job.clues,
                                   reload_seconds=job.reload_seconds, wait_seconds=wait,
                                   stop_at_end=is_file and not job.follow, stop=stop,
                                   loss=job.loss, calibrated=job.calibrated, freeze_gc=True,
                                   observer=observer)
                stats = loop.run()
        finally:
            sink[0].close()
            if dead is not None:
                dead[0].close()
    finally:
        source.close()
    stats.deleted = getattr(source, "deleted", 0)  # a group source's count, final once closed
    return stats
