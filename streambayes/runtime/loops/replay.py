"""Replay: read a source to its end and evaluate models prequentially (DESIGN §4, §6).

Records are polled in mini-batches that grow from 1 (1, 2, 4, ... up to ``batch_size``), so even
a stream shorter than one batch gets every metric; each batch is decoded and validated (bad ones
go to the dead-letter sink with their reason), and the good events go through
:class:`~streambayes.evaluate.prequential.Prequential`, which is prequential per event: every
event is predicted by the model of all events before it, then learned. The count text models on
plain counts (``nb`` on text, ``mnb``, ``cnb``; see :mod:`streambayes.models.prequential_block`)
do this exactly for a whole batch at mini-batch speed; any other model predicts a batch with
the model of the batch's start. By default (``batch_size=None``) batches grow to
:data:`DEFAULT_BATCH_SIZE` while every model predicts per event, and to
:data:`BATCH_PATH_SIZE` while some model predicts batches. Events a model cannot featurize are
dead-lettered as ``bad_feature``. Nothing bad stops the replay; the result counts it all.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from streambayes.config import Settings
from streambayes.errors import FeatureError, ModelError, UsageError
from streambayes.evaluate.prequential import KEY, Learner, Prequential
from streambayes.models.usage import FieldKinds, unused_warning, usage
from streambayes.runtime.loops.build import build_models  # noqa: F401 (the CLI names, re-exported)
from streambayes.runtime.loops.report import print_summary, progress, write_report
from streambayes.runtime.records.decode import Decoded, Decoder, dead_letter
from streambayes.runtime.records.events import DeadLetter
from streambayes.runtime.records.limits import RecordLimits
from streambayes.runtime.records.sinks import FileSink, Sink
from streambayes.runtime.records.sources import FileSource, Format, Source

DEAD_LETTER_TOPIC = "dead-letters"
DEFAULT_DEAD_LETTER_FILE = "streambayes-dead-letters.jsonl"
logger = logging.getLogger(__name__)
# the largest mini-batch by default while every model predicts per event (prequential_block): the
# block size changes speed and memory only (enron1-3: the same 0.9834 at 8, 256 and 1024; 256 and
# 1024 equally fast within the noise, 1024 about 50 MB more resident)
DEFAULT_BATCH_SIZE = 256
# ... and while some model predicts a batch with the model of its start: small, so its scores stay
# close to per-event ones on streams that change (enron1-3 with alpha=1: 0.9828 at 8, 0.9798 at 256)
BATCH_PATH_SIZE = 8


@dataclass
class ReplayResult:
    """What a replay did: the evaluation, the record counts and where dead letters went."""

    source: str
    run: Prequential
    records: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)
    dead_letter_path: Path | None = None
    seconds: float = 0.0
    batch_size: int = DEFAULT_BATCH_SIZE  # the largest mini-batch; batches grow 1, 2, 4, ... up to it
    batches: int = 0
    largest: int = 0  # the largest mini-batch polled
    fields: FieldKinds = field(default_factory=FieldKinds)  # the events' fields and their kinds
    models: Mapping[str, Any] = field(default_factory=dict)

    def fields_used(self) -> dict[str, list[str] | None]:
        """The fields each model could learn from (None: a model that cannot tell)."""
        return usage(self.models, self.fields)

    @property
    def events(self) -> int:
        return self.run.events

    def metrics(self) -> dict[str, Any]:
        """The ``metrics.json`` document of DESIGN §6 (plus counts and labels)."""
        n_dead = sum(self.dead_letters.values())
        used = self.fields_used()
        models = {name: {**values, "dead_letters": n_dead, "fields_used": used.get(name)}
                  for name, values in self.run.summary().items()}
        return {
            "source": self.source,
            "records": self.records,
            "events": self.events,
            "dead_letters": n_dead,
            "dead_letters_by_reason": dict(sorted(self.dead_letters.items())),
            "dead_letter_file": str(self.dead_letter_path) if n_dead else None,
            "labels": dict(sorted(self.run.labels.items(), key=lambda kv: str(kv[0]))),
            "positive": self.run.positive_label,
            "seconds": self.seconds,
            "batching": {"growing_from": 1, "max_batch_size": self.batch_size,
                         "largest_batch": self.largest, "batches": self.batches,
                         "events_predicted_per_event": dict(self.run.per_event_events)},
            "models": models,
        }


class KeyedLearner:
    """A :class:`~streambayes.models.perkey.PerKeyModel` behind the prequential learner protocol:
    each event's key rides in its ``x`` dict under :data:`~streambayes.evaluate.prequential.KEY`.
    An event without a key cannot be featurized (a ``bad_feature`` dead letter naming why)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def classes(self) -> list:
        return self.inner.classes

    def featurize(self, xs: Sequence[dict]) -> tuple[list[str], Any]:
        keys = [x.get(KEY) for x in xs]
        for i, key in enumerate(keys):
            if not isinstance(key, str) or not key:
                raise FeatureError(f"--per-key needs a key for every event; event {i} of the batch has "
                                   "none (give events a 'key', or name a field with --key-field)")
        return keys, self.inner.featurize([{k: v for k, v in x.items() if k != KEY} for x in xs])

    def predict_log_proba_many(self, X: tuple[list[str], Any]) -> Any:
        keys, batch = X
        return self.inner.predict_log_proba_many(batch, keys)

    def learn_many(self, X: tuple[list[str], Any], y: Sequence, w: Sequence[float] | None = None) -> None:
        keys, batch = X
        self.inner.learn_many(batch, y, w, keys=keys)


def per_key_models(names: Sequence[str], backoff: float = 20.0,
                   bounds: Mapping[str, int | None] | None = None,
                   spill_dir: Path | None = None,
                   base_params: Mapping[str, int] | None = None) -> dict[str, Learner]:
    """One backed-off per-key learner for each model name (``bn`` is not supported per key);
    with ``spill_dir`` the learners past ``bounds`` spill to files under ``spill_dir/NAME``."""
    from streambayes.models import MODEL_NAMES
    from streambayes.models.perkey import PerKeyModel

    models: dict[str, Learner] = {}
    for name in names:
        if name in models:
            raise UsageError(f"model {name!r} is given twice")
        if name not in MODEL_NAMES or name == "bn":
            valid = ", ".join(n for n in MODEL_NAMES if n != "bn")
            raise UsageError(f"model {name!r} cannot run per key (valid: {valid})")
        spill = None
        if spill_dir is not None:
            from streambayes.runtime.loops.spill import DiskSpillStore

            spill = DiskSpillStore(spill_dir / name)
        models[name] = KeyedLearner(PerKeyModel(base=name, backoff=backoff, spill=spill,
                                                base_params=base_params, **(bounds or {})))
    return models


def replay(
    source: Source,
    decoder: Decoder,
    models: Mapping[str, Learner],
    dead_letters: Sink,
    *,
    batch_size: int | None = None,
    limit: int | None = None,
    positive: str | None = None,
    on_batch: Callable[[ReplayResult], None] | None = None,
    topic: str = "",
    loss: Any = None,
    per_key: bool = False,
    label_delay: int | None = None,
) -> ReplayResult:
    """Prequential replay of ``source`` until it is exhausted or ``limit`` records were read.

    With ``loss`` (a :class:`~streambayes.decide.LossMatrix`) every prediction is also decided
    and the summary gains ``expected_cost`` and ``unsure_rate``. ``batch_size`` bounds the
    mini-batches (default: see the module docstring)."""
    auto = batch_size is None
    batch_size = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    if batch_size < 1:
        raise UsageError(f"batch size must be at least 1, got {batch_size}")
    if label_delay is None:
        run: Prequential = Prequential(models, positive, loss)
    else:  # labels arrive label_delay events late; sliding/fading accuracy and ADWIN drift points
        from streambayes.evaluate.delayed import DelayedPrequential

        if label_delay < 0:
            raise UsageError(f"--label-delay must be >= 0, got {label_delay}")
        run = DelayedPrequential(models, label_delay, positive, loss=loss)
    result = ReplayResult(topic, run, batch_size=batch_size, models=models)
    by_position: dict[int, Decoded] = {}  # delayed runs reject by stream position
    start = time.perf_counter()
    grow = 1  # batches grow 1, 2, 4, ...: the first events are scored by an up-to-date model
    while limit is None or result.records < limit:
        cap = batch_size if not auto or not result.run.batched else min(batch_size, BATCH_PATH_SIZE)
        want = min(grow, cap) if limit is None else min(grow, cap, limit - result.records)
        grow = min(grow * 2, batch_size)
        result.largest = max(result.largest, want)
        records = source.poll(want)
        if not records:
            break
        result.records += len(records)
        result.batches += 1
        good: list[Decoded] = []
        for item in decoder.decode_many(records):
            if isinstance(item, DeadLetter):
                _send(dead_letters, result, item)
            else:
                good.append(item)
        first = good and not result.fields.values
        result.fields.observe(d.x for d in good)
        if first:  # the first events: warn of models that see nothing
            for name, used in result.fields_used().items():
                if used == [] and result.fields.values:
                    logger.warning(unused_warning(name, result.fields))
        try:
            xs = [{**d.x, KEY: d.event.key} for d in good] if per_key else [d.x for d in good]
            base = getattr(result.run, "position", None)
            if base is not None:
                by_position.update((base + i, d) for i, d in enumerate(good))
            rejected = result.run.step(xs, [d.label for d in good],
                                       [d.weight for d in good]) if good else []
        except ModelError as exc:
            if loss is None:
                raise
            raise UsageError(f"--loss: {exc}") from None
        for rej in rejected:
            bad = good[rej.index] if base is None else by_position[rej.index]
            _send(dead_letters, result, dead_letter(bad.record, rej.reason, rej.error))
        if base is not None:  # keep only events whose labels may still be learned
            oldest = result.run.position - result.run.pending - batch_size
            for position in [p for p in by_position if p < oldest]:
                del by_position[position]
        if on_batch is not None:
            on_batch(result)
    dead_letters.flush()
    result.seconds = time.perf_counter() - start
    return result


def _send(sink: Sink, result: ReplayResult, letter: DeadLetter) -> None:
    sink.send(DEAD_LETTER_TOPIC, None, letter)
    result.dead_letters[letter.reason] += 1


@dataclass(frozen=True)
class FileReplay:
    """Everything ``streambayes replay FILE`` needs, as plain values (built by the CLI)."""

    path: Path | str  # a file, or kafka://HOST:PORT/TOPIC?from=...&to=...
    models: tuple[str, ...] = ("nb",)
    format: Format | None = None
    label_field: str = "label"
    text_field: str | None = None
    key_field: str | None = None
    limit: int | None = None
    batch_size: int | None = None  # None: the default of replay()
    positive: str | None = None
    dead_letter: Path | None = None
    report: Path | None = None
    network: Path | None = None
    loss: Any = None  # a streambayes.decide.LossMatrix
    per_key: bool = False  # one model per event key, backed off to a global model
    label_delay: int | None = None  # labels arrive this many events after their event
    max_resident: int | None = None  # --per-key: live per-key learners (the rest spill to disk)
    max_resident_bytes: int | None = None  # --per-key: bytes of the live per-key learners
    max_keys: int | None = None  # --per-key: keys ever learned (new keys past it: dead letters)
    bounds: Mapping[str, int] | None = None  # max_classes, max_fields, max_values (else defaults)


def replay_file(job: FileReplay, console: Console | None = None,
                progress: bool | None = None, settings: Settings | None = None) -> ReplayResult:
    """Replay a file or a Kafka range, print the summary, and write the report when asked."""
    console = console or Console(width=None if sys.stdout.isatty() else 140)  # files: no wrapping
    if job.limit is not None and job.limit < 0:
        raise UsageError(f"--limit must be >= 0, got {job.limit}")
    with ExitStack() as stack:
        models = _replay_models(job, stack)
        return _replay_with(job, models, console, progress, settings)


def _replay_models(job: FileReplay, stack: ExitStack) -> dict[str, Learner]:
    """The models of ``job``; per-key ones spill to a temporary directory removed at the end."""
    if not job.per_key:
        return build_models(job.models, job.network, job.label_field, job.bounds)
    from streambayes.runtime.loops.learn import per_key_bounds

    spill = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="streambayes-spill-")))
    return per_key_models(job.models, bounds=per_key_bounds(job), spill_dir=spill,
                          base_params=job.bounds)


def _replay_with(job: FileReplay, models: dict[str, Learner], console: Console,
                 show: bool | None, settings: Settings | None) -> ReplayResult:
    settings = settings or Settings()
    with open_input(job, settings) as source:
        fmt, header = (source.format, source.header) if isinstance(source, FileSource) else \
            (job.format or "jsonl", None)
        decoder = Decoder(fmt, label_field=job.label_field, text_field=job.text_field,
                          key_field=job.key_field, header=header,
                          limits=RecordLimits.from_settings(settings))
        dl_path = job.dead_letter or (job.report / "dead_letters.jsonl" if job.report
                                      else Path(DEFAULT_DEAD_LETTER_FILE))
        Path(dl_path).unlink(missing_ok=True)  # this replay's letters only (the file opens lazily)
        sink_file = FileSink(dl_path, mode="w", max_line_bytes=settings.sink_max_line_bytes)
        with sink_file as sink, progress(source, show) as tick:
            result = replay(source, decoder, models, sink, batch_size=job.batch_size,
                            limit=job.limit, positive=job.positive, on_batch=tick,
                            topic=source.topic, loss=job.loss, per_key=job.per_key,
                            label_delay=job.label_delay)
        result.dead_letter_path = dl_path
    print_summary(result, console)
    if job.report is not None:
        written = write_report(result, job.report)
        console.print(f"report: {', '.join(str(p) for p in written)}")
    return result


@contextmanager
def open_input(job: FileReplay | Any, settings: Settings) -> Iterator[Source]:
    """The source of ``job.path`` (``job.format``): a file, or a bounded range of a Kafka topic."""
    from streambayes.runtime.records.uri import KafkaURI, parse_uri

    target = parse_uri(str(job.path)) if isinstance(job.path, str) else job.path
    if not isinstance(target, KafkaURI):
        with FileSource(target, job.format, max_line_bytes=settings.max_record_bytes) as source:
            yield source
        return
    if job.format == "csv":
        raise UsageError("a Kafka topic carries JSONL or TSV records, not CSV")
    from streambayes.runtime.kafka.connect import open_source
    from streambayes.runtime.kafka.ranges import KafkaRange

    kafka = open_source(KafkaURI(target.bootstrap, target.topic), settings, role="replay")
    source = KafkaRange(kafka, target.query.get("from"), target.query.get("to"))
    try:
        yield source
    finally:
        source.close()
