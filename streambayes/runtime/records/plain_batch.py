"""The learner's common JSONL batch read as columns: ``{"id", "label", "text", "key"}``, all strings.

Most learn streams carry events of one plain shape: a string id and label, non-empty text,
perhaps a string key, nothing else. For a batch made only of those the learner needs no
:class:`~streambayes.runtime.records.events.Event` and no
:class:`~streambayes.runtime.records.decode.Decoded` per event: the batch is parsed by one
``pydantic_core.from_json`` call (jiter, the parser of every other path) and each event is checked
with the few type tests its validation would make; out come its ``x`` and its label.

:func:`plain_texts` returns None as soon as any event of the batch is not of that shape or would
not decode to a learnable event (an integer id, a blank or missing label, empty text, a feature,
a weight, an unknown field, a value past a :class:`RecordLimits` bound...): the caller then
decodes the batch the general way, so what is learned never depends on which path ran (tests
compare both).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import Any

from pydantic_core import from_json

from streambayes.features.batch import TextEvents
from streambayes.runtime.records.limits import RecordLimits

_PLAIN_KEYS = frozenset({"id", "label", "text", "key"})


def _within_limits(obj: dict[str, Any], n_bytes: int, limits: RecordLimits) -> bool:
    """:meth:`RecordLimits.check_event` for a plain event (weight 1, no features)."""
    if n_bytes <= limits.max_string_chars and n_bytes <= limits.max_text_chars:
        return True  # no string can have more characters than the record has bytes
    fields = {"id": obj.get("id"), "key": obj.get("key"), "label": obj.get("label"),
              "text": obj.get("text"), "features": {}}
    return limits.check_fields(fields, n_bytes) is None


def _all_str(values: list) -> bool:
    return set(map(type, values)) == {str}


def plain_texts(values: Sequence[bytes], joined: bytes,
                limits: RecordLimits) -> tuple[TextEvents, list[str]] | None:
    """``(xs, labels)`` when every record of ``values`` (``joined`` is them as one JSON array) is
    a plain labelled event with text that decodes without a dead letter; else None. The tests run
    over whole columns (``map`` in C), not event by event."""
    if limits.max_weight < 1.0:
        return None
    try:
        objs = from_json(joined, cache_strings="keys")
    except ValueError:
        return None
    if objs.__class__ is not list or len(objs) != len(values) or set(map(type, objs)) != {dict} \
            or not all(map(_PLAIN_KEYS.issuperset, objs)):
        return None
    texts, labels = list(map(dict.get, objs, repeat("text"))), list(map(dict.get, objs, repeat("label")))
    if not (_all_str(texts) and all(texts) and _all_str(labels) and all(map(str.strip, labels))):
        return None  # (no text: an empty event; a blank label: a missing one)
    if not (_all_str(list(map(dict.get, objs, repeat("id"))))
            and _all_str(list(map(dict.get, objs, repeat("key"), repeat(""))))):
        return None  # (a missing id, an integer one, a null key: the general path)
    bound = min(limits.max_string_chars, limits.max_text_chars)
    if max(map(len, values)) > bound:  # long records: each checked as check_event would
        if not all(_within_limits(o, len(v), limits) for o, v in zip(objs, values, strict=True)):
            return None
    return TextEvents(texts), labels
