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
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator, model_validator
from pydantic_core import PydanticCustomError, to_json

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
        out = cls(to_json(ordered, inf_nan_mode="null"))
        out.id = fields["id"]
        return out


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
