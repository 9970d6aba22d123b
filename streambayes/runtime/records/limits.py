"""Per-record resource limits: what one record may hold before it becomes a ``limit`` dead letter.

The byte-level limits (size, JSON nesting, digits of a number literal) are checked on the raw
record before it is parsed, so no record can make the parser recurse deeply or convert an
integer of thousands of digits; the field-level limits (text length, number of features,
magnitude of a number, weight...) are checked on the parsed fields before validation. A check
returns ``None`` or a one-line message naming the limit, its value and what the record had.

>>> limits = RecordLimits(max_json_depth=3)
>>> limits.check_raw(b'{"a": [[[1]]]}', "jsonl")
'max_json_depth is 3: the record nests 4 levels deep'
>>> limits.check_raw(b'{"text": "[[[[[ in a string ]]]]]"}', "jsonl") is None
True
>>> limits.check_fields({"id": "a", "text": "t", "features": {"n": 10**120}})
"max_abs_number is 1e+100: feature 'n' has a number of magnitude 1e+120"
>>> limits.check_fields({"id": "a", "text": "t", "weight": 5000.0})
'max_weight is 1000: the event has weight 5000'
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from streambayes.errors import UsageError
from streambayes.features.batch import MAX_ABS_VALUE

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)  # a JSON string literal, escapes and all
_OPEN, _CLOSE = np.frombuffer(b"[{", np.uint8), np.frombuffer(b"]}", np.uint8)
_STRING_FIELDS = ("id", "key", "label")
_DIGITS = bytes(0x31 if 0x30 <= c <= 0x39 else 0x30 for c in range(256))  # digit → "1", else "0"


@dataclass(frozen=True)
class RecordLimits:
    """Limits on one record; a record past any of them is a dead letter with reason ``limit``.

    Defaults, and the setting that changes each (``STREAMBAYES_`` + the name in capitals):

    - ``max_record_bytes`` = 1,048,576 (1 MiB): size of the record (a file's line) in bytes.
    - ``max_json_depth`` = 32: nesting of JSON arrays and objects, counted on the bytes outside
      string literals before parsing (an event is 2 deep: the event and its ``features``; the
      JSON parser has its own hard bound of 200 underneath).
    - ``max_number_digits`` = 100: digits in one run of a number literal (a JSON number or a CSV
      cell), counted before parsing, so no integer of thousands of digits is ever converted.
    - ``max_abs_number`` = 1e100: magnitude of a numeric feature. It may not exceed the features
      layer's bound (:data:`~streambayes.features.batch.MAX_ABS_VALUE`, also 1e100), which keeps
      the sums of squares of the Gaussian summaries (≤ total weight x 4e200) finite in float64.
    - ``max_features`` = 1,000: entries of an event's ``features`` (a CSV header with more
      feature columns is a usage error).
    - ``max_text_chars`` = 1,000,000: characters of the event's text (real mails reach 230,000).
    - ``max_string_chars`` = 1,000: characters of the id, key, label, a feature's name and a
      categorical value.
    - ``max_weight`` = 1,000: an event's weight (which must also be finite and > 0), so that a
      few heavy events cannot outweigh a stream. At most 1e12 (the event schema's bound).
    """

    max_record_bytes: int = 1 << 20
    max_json_depth: int = 32
    max_number_digits: int = 100
    max_abs_number: float = 1e100
    max_features: int = 1000
    max_text_chars: int = 1_000_000
    max_string_chars: int = 1000
    max_weight: float = 1e3

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise UsageError(f"record limit {f.name} must be a positive number, got {value!r}")
        if self.max_abs_number > MAX_ABS_VALUE:
            raise UsageError(f"record limit max_abs_number may be at most {MAX_ABS_VALUE:g}, "
                             f"got {self.max_abs_number:g}")
        if self.max_weight > 1e12:
            raise UsageError(f"record limit max_weight may be at most 1e12, got {self.max_weight:g}")

    @classmethod
    def from_settings(cls, settings: Any) -> RecordLimits:
        """The limits a :class:`~streambayes.config.Settings` holds (same names)."""
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls)})

    def check_raw(self, value: bytes, fmt: str, size: int | None = None) -> str | None:
        """The first byte-level limit ``value`` passes (size; for JSON, depth and digits);
        ``size`` is the record's full size when ``value`` is only its head."""
        if size is not None and size > len(value):
            return (f"max_record_bytes is {self.max_record_bytes}: the record has {size} bytes "
                    f"(only its first {len(value)} were read)")
        if len(value) > self.max_record_bytes:
            return f"max_record_bytes is {self.max_record_bytes}: the record has {len(value)} bytes"
        if fmt != "jsonl":
            return None  # TSV has no numbers; CSV cells are checked one by one
        deep = value.count(b"[") + value.count(b"{") > self.max_json_depth
        long_number = _has_digit_run(value, self.max_number_digits + 1)
        if not deep and not long_number:
            return None
        skeleton = _STRING.sub(b'""', value)  # brackets and digits inside strings do not count
        if deep:
            depth = json_depth(skeleton)
            if depth > self.max_json_depth:
                return f"max_json_depth is {self.max_json_depth}: the record nests {depth} levels deep"
        if long_number:
            digits = max((len(m) for m in re.findall(rb"\d+", skeleton)), default=0)
            if digits > self.max_number_digits:
                return (f"max_number_digits is {self.max_number_digits}: the record has a number "
                        f"of {digits} digits")
        return None

    def surely_raw_ok(self, values: Sequence[bytes], joined: bytes) -> bool:
        """True when no JSON record of ``values`` (``joined`` is them all, comma-separated) can be
        past a byte-level limit: a quick test for a whole batch; False means "check one by one"."""
        depth, size = self.max_json_depth, self.max_record_bytes
        if any(len(v) > size or v.count(b"[") + v.count(b"{") > depth for v in values):
            return False
        return not _has_digit_run(joined, self.max_number_digits + 1)

    def check_event(self, event: Any, n_bytes: int) -> bool:
        """True when a validated event (of ``n_bytes`` of JSON) passes every field-level limit:
        the quick test of :meth:`check_fields` (no string can have more characters than bytes)."""
        if event.weight > self.max_weight:
            return False
        features = event.features
        if len(features) > self.max_features:
            return False
        bound = self.max_abs_number
        for value in features.values():
            if (value.__class__ is float or value.__class__ is int) and abs(value) > bound:
                return False  # (an inf never gets here: the event schema refuses it)
        if n_bytes <= self.max_string_chars and n_bytes <= self.max_text_chars:
            return True
        return self.check_fields({"id": event.id, "key": event.key, "label": event.label,
                                  "text": event.text, "features": features}, n_bytes) is None

    def check_cell(self, name: str, cell: str) -> str | None:
        """A CSV cell of ``name``: at most ``max_number_digits`` digits in a row, and short."""
        if len(cell) > self.max_string_chars:
            return (f"max_string_chars is {self.max_string_chars}: column {name!r} has "
                    f"{len(cell)} characters")
        if len(cell) > self.max_number_digits and \
                _has_digit_run(cell.encode("utf-8", "surrogatepass"), self.max_number_digits + 1):
            return (f"max_number_digits is {self.max_number_digits}: column {name!r} has a number "
                    f"of more digits")
        return None

    def check_fields(self, fields: Mapping[str, Any], n_bytes: int | None = None) -> str | None:
        """The first field-level limit the parsed event ``fields`` pass, else ``None``.

        ``n_bytes``, the size of the record they came from, skips the string lengths when no
        string can be that long (a character takes at least one byte)."""
        short = n_bytes is not None and n_bytes <= min(self.max_string_chars, self.max_text_chars)
        if not short:
            error = self._check_strings(fields)
            if error:
                return error
        weight = fields.get("weight")
        if _is_number(weight) and math.isfinite(weight) and weight > self.max_weight:
            return f"max_weight is {self.max_weight:g}: the event has weight {weight:g}"
        features = fields.get("features")
        if isinstance(features, Mapping):
            return self._check_features(features, short)
        return None

    def _check_strings(self, fields: Mapping[str, Any]) -> str | None:
        text = fields.get("text")
        if isinstance(text, str) and len(text) > self.max_text_chars:
            return f"max_text_chars is {self.max_text_chars}: the text has {len(text)} characters"
        for name in _STRING_FIELDS:
            value = fields.get(name)
            if isinstance(value, str) and len(value) > self.max_string_chars:
                return (f"max_string_chars is {self.max_string_chars}: the {name} has "
                        f"{len(value)} characters")
        return None

    def _check_features(self, features: Mapping[str, Any], short: bool) -> str | None:
        if len(features) > self.max_features:
            return f"max_features is {self.max_features}: the event has {len(features)} features"
        most = self.max_string_chars
        for name, value in features.items():
            if not short and isinstance(name, str) and len(name) > most:
                return f"max_string_chars is {most}: a feature name has {len(name)} characters"
            if not short and isinstance(value, str) and len(value) > most:
                return f"max_string_chars is {most}: feature {name!r} has {len(value)} characters"
            if _is_number(value) and abs(value) > self.max_abs_number and \
                    not (isinstance(value, float) and math.isinf(value)):  # inf, nan: bad_feature
                return (f"max_abs_number is {self.max_abs_number:g}: feature {name!r} has a number "
                        f"of magnitude {_magnitude(value)}")
        return None


def json_depth(data: bytes) -> int:
    """The deepest nesting of ``[``/``{`` in ``data`` (string literals already blanked out).

    >>> json_depth(b'{"a": [1, {"b": []}]}'), json_depth(b"[]"), json_depth(b"1")
    (4, 1, 0)
    """
    raw = np.frombuffer(data, np.uint8)
    if not raw.size:
        return 0
    step = np.isin(raw, _OPEN).astype(np.int32) - np.isin(raw, _CLOSE)
    return max(0, int(np.cumsum(step).max()))


def _has_digit_run(data: bytes, n: int) -> bool:
    """Whether ``data`` holds ``n`` ASCII digits in a row (one C-speed pass: translate, then find).

    >>> _has_digit_run(b"a 1234 b", 4), _has_digit_run(b"a 123 4", 4)
    (True, False)
    """
    return _ones(n) in data.translate(_DIGITS)


@functools.lru_cache(maxsize=8)
def _ones(n: int) -> bytes:
    return b"1" * n


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _magnitude(value: int | float) -> str:
    if isinstance(value, int):
        digits = len(str(abs(value))) if abs(value) < 10**4000 else None
        return f"1e+{digits - 1}" if digits else "over 1e4000"
    return f"{abs(value):.3g}"
