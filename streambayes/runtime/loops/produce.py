"""``streambayes produce``: load a data file into a Kafka topic (or a JSONL file), keyed.

JSONL lines are sent as they are (a bad line is sent too: the consumer dead-letters it with its
original bytes, so nothing is lost or silently repaired). TSV and CSV records become events of
DESIGN §2 (``id``, ``label``, ``text``, ``features``); a record that cannot be converted is sent
as its original bytes. The message key is the event's ``key`` (or ``--key-field``), else its
``id``; with ``drop_label`` the label is removed (an unlabelled stream for ``predict``). A line
longer than ``STREAMBAYES_MAX_RECORD_BYTES`` is never read whole: its head is sent (the consumer
dead-letters it as ``limit``) and a warning names its line and size.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from streambayes.config import Settings
from streambayes.runtime.records.decode import Decoder
from streambayes.runtime.records.events import DeadLetter
from streambayes.runtime.records.limits import RecordLimits
from streambayes.runtime.records.sources import FileSource, Format, Record
from streambayes.runtime.records.uri import KafkaURI, parse_uri

FLUSH_EVERY = 20_000
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProduceJob:
    path: Path
    to: str
    format: Format | None = None
    label_field: str = "label"
    text_field: str | None = None
    key_field: str | None = None
    drop_label: bool = False
    limit: int | None = None
    partitions: int | None = None  # create the topic with this many partitions if it is missing


def _message(record: Record, decoder: Decoder, job: ProduceJob) -> tuple[str | None, bytes]:
    """The key and value to send for one record of the file."""
    decoded = decoder.decode(record)
    if isinstance(decoded, DeadLetter):
        return None, record.value
    event = decoded.event
    if decoder.format == "jsonl" and not job.drop_label and job.key_field is None:
        return event.key or event.id, record.value
    fields = event.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    fields["id"] = event.id
    if job.drop_label:
        fields.pop("label", None)
    value = json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return event.key or event.id, value


def produce_file(job: ProduceJob, settings: Settings, stop: threading.Event | None = None) -> int:
    """Send every record of ``job.path`` (up to ``limit``) to ``job.to``; returns the count sent."""
    from streambayes.runtime.kafka.connect import backend, client_options, open_sink, wait_for_broker

    target = parse_uri(job.to, allowed_query=())
    if isinstance(target, KafkaURI) and job.partitions:
        module = backend(settings)
        options = client_options(settings, "admin")
        wait_for_broker(target.bootstrap, settings, stop)
        module.create_topic(target.bootstrap, target.topic, job.partitions, options=options)
    sent = 0
    with FileSource(job.path, job.format, max_line_bytes=settings.max_record_bytes) as source:
        decoder = Decoder(source.format, label_field=job.label_field, text_field=job.text_field,
                          key_field=job.key_field, header=source.header, require_label=False,
                          limits=RecordLimits.from_settings(settings))
        sink, topic = open_sink(target, settings, stop=stop)
        try:
            while job.limit is None or sent < job.limit:
                want = 5000 if job.limit is None else min(5000, job.limit - sent)
                records = source.poll(want)
                if not records:
                    break
                for record in records:
                    if record.size is not None:
                        logger.warning("%s line %s has %d bytes, more than max_record_bytes (%d): "
                                       "only its first %d are sent", job.path, record.line,
                                       record.size, settings.max_record_bytes, len(record.value))
                    key, value = _message(record, decoder, job)
                    sink.send(topic, key, value)
                sent += len(records)
                if sent % FLUSH_EVERY < len(records):
                    sink.flush()
        finally:
            sink.close()
    return sent
