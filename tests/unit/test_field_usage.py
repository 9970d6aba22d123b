"""No silent no-op models: which fields each model can use, a warning when none, the summary line."""

import io
import json
import logging

import pytest
from rich.console import Console

from streambayes.models import make_model
from streambayes.models.usage import FieldKinds, fields_used, first_batch_note
from streambayes.runtime.loops.replay import FileReplay, replay_file

from .test_bn_inference import DATA

TEXTS = ["free prize now", "see you at noon", "win cash today", "lunch at home?"] * 10


def _events(extra=False):
    for i, text in enumerate(TEXTS):
        x = {"text": text, "label": "spam" if i % 2 == 0 else "ham"}
        if extra:
            x |= {"domain": "x.biz" if i % 2 == 0 else "mail.org", "n_links": i % 3, "urgent": i % 4 == 0}
        yield x


@pytest.mark.parametrize(("name", "text_only", "with_fields"), [
    ("nb", ["text"], ["domain", "n_links", "text", "urgent"]),
    ("mnb", ["text"], ["domain", "n_links", "text", "urgent"]),
    ("bnb", ["text"], ["domain", "n_links", "text", "urgent"]),
    ("cnb", ["text"], ["domain", "n_links", "text", "urgent"]),
    ("catnb", [], ["domain", "n_links", "urgent"]),
    ("gnb", [], ["n_links"]),
    ("aode", [], ["domain", "n_links", "urgent"]),
    ("spode", [], ["domain", "n_links", "urgent"]),
    ("tan", [], ["domain", "n_links", "urgent"]),
    ("kdb", [], ["domain", "n_links", "urgent"]),
])
def test_fields_each_model_uses(name, text_only, with_fields):
    strip = [{k: v for k, v in x.items() if k != "label"} for x in _events()]
    full = [{k: v for k, v in x.items() if k != "label"} for x in _events(extra=True)]
    assert fields_used(make_model(name), FieldKinds(strip)) == text_only
    assert fields_used(make_model(name), FieldKinds(full)) == with_fields


def test_a_schema_and_a_network_limit_the_fields():
    kinds = FieldKinds([{"text": "hi", "domain": "a", "n_links": 2, "asia": "yes", "smoke": "no"}])
    assert fields_used(make_model("tan", schema=["domain"]), kinds) == ["domain"]
    bn = make_model("bn", network=str(DATA / "bif" / "asia.bif"), class_variable="lung")
    assert fields_used(bn, kinds) == ["asia", "smoke"]


def test_replay_warns_at_start_and_names_the_fields_in_the_summary(tmp_path, caplog):
    path = tmp_path / "sms.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in _events()))
    out = io.StringIO()
    with caplog.at_level(logging.WARNING):
        job = FileReplay(path, models=("nb", "catnb", "gnb"), dead_letter=tmp_path / "d.jsonl")
        result = replay_file(job, console=Console(file=out, width=200), progress=False)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2 and "'catnb' gets no usable feature" in warned[0] and "'gnb'" in warned[1]
    assert "fields used: nb: text; catnb: NONE; gnb: NONE" in out.getvalue()
    models = result.metrics()["models"]
    assert models["nb"]["fields_used"] == ["text"] and models["catnb"]["fields_used"] == []


def test_the_learner_notes_its_fields_on_its_first_events():
    xs = [{k: v for k, v in x.items() if k != "label"} for x in _events()]
    warn, message = first_batch_note("catnb", make_model("catnb"), xs)
    assert warn and "no usable feature" in message and "(text)" in message
    assert first_batch_note("nb", make_model("nb"), xs) == (False, "model 'nb' uses the fields text")
    assert first_batch_note("nb", make_model("nb"), [{}]) is None


def test_learn_warns_once_when_its_model_sees_no_field(tmp_path, caplog):
    from streambayes.cli import main

    path = tmp_path / "sms.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in _events()))
    with caplog.at_level(logging.INFO):
        assert main(["learn", "--source", str(path), "--snapshots", str(tmp_path / "s"),
                     "--model", "gnb", "--batch-size", "8"]) == 0
    warned = [r.getMessage() for r in caplog.records if "no usable feature" in r.getMessage()]
    assert len(warned) == 1 and "'gnb'" in warned[0]
