"""Record → validated event → ``(x, label, weight)``, or a dead letter saying why not.

Formats (DESIGN §6): ``jsonl`` is the event schema of §2 (``--label-field``/``--text-field``/
``--key-field`` rename fields of other JSON layouts); ``tsv`` is ``label<TAB>text`` (the SMS Spam
Collection); ``csv`` has a header row, a label column, an optional text column (``text_field``, or
a column literally named ``text``) and every other column a feature: numeric when it parses as a
finite number, categorical otherwise, missing (``None``) when empty. An event without an ``id``
(every TSV and CSV record, and JSONL events that carry none) gets a stable one from its source
position: ``"<file stem>-<offset>"`` in a file (offset = record number from 0), ``"<topic>-<partition>-
<offset>"`` on Kafka.

Dead-letter reasons: ``undecodable`` (not UTF-8), ``bad_json``, ``invalid_event`` (wrong types,
missing id, wrong field count...), ``missing_label``, ``empty_event`` (no text and no features),
``bad_feature`` (a feature named ``text``, a nested or non-finite value), ``limit`` (past one of
the :class:`~streambayes.runtime.records.limits.RecordLimits`: checked on the bytes before parsing, then
on the fields before validation). No exception of one record escapes :meth:`Decoder.decode` or
:meth:`Decoder.decode_many`: anything unexpected is that record's ``invalid_event``.

JSON is parsed by ``pydantic_core.from_json`` (jiter, already under pydantic): the same parser
as the batch fast path, so both agree on what is JSON (a lone surrogate escape is not); it never
recurses past 200 levels nor converts integers of more than 4,300 digits.

>>> from streambayes.runtime.records.sources import Record
>>> d = Decoder("tsv").decode(Record(b"spam\\tWIN cash", None, "data/sms", 0, 7, line=8))
>>> d.event.id, d.x, d.label, d.weight
('sms-7', {'text': 'WIN cash'}, 'spam', 1.0)
>>> Decoder("jsonl").decode(Record(b'{"id": 1, "text": "hi"}', None, "in.jsonl", 0, 0)).reason
'missing_label'
>>> parse_cell("3.5"), parse_cell(" 7 "), parse_cell("x.biz"), parse_cell(""), parse_cell("nan")
(3.5, 7, 'x.biz', None, 'nan')
"""

from __future__ import annotations

import base64
import csv
import functools
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import PurePath
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json

from streambayes.errors import UsageError
from streambayes.runtime.records.events import DeadLetter, DeadLetterReason, Event, SourcePosition
from streambayes.runtime.records.limits import RecordLimits
from streambayes.runtime.records.plain_batch import plain_texts
from streambayes.runtime.records.sources import Format, Record

_VALUE, _SIZE = attrgetter("value"), attrgetter("size")
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_FILE_SUFFIXES = frozenset({".gz", ".gzip", ".bz2", ".xz", ".zst", ".jsonl", ".json", ".ndjson",
                            ".csv", ".tsv", ".txt"})
_OWN_REASONS = frozenset({"bad_feature", "empty_event"})
MAX_ERROR_CHARS = 1000  # a dead letter's error message is cut to this length


_EVENT_BATCH = TypeAdapter(list[Event])


@dataclass(frozen=True, slots=True)
class Decoded:
    """A valid event and what the learner needs from it."""

    record: Record
    event: Event
    x: dict[str, Any]
    label: str | None
    weight: float


class Rejected(Exception):
    """Raised inside decoding to leave with a dead-letter reason (never escapes :meth:`decode`)."""

    def __init__(self, reason: DeadLetterReason, error: str) -> None:
        super().__init__(error)
        self.reason: DeadLetterReason = reason
        self.error = error


def parse_cell(cell: str) -> str | int | float | None:
    """A CSV cell as a feature value: int, finite float, else the (stripped) string; empty → None."""
    text = cell.strip()
    if not text:
        return None
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


def dead_letter(record: Record, reason: DeadLetterReason, error: str) -> DeadLetter:
    """The dead letter for ``record``: its position, line and original bytes (base64 if not UTF-8)."""
    try:
        payload, encoding = record.value.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        payload, encoding = base64.b64encode(record.value).decode("ascii"), "base64"
    if len(error) > MAX_ERROR_CHARS:
        error = error[:MAX_ERROR_CHARS] + "..."
    return DeadLetter(
        reason=reason, error=error, line=record.line, payload=payload, payload_encoding=encoding,
        source=SourcePosition(topic=record.topic, partition=record.partition, offset=record.offset))


class Decoder:
    """Decode records of one format; ``require_label`` makes a missing label a dead letter;
    ``limits`` bound what one record may hold (default :class:`RecordLimits`)."""

    def __init__(
        self,
        fmt: Format,
        *,
        label_field: str = "label",
        text_field: str | None = None,
        key_field: str | None = None,
        header: list[str] | None = None,
        require_label: bool = True,
        limits: RecordLimits | None = None,
    ) -> None:
        self.format = fmt
        self.limits = limits or RecordLimits()
        self.label_field = label_field
        self.text_field = text_field
        self.key_field = key_field
        self.require_label = require_label
        self._columns: dict[str, int] = {}
        self._plain_json = fmt == "jsonl" and label_field == "label" and \
            text_field in (None, "text") and key_field in (None, "key")
        if fmt == "csv":
            self._init_csv(header)

    def _init_csv(self, header: list[str] | None) -> None:
        if header is None:
            raise UsageError("a CSV decoder needs the file's header row")
        self.header = header
        self._columns = {name: i for i, name in enumerate(header)}
        if self.text_field is None and "text" in self._columns:
            self.text_field = "text"
        wanted = [("label", self.label_field) if self.require_label else None,
                  ("text", self.text_field), ("key", self.key_field)]
        for role, name in filter(None, wanted):
            if name is not None and name not in self._columns:
                raise UsageError(f"CSV has no {role} column {name!r} "
                                 f"(columns: {', '.join(header)})")
        self._feature_columns = [
            (name, i) for name, i in self._columns.items()
            if name not in (self.label_field, self.text_field, self.key_field)]
        if len(self._feature_columns) > self.limits.max_features:
            raise UsageError(f"CSV has {len(self._feature_columns)} feature columns, more than "
                             f"max_features ({self.limits.max_features}; set "
                             "STREAMBAYES_MAX_FEATURES to allow more)")

    def decode_many(self, records: Sequence[Record]) -> list[Decoded | DeadLetter]:
        """``decode`` of every record; plain JSONL records are validated as one batch.

        Fast path: one pydantic ``validate_json`` of the whole batch as a list of :class:`Event`
        (the same model, validators and all). If any record is past a byte-level limit or the
        batch fails to parse or validate in any way, every record of the batch is decoded by
        :meth:`decode`; an event past a field-level limit is decoded again alone. So the results
        are exactly those of ``decode``, one per record, and nothing raises.
        """
        if not self._plain_json or len(records) < 2:
            return [self.decode(r) for r in records]
        values = [r.value for r in records]
        joined = b"[" + b",".join(values) + b"]"
        if not self.limits.surely_raw_ok(values, joined):
            return [self.decode(r) for r in records]
        try:
            events = _EVENT_BATCH.validate_json(joined)
        except Exception:  # noqa: BLE001 (ValidationError, MemoryError...: record by record)
            return [self.decode(r) for r in records]
        if len(events) != len(records):  # a record such as '{...},{...}' spans two items
            return [self.decode(r) for r in records]
        out: list[Decoded | DeadLetter] = []
        for record, event in zip(records, events, strict=True):
            label = event.label if event.label and event.label.strip() else None
            if (label is None and self.require_label) or \
                    not self.limits.check_event(event, len(record.value)):
                out.append(self.decode(record))
            else:
                event = _with_id(event, record)
                out.append(Decoded(record, event, event.to_x(), label, event.weight))
        return out

    def plain_batch(self, records: Sequence[Record]) -> tuple[list[dict], list[str]] | None:
        """``(xs, labels)`` of a batch of plain labelled JSONL events, without an object per event
        (:mod:`~streambayes.runtime.records.plain_batch`); None: decode it by :meth:`decode_many`."""
        limits = self.limits  # a plain event nests 1 level and holds no number: only its size counts
        if not (self._plain_json and self.require_label) or len(records) < 2:
            return None
        values = list(map(_VALUE, records))  # (over the whole batch in C: no Python step per record)
        if max(map(len, values)) > limits.max_record_bytes or \
                list(map(_SIZE, records)).count(None) != len(records):  # a record's head only
            return None
        return plain_texts(values, b"[" + b",".join(values) + b"]", limits)

    def decode(self, record: Record) -> Decoded | DeadLetter:
        """The decoded event, or the dead letter that records why it is not one (never raises)."""
        try:
            return self._decode(record)
        except Rejected as rej:
            return dead_letter(record, rej.reason, rej.error)
        except Exception as exc:  # noqa: BLE001 (RecursionError, MemoryError...: this record only)
            return dead_letter(record, "invalid_event",
                               f"cannot decode the record: {type(exc).__name__}: {exc}")

    def _decode(self, record: Record) -> Decoded | DeadLetter:
        error = self.limits.check_raw(record.value, self.format, record.size)
        if error:
            raise Rejected("limit", error)
        try:
            text = record.value.decode("utf-8")
        except UnicodeDecodeError as exc:
            return dead_letter(record, "undecodable", f"not valid UTF-8: {exc}")
        fields = self._fields(text, record)
        error = self.limits.check_fields(fields, len(record.value))
        if error:
            raise Rejected("limit", error)
        event = _with_id(_validate(fields), record)
        label = event.label if event.label and event.label.strip() else None
        if label is None and self.require_label:
            raise Rejected("missing_label", f"event {event.id!r} has no label")
        return Decoded(record, event, event.to_x(), label, event.weight)

    def _fields(self, text: str, record: Record) -> dict[str, Any]:
        if self.format == "jsonl":
            return self._json_fields(text)
        if self.format == "tsv":
            return _tsv_fields(text, _default_id(record))
        return self._csv_fields(text, _default_id(record))

    def _json_fields(self, text: str) -> dict[str, Any]:
        try:
            obj = from_json(text)
        except ValueError as exc:
            raise Rejected("bad_json", f"invalid JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise Rejected("invalid_event", f"expected a JSON object, got {type(obj).__name__}")
        for target, name in (("label", self.label_field), ("text", self.text_field),
                             ("key", self.key_field)):
            if name is not None and name != target and name in obj:
                obj[target] = obj.pop(name)
        return obj

    def _csv_fields(self, text: str, event_id: str) -> dict[str, Any]:
        try:
            row = next(csv.reader(io.StringIO(text), strict=True))
        except (csv.Error, StopIteration) as exc:
            raise Rejected("invalid_event", f"bad CSV record: {exc}") from None
        if len(row) != len(self.header):
            raise Rejected("invalid_event",
                           f"expected {len(self.header)} fields as in the header, got {len(row)}")
        for name, i in self._feature_columns:
            error = self.limits.check_cell(name, row[i])
            if error:
                raise Rejected("limit", error)
        fields: dict[str, Any] = {
            "id": event_id,
            "features": {name: parse_cell(row[i]) for name, i in self._feature_columns},
        }
        for target, name in (("label", self.label_field), ("text", self.text_field),
                             ("key", self.key_field)):
            if name is not None and name in self._columns:
                fields[target] = row[self._columns[name]].strip() or None
        return fields


def _default_id(record: Record) -> str:
    """A stable id from the record's position: file stem and record number, or topic, partition
    and offset (a Kafka record has no line)."""
    if record.line is None:
        return f"{record.topic}-{record.partition}-{record.offset}"
    return f"{_file_stem(record.topic)}-{record.offset}"


@functools.lru_cache(maxsize=64)
def _file_stem(path: str) -> str:
    """The file's name without its data and compression suffixes (once per file, not per line)."""
    name = PurePath(path)
    while name.suffix.lower() in _FILE_SUFFIXES:
        name = name.with_suffix("")
    return name.name


def _with_id(event: Event, record: Record) -> Event:
    """``event`` with its default id if it has none; the event was just validated from ``record``
    and is shared with nobody, so the id is set in place (as ``model_copy(update=...)`` would set
    it, fields set included) at a fraction of a copy's cost per event."""
    if event.id is None:
        event.__dict__["id"] = _default_id(record)
        event.__pydantic_fields_set__.add("id")
    return event


def _tsv_fields(text: str, event_id: str) -> dict[str, Any]:
    label, tab, body = text.partition("\t")
    if not tab:
        raise Rejected("invalid_event", "expected label<TAB>text, found no TAB")
    return {"id": event_id, "label": label.strip() or None, "text": body}


def _validate(fields: dict[str, Any]) -> Event:
    try:
        return Event.model_validate(fields)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        kind = errors[0]["type"]
        reason: DeadLetterReason = kind if kind in _OWN_REASONS else "invalid_event"
        raise Rejected(reason, "; ".join(_describe(e) for e in errors[:3])) from None


def _describe(error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"])
    return f"field {where!r}: {error['msg']}" if where else error["msg"]
