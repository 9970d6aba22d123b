"""Poison records of issue 10 mixed among good ones: each becomes its own dead letter with a
reason; replay, learn and predict exit 0 and every good record is learned or served."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from streambayes.cli import main
from streambayes.errors import FeatureError
from streambayes.features.batch import Featurizer
from streambayes.models import make_model
from streambayes.runtime.loops.replay import FileReplay, replay, replay_file
from streambayes.runtime.records.decode import Decoder
from streambayes.runtime.records.limits import RecordLimits
from streambayes.runtime.records.sinks import MemorySink
from streambayes.runtime.records.sources import MemorySource
from tests.unit.test_replay import SMS

DEEP = '{"id": "deep", "label": "spam", "text": "t", "features": {"x": ' + "[" * 100_000 \
    + "]" * 100_000 + "}}"
POISON = {  # name: (record, dead-letter reason, words the error must hold)
    "deep": (DEEP, "limit", "max_json_depth is 32: the record nests 100002 levels"),
    "int_5000_digits": ('{"id": "i5000", "label": "spam", "text": "t", "features": {"n": '
                        + "9" * 5000 + "}}", "limit", "max_number_digits is 100: the record has a "
                        "number of 5000 digits"),
    "int_400_digits": ('{"id": "i400", "label": "spam", "text": "t", "features": {"n": '
                       + "9" * 400 + "}}", "limit", "number of 400 digits"),
    "feature_1e308": ('{"id": "f308", "label": "spam", "text": "t", "features": {"n": 1e308}}',
                      "limit", "max_abs_number is 1e+100: feature 'n'"),
    "weight_1e12": ('{"id": "w12", "label": "ham", "text": "t", "weight": 1e12}', "limit",
                    "max_weight is 1000: the event has weight 1e+12"),
    "lone_surrogate": ('{"id": "s", "label": "ham", "text": "t", "features": {"c": "\\ud800"}}',
                       "bad_json", "invalid JSON"),
}


def sms_events(n: int) -> list[str]:
    """The first ``n`` SMS messages as JSONL events, with a numeric and a categorical feature."""
    lines = SMS.read_text(encoding="utf-8").splitlines()[:n]
    out = []
    for i, line in enumerate(lines):
        label, text = line.split("\t", 1)
        out.append(json.dumps({"id": f"sms-{i}", "label": label, "text": text, "features": {
            "length": len(text), "caps": "yes" if text[:1].isupper() else "no"}}))
    return out


def mixed(tmp_path: Path, poison: list[str], n_good: int = 300, every: int = 37) -> Path:
    """``n_good`` SMS events with the poison records (in turn) before events 5, 5 + every..."""
    good = sms_events(n_good)
    lines = []
    for i, line in enumerate(good):
        if i % every == 5:
            lines.append(poison[(i // every) % len(poison)])
        lines.append(line)
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("name", list(POISON))
def test_each_poison_record_of_the_issue_is_a_dead_letter_and_every_good_event_is_learned(
        tmp_path, name):
    record, reason, words = POISON[name]
    path = mixed(tmp_path, [record], every=100)  # 3 times, in different batches
    dl = tmp_path / "dl.jsonl"
    result = replay_file(FileReplay(path, models=("nb", "mnb", "gnb"), dead_letter=dl,
                                    batch_size=64),
                         console=Console(file=io.StringIO()), progress=False)
    assert result.records == 303 and result.events == 300
    assert dict(result.dead_letters) == {reason: 3}
    assert all(m["events"] == 300 for m in result.run.summary().values())
    letters = [json.loads(line) for line in dl.read_text().splitlines()]
    assert [d["reason"] for d in letters] == [reason] * 3
    assert all(words in d["error"] for d in letters)


def test_the_cli_replays_a_file_with_every_poison_and_exits_0(tmp_path, capsys):
    path = mixed(tmp_path, [record for record, _, _ in POISON.values()], n_good=400, every=10)
    dl = tmp_path / "dl.jsonl"
    assert main(["replay", str(path), "--model", "nb,gnb", "--dead-letter", str(dl)]) == 0
    out = capsys.readouterr().out
    assert "400 events" in out
    reasons = [json.loads(line)["reason"] for line in dl.read_text().splitlines()]
    assert len(reasons) == 40 and reasons.count("bad_json") == 6 and reasons.count("limit") == 34


def test_heavy_weights_cannot_take_over_a_replay(tmp_path):
    """Issue 10: a handful of 1e12-weight events turned a replay's accuracy into 1.0000."""
    heavy = [json.dumps({"id": f"h{i}", "label": "ham", "text": "ok", "weight": 1e12})
             for i in range(5)]
    path = mixed(tmp_path, heavy, n_good=500, every=50)
    result = replay_file(FileReplay(path, models=("nb",), dead_letter=tmp_path / "dl.jsonl"),
                         console=Console(file=io.StringIO()), progress=False)
    assert dict(result.dead_letters) == {"limit": 10}
    assert result.run.summary()["nb"]["accuracy"] < 0.999


def test_a_lone_surrogate_does_not_crash_the_process(tmp_path):
    """mmh3 crashed the interpreter (SIGSEGV) hashing a categorical value with a lone surrogate."""
    path = mixed(tmp_path, [POISON["lone_surrogate"][0]], n_good=40, every=10)
    done = subprocess.run([sys.executable, "-m", "streambayes", "replay", str(path), "--model",
                           "mnb", "--dead-letter", str(tmp_path / "dl.jsonl")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-500:]
    assert "4 dead letters" in done.stdout


def test_a_lone_surrogate_str_hashes_when_given_to_a_model_directly():
    model = make_model("mnb")
    model.learn_many(model.featurize([{"text": "a", "c": "x\ud800"}, {"text": "b", "c": "y"}]),
                     ["p", "q"], [1.0, 1.0])
    assert model.predict_log_proba_many(model.featurize([{"c": "x\ud800"}])).shape == (1, 2)


def test_learn_and_predict_on_files_with_poison_records(tmp_path, capsys):
    train = mixed(tmp_path, [record for record, _, _ in POISON.values()], n_good=300, every=25)
    snaps, dl = tmp_path / "snaps", tmp_path / "learn-dl.jsonl"
    assert main(["learn", "--source", str(train), "--snapshots", str(snaps), "--dead-letter",
                 str(dl), "--batch-size", "50"]) == 0
    assert "learned 300 events from 312 records (12 dead letters)" in capsys.readouterr().out
    query = tmp_path / "query.jsonl"
    query.write_text(train.read_text(encoding="utf-8"), encoding="utf-8")
    out, pdl = tmp_path / "posteriors.jsonl", tmp_path / "predict-dl.jsonl"
    assert main(["predict", "--source", str(query), "--sink", str(out), "--snapshots", str(snaps),
                 "--dead-letter", str(pdl), "--batch-size", "50"]) == 0
    assert "published 300 posteriors for 312 records (12 dead letters)" in capsys.readouterr().out
    posteriors = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(math.isclose(sum(p["posterior"].values()), 1.0) for p in posteriors)
    reasons = sorted(json.loads(line)["reason"] for line in pdl.read_text().splitlines())
    assert reasons == ["bad_json"] * 2 + ["limit"] * 10


class Fragile:
    """nb, except that an event with the field ``boom`` makes it divide by zero (a learner bug)."""

    def __init__(self) -> None:
        self.inner = make_model("nb")

    @property
    def classes(self) -> list:
        return self.inner.classes

    def featurize(self, xs):
        if any("boom" in x for x in xs):
            raise ZeroDivisionError("boom")
        return self.inner.featurize(xs)

    def predict_log_proba_many(self, X):
        return self.inner.predict_log_proba_many(X)

    def learn_many(self, X, y, w=None):
        self.inner.learn_many(X, y, w)


def test_a_model_error_of_one_event_in_replay_is_its_dead_letter():
    events = [json.dumps({"id": f"e{i}", "label": "ab"[i % 2], "text": "ab"[i % 2] * 3,
                          "features": {"boom": 1} if i == 7 else {}}) for i in range(20)]
    sink = MemorySink()
    result = replay(MemorySource({"t": events}), Decoder("jsonl"), {"fragile": Fragile()}, sink,
                    batch_size=10)
    assert result.events == 19 and dict(result.dead_letters) == {"model_error": 1}
    (letter,) = [json.loads(v) for v in sink.values("dead-letters")]
    assert letter["source"]["offset"] == 7 and "ZeroDivisionError: boom" in letter["error"]


KINDS = [  # (record, reason): what each kind of hostile record becomes
    (b'{"id": "a", "label": "x", "text": "t", "features": {"x": Infinity}}', "bad_feature"),
    (b'{"id": "a", "label": "x", "text": "t", "features": {"x": -1e999}}', "bad_feature"),
    (b'{"id": "a", "label": "x", "text": "t", "features": {"x": NaN}}', "bad_feature"),
    (b'{"id": "a", "label": "x", "text": "t", "features": {"x": -1.5e300}}', "limit"),
    (b'{"id": "a", "label": "x", "text": "t", "features": {"x": 1e100}}', None),
    (b'{"id": "a", "label": "x", "text": "t", "weight": 1000}', None),
    (b'{"id": "a", "label": "x", "text": "t", "weight": 1000.5}', "limit"),
    (b'{"id": "a", "label": "x", "text": "t", "weight": 0}', "invalid_event"),
    (b'{"id": "a", "label": "x", "text": "t", "weight": NaN}', "invalid_event"),
    (b'{"id": "a", "label": "' + b"L" * 1001 + b'", "text": "t"}', "limit"),
    (b'{"id": "a", "label": "x", "text": "' + b"w" * 1_000_001 + b'"}', "limit"),
    (b'{"id": "a", "label": "x", "features": {' + b", ".join(b'"f%d": 1' % i for i in range(1001))
     + b"}}", "limit"),
    (b'{"id": "a", "label": "x", "text": "t", "extra": ' + b"[" * 33 + b"]" * 33 + b"}", "limit"),
    (b'{"id": "a", "label": "x", "text": "' + b"[" * 50 + b'"}', None),  # brackets in a string
    (b'{"id": "a", "label": "x", "text": "' + b"9" * 500 + b'"}', None),  # digits in a string
    (b'{"id": "a", "label": "x", "text": "t", "features": {"c": "\\ud800"}}', "bad_json"),
    (b'[{"id": "a", "label": "x", "text": "t"}]', "invalid_event"),
]


def test_each_kind_of_hostile_record_gets_its_reason():
    from streambayes.runtime.records.sources import Record

    decoder = Decoder("jsonl")
    records = [Record(value, None, "t", 0, i) for i, (value, _) in enumerate(KINDS)]
    for many in (decoder.decode_many(records), [decoder.decode(r) for r in records]):
        assert [getattr(d, "reason", None) for d in many] == [reason for _, reason in KINDS]


@pytest.mark.parametrize("value", [10**400, 1e308, -1e101, math.nan])
def test_the_featurizer_refuses_numbers_that_break_the_statistics(value):
    with pytest.raises(FeatureError, match="field 'n'"):
        Featurizer().featurize([{"text": "t", "n": value}])


def test_a_csv_cell_of_many_digits_is_a_limit_and_too_many_columns_is_bad_usage():
    from streambayes.errors import UsageError
    from streambayes.runtime.records.sources import Record

    decoder = Decoder("csv", header=["label", "n"])
    letter = decoder.decode(Record(b"spam," + b"7" * 500, None, "x.csv", 0, 0))
    assert letter.reason == "limit" and "max_number_digits" in letter.error
    with pytest.raises(UsageError, match="max_features"):
        Decoder("csv", header=["label", "a", "b", "c"], limits=RecordLimits(max_features=2))


def test_limits_come_from_the_settings(monkeypatch):
    from streambayes.config import Settings

    monkeypatch.setenv("STREAMBAYES_MAX_WEIGHT", "5")
    monkeypatch.setenv("STREAMBAYES_MAX_JSON_DEPTH", "4")
    limits = RecordLimits.from_settings(Settings())
    assert (limits.max_weight, limits.max_json_depth, limits.max_features) == (5.0, 4, 1000)
    monkeypatch.setenv("STREAMBAYES_MAX_ABS_NUMBER", "1e200")
    assert main(["replay", "nonexistent.jsonl"]) == 2


def test_a_file_source_never_holds_an_over_long_line(tmp_path):
    from streambayes.runtime.records.sources import FileSource

    lines = [b'{"id": "a", "label": "x", "text": "one"}', b'{"id": "b", "text": "' + b"w " * 50_000
             + b'"}', b'{"id": "c", "label": "y", "text": "three"}']
    path = tmp_path / "long.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with FileSource(path, max_line_bytes=1000) as source:
        records = source.poll(10)
        assert [len(r.value) for r in records] == [len(lines[0]), 1001, len(lines[2])]
        assert [r.size for r in records] == [None, len(lines[1]), None]
        assert [(r.offset, r.line) for r in records] == [(0, 1), (1, 2), (2, 3)]
        assert source.bytes_read == path.stat().st_size
        source.seek({str(path): {"0": 2}})
        assert source.poll(10)[0].value == lines[2]
    decoder = Decoder("jsonl", limits=RecordLimits(max_record_bytes=1000))
    letters = decoder.decode_many(records)
    assert [getattr(d, "reason", "ok") for d in letters] == ["ok", "limit", "ok"]
    assert letters[1].error == ("max_record_bytes is 1000: the record has 100023 bytes (only its "
                                "first 1001 were read)")


def test_an_over_long_line_being_written_is_waited_for_when_following(tmp_path):
    from streambayes.runtime.records.sources import FileSource

    path = tmp_path / "follow.jsonl"
    path.write_bytes(b'{"id": "a"}\n' + b"x" * 5000)
    with FileSource(path, follow=True, max_line_bytes=100) as source:
        assert [r.value for r in source.poll(10)] == [b'{"id": "a"}']
        with path.open("ab") as out:
            out.write(b"y" * 5000 + b"\n" + b'{"id": "c"}\n')
        records = source.poll(10)
        assert [(len(r.value), r.size, r.line) for r in records] == [(101, 10000, 2), (11, None, 3)]


def test_the_cli_replays_a_file_with_a_line_past_the_record_size(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("STREAMBAYES_MAX_RECORD_BYTES", "2000")
    path = mixed(tmp_path, ['{"id": "big", "label": "spam", "text": "' + "z" * 200_000 + '"}'],
                 n_good=50, every=100)
    dl = tmp_path / "dl.jsonl"
    assert main(["replay", str(path), "--dead-letter", str(dl)]) == 0
    (letter,) = [json.loads(line) for line in dl.read_text().splitlines()]
    assert letter["reason"] == "limit" and "the record has 200042 bytes" in letter["error"]
    assert len(letter["payload"]) == 2001


def test_produce_sends_the_head_of_an_over_long_line_and_says_so(tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("STREAMBAYES_MAX_RECORD_BYTES", "100")
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": "a", "label": "x", "text": "short"}\n{"id": "b", "text": "'
                      + "z" * 500 + '"}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    with caplog.at_level("WARNING"):
        assert main(["produce", str(source), "--to", str(out)]) == 0
    assert [len(line) for line in out.read_bytes().splitlines()][1] == 101
    assert "line 2 has 523 bytes, more than max_record_bytes (100)" in caplog.text


def test_the_default_limits_take_every_real_mail_as_handed_over():
    """enron1-3 holds mails of up to 230,000 characters: none is past a default limit."""
    import os
    from pathlib import Path

    from streambayes.runtime.records.decode import Decoder
    from streambayes.runtime.records.events import DeadLetter
    from streambayes.runtime.records.limits import RecordLimits
    from streambayes.runtime.records.sources import FileSource

    data = Path(os.environ.get("STREAMBAYES_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")
    with FileSource(data / "enron_spam_dev" / "enron1-3.jsonl.gz",
                    max_line_bytes=RecordLimits().max_record_bytes) as source:
        decoder = Decoder(source.format, limits=RecordLimits())
        letters = []
        while records := source.poll(2000):
            letters += [d for d in decoder.decode_many(records) if isinstance(d, DeadLetter)]
    assert letters == []
