"""Fuzzing the decoder and the featurizer: no exception of one record escapes, nothing is lost.

Every record given to ``decode``/``decode_many`` comes out once, either decoded or as a dead
letter with a known reason, in all three formats, for arbitrary bytes and for structured hostile
JSON (deep nesting, huge numbers, NaN/Infinity, huge strings, many features, odd unicode and
lone surrogates, non-object JSON, duplicate keys). The featurizer raises only ``FeatureError``,
and what it accepts the models learn and predict without an error or a NaN.
"""

from __future__ import annotations

import json
import typing

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streambayes.errors import FeatureError
from streambayes.models import make_model
from streambayes.runtime.records import decode as decode_module
from streambayes.runtime.records.decode import Decoded, Decoder
from streambayes.runtime.records.events import DeadLetter, DeadLetterReason
from streambayes.runtime.records.limits import RecordLimits
from streambayes.runtime.records.sources import Record

REASONS = set(typing.get_args(DeadLetterReason))
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SMALL = RecordLimits(max_record_bytes=20_000, max_json_depth=8, max_number_digits=30,
                     max_features=12, max_text_chars=300, max_string_chars=40, max_weight=50)
HEADER = ["label", "text", "n", "colour"]
DIGITS = st.sampled_from([1, 99, 101, 400, 4300, 4301, 6000])  # around the limits and Python's


def _decoders(fmt: str) -> list[Decoder]:
    header = HEADER if fmt == "csv" else None
    return [Decoder(fmt, header=header, limits=limits, require_label=require)
            for limits in (RecordLimits(), SMALL) for require in (True, False)]


def _check(decoder: Decoder, values: list[bytes]) -> None:
    records = [Record(v, None, "fuzz.in", 0, i, None, i + 1) for i, v in enumerate(values)]
    many = decoder.decode_many(records)
    one = [decoder.decode(r) for r in records]
    assert len(many) == len(one) == len(records)
    for record, a, b in zip(records, many, one, strict=True):
        assert isinstance(a, (Decoded, DeadLetter)) and type(a) is type(b)
        if isinstance(a, DeadLetter):
            assert a.reason in REASONS and a.error and a.source.offset == record.offset
            assert a == b
        else:
            assert a.record is record and a.event == b.event and a.x == b.x
            assert 0 < a.weight <= decoder.limits.max_weight


# --- structured hostile JSON -------------------------------------------------------------------

_odd_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=60)  # any code point
_scalars = st.one_of(
    st.none(), st.booleans(), _odd_text,
    st.integers(min_value=-(10**120), max_value=10**120),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 1e100, 1e101, 5e-324, 1e150]),
)
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(_odd_text, inner, max_size=4)), max_leaves=12)


@st.composite
def _hostile_literal(draw: st.DrawFn) -> str:
    """A JSON value as text that ``json.dumps`` would not write: huge or odd numbers, deep
    nesting, lone surrogate escapes, NaN/Infinity, huge strings."""
    kind = draw(st.sampled_from(["digits", "exp", "deep", "surrogate", "nan", "long", "dup"]))
    if kind == "digits":
        return ("-" if draw(st.booleans()) else "") + "9" * draw(DIGITS)
    if kind == "exp":
        return f"{draw(st.integers(1, 9))}e{draw(st.integers(-400, 400))}"
    if kind == "deep":
        depth = draw(st.integers(1, 3000))
        opener = draw(st.sampled_from(["[", '{"a":']))
        return opener * depth + "1" + ("]" if opener == "[" else "}") * depth
    if kind == "surrogate":
        return '"' + draw(st.sampled_from(["\\ud800", "\\udfff x", "a\\ud83d", "\\ud83d\\ude00"])) + '"'
    if kind == "nan":
        return draw(st.sampled_from(["NaN", "Infinity", "-Infinity"]))
    if kind == "long":
        return json.dumps("w " * draw(st.integers(1, 60_000)))
    return '"x", "id": "dup"'


@st.composite
def hostile_json(draw: st.DrawFn) -> bytes:
    event: dict = {"id": draw(st.one_of(_odd_text, st.integers(), st.none()))}
    if draw(st.booleans()):
        event["label"] = draw(st.one_of(_odd_text, st.integers(), st.none()))
    if draw(st.booleans()):
        event["text"] = draw(st.one_of(_odd_text, _values))
    n_features = draw(st.sampled_from([0, 1, 3, 13, 1200]))
    event["features"] = {f"f{i}": draw(_scalars) if i < 20 else i for i in range(n_features)}
    if draw(st.booleans()):
        event["weight"] = draw(st.one_of(st.floats(), st.integers(-5, 10**13), _odd_text))
    body = json.dumps(event, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):  # splice a hostile literal in as a feature, the text or the weight
        where = draw(st.sampled_from(['"features": {', '"text": ', '"weight": ', '"id": ']))
        literal = draw(_hostile_literal())
        slot = {'"features": {': '"features": {"h": ' + literal + ", ",
                '"text": ': '"text": ' + literal + ', "t0": ',
                '"weight": ': '"weight": ' + literal + ', "w0": ',
                '"id": ': '"id": ' + literal + ', "i0": '}[where]
        body = body.replace(where, slot, 1) if where in body else body
    if draw(st.booleans()):
        body = draw(st.sampled_from(["[{0}]", "{0},{0}", "{{\"e\": {0}}}", "{0}x", '"{0}"'])).format(body)
    return body.encode("utf-8", "surrogatepass")


@FUZZ
@given(st.lists(hostile_json(), min_size=1, max_size=6), st.lists(st.binary(max_size=200), max_size=3))
def test_hostile_json_never_escapes_and_nothing_is_lost(hostile, junk):
    for decoder in _decoders("jsonl"):
        _check(decoder, hostile + junk)


@FUZZ
@given(st.lists(st.binary(max_size=400), min_size=1, max_size=8), st.sampled_from(["jsonl", "tsv", "csv"]))
def test_arbitrary_bytes_never_escape_in_any_format(values, fmt):
    for decoder in _decoders(fmt):
        _check(decoder, values)


@st.composite
def text_line(draw: st.DrawFn, fmt: str) -> bytes:
    cells = [draw(st.one_of(_odd_text, st.just("9" * draw(DIGITS)),
                            st.sampled_from(["nan", "inf", "1e308", "-0", "1e999", ""])))
             for _ in range(len(HEADER) if fmt == "csv" else 2)]
    if fmt == "csv" and draw(st.booleans()):
        cells.append("extra")
    sep = "," if fmt == "csv" else "\t"
    return sep.join(cells).encode("utf-8", "surrogatepass")


@FUZZ
@given(st.sampled_from(["tsv", "csv"]).flatmap(lambda f: st.tuples(
    st.just(f), st.lists(text_line(f), min_size=1, max_size=6))))
def test_tsv_and_csv_lines_never_escape(case):
    fmt, values = case
    for decoder in _decoders(fmt):
        _check(decoder, values)


def test_a_batch_parse_that_fails_in_any_way_falls_back_to_record_by_record(monkeypatch):
    class Exploding:
        def validate_json(self, data):
            raise MemoryError("the batch is too big")

    monkeypatch.setattr(decode_module, "_EVENT_BATCH", Exploding())
    values = [b'{"id": "a", "label": "x", "text": "good"}', b'{"id": "b", "label": "y", "text": "ok"}',
              b'{"id": "c", "text": "no label"}']
    out = Decoder("jsonl").decode_many([Record(v, None, "t", 0, i) for i, v in enumerate(values)])
    assert [type(d).__name__ for d in out] == ["Decoded", "Decoded", "DeadLetter"]


# --- the featurizer and the models behind it ---------------------------------------------------

_x_values = st.one_of(
    st.none(), st.booleans(), _odd_text, st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(), st.sampled_from([1e308, -1e308, 1e100, -1e100, 1e101, 5e-324]),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
_xs = st.dictionaries(st.one_of(st.just("text"), st.sampled_from(["n", "m", "c", "b"]), _odd_text),
                      _x_values, min_size=1, max_size=6)


@FUZZ
@given(st.lists(_xs, min_size=1, max_size=6), st.lists(st.sampled_from(["a", "b", "c"]), min_size=6,
                                                        max_size=6),
       st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=6, max_size=6))
@pytest.mark.parametrize("name", ["nb", "mnb"])
def test_the_featurizer_raises_only_feature_errors_and_models_stay_finite(name, xs, ys, ws):
    model = make_model(name)
    model.learn_many(model.featurize([{"text": "seed words", "n": 1.0}, {"text": "other", "n": 2.5}]),
                     ["a", "b"], [1.0, 1.0])
    for x, y, w in zip(xs, ys, ws, strict=False):
        try:
            model.learn_many(model.featurize([x]), [y], [w])
            log_proba = model.predict_log_proba_many(model.featurize([x]))
        except FeatureError:
            continue  # refused (before anything changed)
        assert not np.isnan(log_proba).any()
    probe = model.predict_log_proba_many(model.featurize([{"text": "seed", "n": 0.5}]))
    assert np.isfinite(probe).all()
