"""Wire messages of DESIGN §2, validated with pydantic v2.

An event is what arrives on the learn or predict stream; a posterior is what the predictor
publishes; a dead letter is what bad input becomes. Validation errors carry a short ``type``
code (``bad_feature``, ``empty_event``) that :mod:`streambayes.runtime.records.decode` turns into the
dead letter's ``reason``.

>>> e = Event.model_validate({"id": "m-1", "label": "spam", "text": "WINNER!!",
...                           "features": {"n_links": 3}})
>>> e.to_x()
{'n_links': 3, 'text': 'WINNER!!'}
>>> Event.model_validate({"id": "m-2", "features": {"text": "x"}})
Traceback (most recent call last):
...
pydantic_core._pydantic_core.ValidationError: 1 validation error for Event
...
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator, model_validator
from pydantic_core import PydanticCustomError, to_json

if TYPE_CHECKING:
    from streambayes.models.clues import ClueBatch

DeadLetterReason = Literal[
    "bad_json", "invalid_event", "missing_label", "empty_event", "undecodable", "bad_feature",
    "model_error", "limit"]


MAX_WEIGHT = 1e12  # larger weights would push counts towards overflow (inf poisons a model)


def _as_text(value: Any) -> Any:
    """Accept an integer where a string is expected (ids and labels such as ``0``/``1``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


class Event(BaseModel):
    """An event of the learn or predict stream; ``label`` is optional here (prediction).

    An event needs text or at least one non-null feature. ``features`` may not contain a
    field named ``text`` (that name is the event's text), and
    its values must be str, bool, int, float or null; ``weight`` must be finite and > 0.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: StrictStr | None = None  # the decoder fills a missing id from the source position
    key: StrictStr | None = None
    ts: datetime | None = None
    label: StrictStr | None = None
    text: StrictStr | None = None
    features: dict[str, Any] = Field(default_factory=dict)
    weight: Annotated[float, Field(gt=0, le=MAX_WEIGHT, allow_inf_nan=False, strict=True)] = 1.0

    @field_validator("id", "key", "label", mode="before")
    @classmethod
    def _ints_as_text(cls, value: Any) -> Any:
        return _as_text(value)

    @field_validator("features")
    @classmethod
    def _check_features(cls, features: dict[str, Any]) -> dict[str, Any]:
        for name, value in features.items():
            if name == "text":
                raise PydanticCustomError(
                    "bad_feature", "a feature may not be named 'text' (use the event's text field)")
            if value is not None and not isinstance(value, (str, bool, int, float)):
                raise PydanticCustomError(
                    "bad_feature",
                    "feature '{name}': expected str, bool, int, float or null, got {got}",
                    {"name": name, "got": type(value).__name__})
            if isinstance(value, float) and not math.isfinite(value):
                raise PydanticCustomError(
                    "bad_feature", "feature '{name}': number must be finite, got {got}",
                    {"name": name, "got": value})
        return features

    @model_validator(mode="after")
    def _not_empty(self) -> Event:
        if not self.text and all(v is None for v in self.features.values()):
            raise PydanticCustomError("empty_event", "event has no text and no feature values")
        return self

    def to_x(self) -> dict[str, Any]:
        """The learner's ``x`` dict: the features, plus ``"text"`` when the event has text."""
        x = dict(self.features)
        if self.text:
            x["text"] = self.text
        return x


class LabelledEvent(Event):
    """An event of the learn stream: ``label`` is required."""

    label: StrictStr


class Posterior(BaseModel):
    """What the predictor publishes for one event, keyed by the event's ``key`` or ``id``."""

    model_config = ConfigDict(frozen=True)

    id: str
    key: str | None = None
    model: str
    snapshot: str | None = None
    posterior: dict[str, float]
    decision: str | None = None
    clues: list[tuple[str, float]] = Field(default_factory=list)
    latency_ms: float | None = None
    calibration_alpha: float | None = None  # posterior = P_raw^α / Σ P_raw^α when set
    raw_log_proba: dict[str, float | None] | None = None  # the model's own log-posterior (None: -inf)


class PosteriorJSON(bytes):
    """A :class:`Posterior` already serialized: the bytes ``Posterior(**fields).model_dump_json()``
    gives, without building and validating the model (the predictor's hot path: 2 us an event
    against 5, clues included). ``id`` is kept for the loops. The fields must be what the model
    would hold: str, float (a non-finite one is written ``null``, as the model does), None,
    and dicts and lists of them.

    >>> fields = dict(id="m-1", model="nb", posterior={"ham": 0.25, "spam": 0.75},
    ...               decision="spam", clues=[("tok:win", 1.5)])
    >>> PosteriorJSON.of(**fields) == Posterior(**fields).model_dump_json().encode()
    True
    """

    id: str

    @classmethod
    def of(cls, **fields: Any) -> PosteriorJSON:
        unknown = fields.keys() - _POSTERIOR_DEFAULTS.keys()
        missing = _POSTERIOR_REQUIRED - fields.keys()
        if unknown or missing:
            raise TypeError(f"Posterior has no field {sorted(unknown)[0]!r}" if unknown else
                            f"Posterior needs the field {sorted(missing)[0]!r}")
        ordered = {name: fields.get(name, default) for name, default in _POSTERIOR_DEFAULTS.items()}
        clues = ordered["clues"]
        if isinstance(clues, bytes):  # the clues' JSON already (clue_json): spliced in
            ordered["clues"] = []
            out = cls(to_json(ordered, inf_nan_mode="null").replace(b'"clues":[]', b'"clues":' + clues, 1))
        else:
            out = cls(to_json(ordered, inf_nan_mode="null"))
        out.id = fields["id"]
        return out


SMALL_CLUES = 256  # fewer clues in a batch: clue_json writes them from their lists


def clue_json(clues: ClueBatch) -> list[bytes] | None:
    """Each event's clues as the JSON ``Posterior`` writes them (``[["tok:win",1.5],...]``, the
    bytes of ``to_json(clues.lists()[i], inf_nan_mode="null")``), made for the whole batch at
    once, with no string, float or tuple per clue: the terms written by one ``to_json`` of them
    all and cut at the commas; then the output is one gather of byte runs (the names from the
    texts' UTF-8 bytes, the terms, the brackets, quotes and commas between them), cut into one
    ``bytes`` per event. None when the names are not all words of the texts, or one would need
    escaping in JSON (a quote, a backslash, a control character): ``lists()`` then. Fewer than
    :data:`SMALL_CLUES` clues (a few events: the predictor at low load) are written from their
    lists at once, which costs less than the passes' fixed cost there.

    A ``bytes`` given as ``clues`` to :meth:`PosteriorJSON.of` is spliced in as it is.
    """
    n, m = clues.n, len(clues.picked)
    if not m:
        return [b"[]"] * n
    if m < SMALL_CLUES:  # a few: the lists' own JSON costs less than the numpy passes' fixed cost
        return [to_json(c, inf_nan_mode="null") for c in clues.lists()]
    spans = clues.name_spans()
    if spans is None:
        return None
    buf, starts, ends, prefix = spans
    terms = np.frombuffer(to_json(clues.values.tolist(), inf_nan_mode="null"), np.uint8)[1:-1]
    cuts = np.flatnonzero(terms == 0x2C)  # a number has no comma
    term_at = np.r_[0, cuts + 1]
    term_len = np.r_[cuts, len(terms)] - term_at
    # the byte runs: buf, the terms, then the punctuation
    head = b'["' + prefix.encode()
    marks = b"[" + head + b"," + head + b'",' + b"]]" + b"[]"
    first_head, later_head = len(buf) + len(terms), len(buf) + len(terms) + 1 + len(head)
    quote_comma = later_head + 1 + len(head)
    close = quote_comma + 2  # "]]": the last clue of an event; "]" the others
    empty = close + 2
    source = np.concatenate([buf, terms, np.frombuffer(marks, np.uint8)])
    bounds = clues.bounds
    counts = np.diff(bounds)
    is_first = np.zeros(m, bool)
    is_first[bounds[:-1][counts > 0]] = True
    is_last = np.zeros(m, bool)
    is_last[bounds[1:][counts > 0] - 1] = True
    # five runs a clue: [["tok: or ,["tok: | name | ", | term | ]] or ]
    runs = np.empty((m, 5), np.int64)
    lengths = np.empty((m, 5), np.int64)
    runs[:, 0] = np.where(is_first, first_head, later_head)
    lengths[:, 0] = len(head) + 1
    runs[:, 1], lengths[:, 1] = starts, ends - starts
    runs[:, 2], lengths[:, 2] = quote_comma, 2
    runs[:, 3], lengths[:, 3] = len(buf) + term_at, term_len
    runs[:, 4], lengths[:, 4] = close, np.where(is_last, 2, 1)
    nothing = np.flatnonzero(counts == 0)  # an event without clues: one run "[]"
    if len(nothing):
        before = np.cumsum(counts == 0) - (counts == 0)  # events without clues before each
        at = np.empty(5 * m + len(nothing), np.int64)
        at[:5 * m] = (np.arange(5 * m) + np.repeat(before[np.repeat(np.arange(n), counts)], 5))
        at[5 * m:] = 5 * bounds[nothing] + before[nothing]
        run = np.empty(len(at), np.int64)
        size = np.empty(len(at), np.int64)
        run[at[:5 * m]], size[at[:5 * m]] = runs.reshape(-1), lengths.reshape(-1)
        run[at[5 * m:]], size[at[5 * m:]] = empty, 2
        first_run = 5 * bounds[:-1] + before
    else:
        run, size = runs.reshape(-1), lengths.reshape(-1)
        first_run = 5 * bounds[:-1]
    out = source[_ragged(run, size)]
    if np.count_nonzero(out == 0x22) != 2 * m or (out == 0x5C).any() or out.min() < 0x20:
        return None  # a name JSON would escape: the ordinary way
    offsets = np.zeros(len(size) + 1, np.int64)
    np.cumsum(size, out=offsets[1:])
    edges = np.append(offsets[first_run], len(out)).tolist()
    whole = out.tobytes()
    return [whole[a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]


def _ragged(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices ``starts[i] … starts[i] + lengths[i] - 1`` of every i, in order: ones with a
    jump at each run's first index, summed."""
    keep = lengths > 0
    if not keep.all():
        starts, lengths = starts[keep], lengths[keep]
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    steps = np.ones(total, np.int64)
    firsts = np.cumsum(lengths[:-1])
    steps[0] = starts[0]
    steps[firsts] = starts[1:] - (starts[:-1] + lengths[:-1] - 1)
    return np.cumsum(steps, out=steps)


_POSTERIOR_DEFAULTS = {name: (field.get_default(call_default_factory=True)
                              if not field.is_required() else None)
                       for name, field in Posterior.model_fields.items()}
_POSTERIOR_REQUIRED = {name for name, field in Posterior.model_fields.items() if field.is_required()}


class SourcePosition(BaseModel):
    """Where a record came from: topic (or file path), partition and offset."""

    model_config = ConfigDict(frozen=True)

    topic: str
    partition: int
    offset: int


class DeadLetter(BaseModel):
    """Bad input, kept with its reason: never silently dropped (DESIGN §2).

    ``payload`` is the original record as text, or base64 when it is not valid UTF-8
    (``payload_encoding`` says which); ``line`` is the 1-based line number in a file source.

    >>> d = DeadLetter(reason="bad_json", error="Expecting value", line=3,
    ...                source=SourcePosition(topic="in.jsonl", partition=0, offset=2),
    ...                payload="{oops")
    >>> d.model_dump()["source"]
    {'topic': 'in.jsonl', 'partition': 0, 'offset': 2}
    """

    model_config = ConfigDict(frozen=True)

    reason: DeadLetterReason
    error: str
    source: SourcePosition
    line: int | None = None
    payload: str
    payload_encoding: Literal["utf-8", "base64"] = "utf-8"
    # set only on a dead letter truncated to fit its sink (absent otherwise): the full payload's
    # size in bytes and sha256 (hex), and ``payload`` then holds its head only
    truncated: bool | None = Field(default=None, exclude_if=lambda v: v is None)
    payload_bytes: int | None = Field(default=None, exclude_if=lambda v: v is None)
    payload_sha256: str | None = Field(default=None, exclude_if=lambda v: v is None)
