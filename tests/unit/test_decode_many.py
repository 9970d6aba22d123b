"""``Decoder.decode_many`` (batch validation) gives exactly what ``decode`` gives, record by record."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from streambayes.runtime.records.decode import Decoded, Decoder
from streambayes.runtime.records.sources import Record

TRICKY = [
    b'{"id": "a", "label": "spam", "text": "WIN cash"}',
    b'{"id": 7, "label": 1, "text": "ints as text", "key": 42}',
    b'{"id": true, "label": "x", "text": "bool id"}',
    b'{"id": "b", "label": "  ", "text": "blank label"}',
    b'{"id": "c", "text": "no label"}',
    b'{"id": "d", "label": "ham", "text": ""}',
    b'{"id": "e", "label": "ham", "features": {"n": 3, "s": "x", "b": false, "f": 2.5, "z": null}}',
    b'{"id": "f", "label": "ham", "features": {"z": null}}',
    b'{"id": "g", "label": "ham", "features": {"text": "x"}}',
    b'{"id": "h", "label": "ham", "features": {"deep": {"a": 1}}}',
    b'{"id": "i", "label": "ham", "features": {"nan": NaN}, "text": "t"}',
    b'{"id": "j", "label": "ham", "features": {"big": 1e400}, "text": "t"}',
    b'{"id": "k", "label": "ham", "text": "t", "weight": 0}',
    b'{"id": "l", "label": "ham", "text": "t", "weight": 2}',
    b'{"id": "m", "label": "ham", "text": "t", "weight": "2"}',
    b'{"id": "n", "label": "ham", "text": "t", "ts": "2026-11-20T10:00:00Z", "extra": [1]}',
    b'{"id": "o", "label": "ham", "text": "t", "ts": "yesterday"}',
    b'[1, 2]',
    b'{"id": "p", "label": "ham", "text": "unterminated',
    b'\xff\xfe{"id": "q"}',
    b'{"id": "r", "label": "ham", "text": 5}',
    b'{"id": "s", "id": "s2", "label": "ham", "text": "duplicate key"}',
    b'{"id": "t1", "label": "spam", "text": "a"},{"id": "t2", "label": "ham", "text": "b"}',
    b'{"id": "u", "label": "ham", "text": "t", "weight": 1e13}',
]


def _records(values):
    return [Record(v, None, "topic", 0, i, None) for i, v in enumerate(values)]


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, Decoded):
        assert (a.event, a.x, a.label, a.weight, a.record) == (b.event, b.x, b.label, b.weight, b.record)
        assert a.event.model_dump() == b.event.model_dump()
    else:
        assert a == b


def test_tricky_records_match_decode_in_one_batch_and_alone():
    for require_label in (True, False):
        decoder = Decoder("jsonl", require_label=require_label)
        records = _records(TRICKY)
        for a, b in zip(decoder.decode_many(records), map(decoder.decode, records), strict=True):
            _same(a, b)
        good = [r for r in records if isinstance(decoder.decode(r), Decoded)]
        assert len(good) >= 5
        for a, b in zip(decoder.decode_many(good), map(decoder.decode, good), strict=True):
            _same(a, b)


scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(),
                    st.text(max_size=5))
events = st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=4), st.integers(), st.booleans())},
    optional={"label": st.one_of(st.sampled_from(["ham", "spam", " ", ""]), st.integers()),
              "text": st.one_of(st.text(max_size=20), st.integers()),
              "key": st.one_of(st.text(max_size=3), st.none()),
              "features": st.dictionaries(st.sampled_from(["a", "b", "text", "n"]),
                                          st.one_of(scalars, st.lists(st.integers(), max_size=1)),
                                          max_size=3),
              "weight": st.one_of(st.floats(), st.integers(-1, 3))})


@settings(max_examples=150, deadline=None)
@given(st.lists(events, min_size=2, max_size=6), st.booleans())
def test_batches_of_random_events_match_decode(batch, require_label):
    decoder = Decoder("jsonl", require_label=require_label)
    records = _records([json.dumps(e).encode() for e in batch])
    for a, b in zip(decoder.decode_many(records), map(decoder.decode, records), strict=True):
        _same(a, b)
