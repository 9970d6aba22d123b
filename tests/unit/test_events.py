"""Wire messages of DESIGN §2: what is a valid event, and what each error is called."""

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from streambayes.runtime.records.events import (
    DeadLetter,
    Event,
    LabelledEvent,
    Posterior,
    SourcePosition,
)


def _error_type(data: dict) -> str:
    with pytest.raises(ValidationError) as info:
        Event.model_validate(data)
    return info.value.errors()[0]["type"]


def test_full_event_of_the_design_validates_and_gives_x():
    event = Event.model_validate(
        {"id": "m-000123", "key": "user-42", "ts": "2026-11-20T10:00:00Z", "label": "spam",
         "text": "WINNER!! claim your prize",
         "features": {"sender_domain": "x.biz", "n_links": 3}, "weight": 1.0})
    assert event.to_x() == {"sender_domain": "x.biz", "n_links": 3,
                            "text": "WINNER!! claim your prize"}
    assert event.ts is not None and event.ts.year == 2026


def test_features_only_event_has_no_text_key_and_keeps_value_types():
    event = Event.model_validate(
        {"id": "a", "features": {"c": "red", "b": True, "i": 2, "f": 0.5, "m": None}})
    assert event.to_x() == {"c": "red", "b": True, "i": 2, "f": 0.5, "m": None}
    assert type(event.to_x()["i"]) is int and type(event.to_x()["b"]) is bool


def test_integer_ids_and_labels_become_strings_defaults_apply():
    event = Event.model_validate({"id": 7, "label": 1, "text": "x"})
    assert (event.id, event.label, event.weight, event.key) == ("7", "1", 1.0, None)


@pytest.mark.parametrize("data, kind", [
    ({"id": "a", "features": {"text": "hi"}}, "bad_feature"),
    ({"id": "a", "text": "t", "features": {"x": {"nested": 1}}}, "bad_feature"),
    ({"id": "a", "text": "t", "features": {"x": [1, 2]}}, "bad_feature"),
    ({"id": "a", "text": "t", "features": {"x": float("nan")}}, "bad_feature"),
    ({"id": "a"}, "empty_event"),
    ({"id": "a", "text": "", "features": {}}, "empty_event"),
    ({"id": "a", "features": {"x": None}}, "empty_event"),
    ({"id": ["a"], "text": "no id"}, "string_type"),
    ({"id": "a", "text": 5}, "string_type"),
    ({"id": "a", "text": "t", "label": True}, "string_type"),
    ({"id": "a", "text": "t", "weight": 0}, "greater_than"),
    ({"id": "a", "text": "t", "weight": -1.5}, "greater_than"),
    ({"id": "a", "text": "t", "weight": float("inf")}, "finite_number"),
    ({"id": "a", "text": "t", "weight": "2"}, "float_type"),
    ({"id": "a", "text": "t", "features": ["x"]}, "dict_type"),
])
def test_invalid_events_are_rejected_with_a_type(data, kind):
    assert _error_type(data) == kind


def test_id_is_optional_the_decoder_fills_it_from_the_position():
    assert Event.model_validate({"text": "no id"}).id is None


def test_feature_named_text_error_says_so():
    with pytest.raises(ValidationError, match="may not be named 'text'"):
        Event.model_validate({"id": "a", "features": {"text": "hi"}})


def test_labelled_event_requires_label():
    with pytest.raises(ValidationError):
        LabelledEvent.model_validate({"id": "a", "text": "t"})
    assert LabelledEvent.model_validate({"id": "a", "text": "t", "label": "ham"}).label == "ham"


def test_unknown_fields_are_ignored():
    assert Event.model_validate({"id": "a", "text": "t", "extra": [1]}).id == "a"


def test_posterior_and_dead_letter_serialize_as_json():
    post = Posterior(id="m-1", key="u", model="nb", snapshot="000042",
                     posterior={"ham": 0.03, "spam": 0.97}, decision="spam",
                     clues=[("tok:winner", 2.91)], latency_ms=1.8)
    assert json.loads(post.model_dump_json())["clues"] == [["tok:winner", 2.91]]
    letter = DeadLetter(reason="bad_json", error="Expecting value", line=4, payload="{x",
                        source=SourcePosition(topic="in.jsonl", partition=0, offset=3))
    doc = json.loads(letter.model_dump_json())
    assert doc == {"reason": "bad_json", "error": "Expecting value", "line": 4,
                   "payload": "{x", "payload_encoding": "utf-8",
                   "source": {"topic": "in.jsonl", "partition": 0, "offset": 3}}
    with pytest.raises(ValidationError):
        DeadLetter(reason="no_such_reason", error="", payload="",
                   source=SourcePosition(topic="t", partition=0, offset=0))


_text = st.text(max_size=12)
_number = st.floats(allow_nan=True, allow_infinity=True) | st.floats(-1e6, 1e6)


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries(
    {"id": _text, "model": _text, "posterior": st.dictionaries(_text, _number, max_size=4)},
    optional={"key": st.none() | _text, "snapshot": st.none() | _text,
              "decision": st.none() | _text,
              "clues": st.lists(st.tuples(_text, _number), max_size=6),
              "latency_ms": st.none() | _number, "calibration_alpha": st.none() | _number,
              "raw_log_proba": st.none() | st.dictionaries(_text, st.none() | _number, max_size=3)}))
def test_a_serialized_posterior_is_the_models_json(fields):
    from streambayes.runtime.records.events import PosteriorJSON

    data = PosteriorJSON.of(**fields)
    model = Posterior(**fields)
    assert data == model.model_dump_json().encode() and data.id == fields["id"]
    numbers = [*fields["posterior"].values(), *(v for _, v in fields.get("clues", []))]
    if all(math.isfinite(v) for v in numbers):  # (the model writes null for inf, and reads no null)
        assert Posterior.model_validate_json(data).model_dump_json() == model.model_dump_json()


def test_a_serialized_posterior_names_a_missing_or_unknown_field():
    from streambayes.runtime.records.events import PosteriorJSON

    with pytest.raises(TypeError, match="'posterior'"):
        PosteriorJSON.of(id="x", model="nb")
    with pytest.raises(TypeError, match="'colour'"):
        PosteriorJSON.of(id="x", model="nb", posterior={}, colour="red")


def test_a_sink_hands_a_serialized_posterior_to_its_client_as_plain_bytes():
    """kafka-python refuses a bytes subclass ("Unsupported type for serialized value")."""
    from streambayes.runtime.records.events import PosteriorJSON
    from streambayes.runtime.records.sinks import fit, to_bytes

    data = PosteriorJSON.of(id="x", model="nb", posterior={"a": 1.0})
    assert type(to_bytes(data)) is bytes and type(fit(data, 1 << 20)) is bytes
    assert to_bytes(data) == data
