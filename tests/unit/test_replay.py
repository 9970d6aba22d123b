"""Prequential replay: predict-then-learn order, metrics, dead letters for every bad input."""

import base64
import json
import math
import os
from pathlib import Path

import pytest
from rich.console import Console

from streambayes.errors import UsageError
from streambayes.evaluate.prequential import Prequential, prequential
from streambayes.models import make_model
from streambayes.runtime.loops.replay import FileReplay, build_models, replay, replay_file
from streambayes.runtime.records.decode import Decoder
from streambayes.runtime.records.sinks import MemorySink
from streambayes.runtime.records.sources import FileSource, MemorySource
from tests.unit.recorder import Recorder


def shared_data() -> Path:
    """$STREAMBAYES_DATA, else ../shared/data beside the repository; missing data fails."""
    env = os.environ.get("STREAMBAYES_DATA")
    repo = Path(__file__).resolve().parents[2]
    root = Path(env).resolve() if env else repo.parent / "shared" / "data"
    assert (root / "sms_spam_collection" / "SMSSpamCollection").is_file(), (
        f"SMS Spam Collection missing under {root}; set STREAMBAYES_DATA")
    return root


SMS = shared_data() / "sms_spam_collection" / "SMSSpamCollection"


def test_each_event_is_predicted_before_it_is_learned():
    log: list = []
    batches = [([{"i": 0}, {"i": 1}], ["a", "b"]), ([{"i": 2}, {"i": 3}], ["a", "a"])]
    run = prequential({"r": Recorder(log)}, batches)
    assert log == [("predict", [0, 1]), ("learn", [0, 1]), ("predict", [2, 3]),
                   ("learn", [2, 3])]
    s = run.summary()["r"]
    assert (s["events"], s["cold"]) == (4, 2)  # the first batch meets an untrained model
    assert s["accuracy"] == 1.0  # tie a/b: argmax picks "a", right twice
    assert s["log_loss"] == pytest.approx(math.log(2))
    assert s["roc_auc"] is not None and s["events_per_s"] > 0


def test_bad_event_in_featurize_is_dropped_for_every_model():
    log_a: list = []
    run = Prequential({"a": Recorder(log_a), "b": make_model("nb")})
    xs = [{"i": 0, "text": "x"}, {"i": 1, "poison": 1}, {"i": 2, "text": "y"}]
    rejected = run.step(xs, ["a", "b", "a"])
    assert [(r.index, "poison" in r.error) for r in rejected] == [(0 + 1, True)]
    assert log_a[-1] == ("learn", [0, 2])
    assert run.models["b"].n_events == 2
    assert run.summary()["b"]["events"] == 2


def test_feature_error_raised_by_learn_or_predict_of_a_real_model():
    run = Prequential({"mnb": make_model("mnb"), "nb": make_model("nb")})
    xs = [{"text": "cheap pills", "n": 1}, {"text": "hello", "n": -2}, {"text": "hi", "n": 0}]
    first = run.step(xs, ["spam", "ham", "ham"])  # cold mnb: caught when learning
    assert [r.index for r in first] == [1] and "negative" in first[0].error
    second = run.step(xs, ["spam", "ham", "ham"])  # trained mnb: caught when predicting
    assert [r.index for r in second] == [1]
    assert run.models["mnb"].n_events == 4 and run.summary()["nb"]["events"] == 5


def test_roc_auc_only_for_two_labels_and_positive_choice():
    xs = [{"text": t} for t in ("a b", "c d", "a c", "b d", "e f", "a f")]
    three = prequential({"nb": make_model("nb")}, [(xs[:3], ["x", "y", "z"]),
                                                  (xs[3:], ["x", "y", "z"])])
    assert three.summary()["nb"]["roc_auc"] is None and three.positive_label is None
    two = prequential({"nb": make_model("nb")}, [(xs, ["ham", "spam"] * 3)])
    assert two.positive_label == "spam"
    chosen = prequential({"nb": make_model("nb")}, [(xs, ["ham", "spam"] * 3)], positive="ham")
    assert chosen.positive_label == "ham"
    absent = prequential({"nb": make_model("nb")}, [(xs, ["ham", "spam"] * 3)], positive="eggs")
    assert absent.summary()["nb"]["roc_auc"] is None


def test_weights_weight_the_metrics():
    log: list = []
    run = Prequential({"r": Recorder(log)})
    run.step([{"i": 0}], ["a"])
    run.step([{"i": 1}, {"i": 2}], ["a", "b"], [3.0, 1.0])
    assert run.summary()["r"]["accuracy"] == pytest.approx(0.75)
    assert run.labels == {"a": 4.0, "b": 1.0}


BAD_LINES = [
    (b'{"id": "s1", "label": "spam", "text": "WIN cash now"}', None),
    (b'{"id": "x", ', "bad_json"),
    (b'{"id": "h1", "label": "ham", "text": "see you at lunch"}', None),
    (b'{"id": "w", "label": "ham", "text": 5}', "invalid_event"),
    (b'{"id": "m", "text": "no label here"}', "missing_label"),
    (b'{"id": "e", "label": "ham"}', "empty_event"),
    (b'{"id": "u", "label": "ham", "text": "caf\xe9 \xff"}', "undecodable"),
    (b'{"id": "t", "label": "ham", "features": {"text": "clash"}}', "bad_feature"),
    (b'{"id": "n", "label": "ham", "text": "x", "features": {"a": {"b": 1}}}', "bad_feature"),
    (b'[1, 2]', "invalid_event"),
    (b'{"id": "neg", "label": "ham", "text": "hello", "features": {"n": -1}}', "bad_feature"),
    (b'{"id": "w0", "label": "ham", "text": "x", "weight": 0}', "invalid_event"),
    (b'{"id": "s2", "label": "spam", "text": "free prize claim", "features": {"n": 2}}', None),
    (b'{"id": "h2", "label": "ham", "text": "ok see you", "weight": 2.5}', None),
]


def test_every_bad_input_is_dead_lettered_and_the_replay_goes_on(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(line for line, _ in BAD_LINES) + b"\n")
    sink = MemorySink()
    with FileSource(path) as src:
        result = replay(src, Decoder("jsonl"), build_models(["nb", "mnb"]), sink,
                        batch_size=4, topic=src.topic)
    letters = [json.loads(v) for v in sink.values("dead-letters")]
    expected = [(i + 1, reason) for i, (_, reason) in enumerate(BAD_LINES) if reason]
    assert sorted((d["line"], d["reason"]) for d in letters) == expected
    for d in letters:
        assert d["source"] == {"topic": str(path), "partition": 0, "offset": d["line"] - 1}
        assert d["error"]
    undecodable = next(d for d in letters if d["reason"] == "undecodable")
    assert undecodable["payload_encoding"] == "base64"
    assert base64.b64decode(undecodable["payload"]) == BAD_LINES[6][0]
    clash = next(d for d in letters if d["line"] == 8)
    assert "text" in clash["error"] and clash["payload"] == BAD_LINES[7][0].decode()
    assert result.records == len(BAD_LINES)
    assert sum(result.dead_letters.values()) == len(expected) == 10
    assert result.events == 4  # the negative count is caught by mnb when predicting
    assert result.run.models["nb"].n_events == 4
    assert result.metrics()["dead_letters"] == 10


def test_tsv_bad_lines(tmp_path):
    path = tmp_path / "sms.txt"
    path.write_bytes(b"ham\thello there\nno tab here\n\tno label\nspam\t\xffbad\nspam\tWIN\n")
    with FileSource(path) as src:
        sink = MemorySink()
        result = replay(src, Decoder("tsv"), build_models(["nb"]), sink, topic=src.topic)
    reasons = [(json.loads(v)["line"], json.loads(v)["reason"]) for v in sink.values("dead-letters")]
    assert reasons == [(2, "invalid_event"), (3, "missing_label"), (4, "undecodable")]
    assert (result.records, result.events) == (5, 2)


def test_limit_and_batch_size():
    values = [f"{'spam' if i % 5 == 0 else 'ham'}\tmessage {i % 7}" for i in range(50)]
    result = replay(MemorySource({"m": values}), Decoder("tsv"), build_models(["nb"]),
                    MemorySink(), batch_size=8, limit=20)
    assert (result.records, result.events) == (20, 20)
    assert result.run.summary()["nb"]["cold"] == 1  # batches grow 1, 2, 4, 8, 5: only event 0 is cold
    assert result.batches == 5 and result.metrics()["batching"]["max_batch_size"] == 8
    with pytest.raises(UsageError):
        replay(MemorySource({"m": values}), Decoder("tsv"), {}, MemorySink(), batch_size=0)


def test_build_models_rejects_unknown_and_repeated_names():
    with pytest.raises(UsageError, match="unknown model 'zzz' \\(valid: nb, "):
        build_models(["nb", "zzz"])
    with pytest.raises(UsageError, match="twice"):
        build_models(["nb", "nb"])


def test_replay_file_on_sms_writes_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    console = Console(file=open(os.devnull, "w"), width=120)  # noqa: SIM115
    job = FileReplay(path=SMS, models=("nb", "cnb"), report=tmp_path / "rep")
    result = replay_file(job, console=console, progress=False)
    doc = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    assert set(doc["models"]) == {"nb", "cnb"}
    assert doc["events"] == doc["records"] == 5574 and doc["dead_letters"] == 0
    assert doc["source"] == str(SMS) and doc["positive"] == "spam"
    assert doc["labels"] == {"ham": 4827.0, "spam": 747.0}
    nb = doc["models"]["nb"]
    assert nb["events"] == 5574 and nb["accuracy"] > 0.9 and nb["dead_letters"] == 0
    assert 0 < nb["log_loss"] < 1 and 0.9 < nb["roc_auc"] <= 1 and 0.8 < nb["macro_f1"] <= 1
    assert nb["events_per_s"] > 0
    assert (tmp_path / "rep" / "learning_curves.png").stat().st_size > 1000
    assert not (tmp_path / "rep" / "dead_letters.jsonl").exists()  # nothing bad: no file
    assert result.dead_letter_path == tmp_path / "rep" / "dead_letters.jsonl"


def test_progress_bar_path_and_positive_flag(tmp_path, capsys):
    job = FileReplay(path=SMS, limit=600, positive="ham", report=tmp_path / "r")
    result = replay_file(job, progress=True)
    assert result.records == 600 and result.run.positive_label == "ham"
    doc = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert doc["positive"] == "ham" and doc["models"]["nb"]["roc_auc"] > 0.8
    assert "ROC AUC (ham)" in capsys.readouterr().out


def test_jsonl_field_renames(tmp_path):
    path = tmp_path / "news.jsonl"
    path.write_text('{"id": 101, "group": "sci.space", "body": "orbit", "split": "train"}\n'
                    '{"id": 102, "group": "rec.autos", "body": "engine", "who": "k1"}\n')
    decoder = Decoder("jsonl", label_field="group", text_field="body", key_field="who")
    with FileSource(path) as src:
        first, second = (decoder.decode(r) for r in src.poll(10))
    assert (first.event.id, first.label, first.x) == ("101", "sci.space", {"text": "orbit"})
    assert (second.label, second.event.key) == ("rec.autos", "k1")


def test_replay_with_a_loss_matrix_reports_cost_unsure_rate_and_plots(tmp_path, capsys):
    """--loss/--reject: every prediction is decided; metrics.json gains cost, unsure rate, ECE."""
    from streambayes.cli import main

    path = tmp_path / "mini.tsv"
    path.write_text("".join(f"{'spam' if i % 3 == 0 else 'ham'}\t"
                            f"{'win cash prize now' if i % 3 == 0 else 'see you at lunch'} {i % 7}\n"
                            for i in range(600)))
    report = tmp_path / "report"
    assert main(["replay", str(path), "--model", "mnb", "--loss", '{"spam": {"ham": 10}}',
                 "--reject", "0.2", "--report", str(report), "--batch-size", "50"]) == 0
    m = json.loads((report / "metrics.json").read_text())["models"]["mnb"]
    assert 0 <= m["expected_cost"] < 0.2 and 0 <= m["unsure_rate"] < 0.2 and 0 <= m["ece"] < 0.2
    assert m["cutoffs"]["positive"] == "spam" and 0 <= m["cutoffs"]["low"] <= m["cutoffs"]["high"] <= 1
    assert m["cutoffs"]["expected_cost"] <= m["expected_cost"] + 1e-12  # tuned on this very replay
    assert m["log_loss_calibrated"] > 0 and m["calibration_alpha"] > 0 and m["ece_calibrated"] >= 0
    for png in ("learning_curves.png", "reliability.png", "roc.png", "cost_vs_cutoff.png"):
        assert (report / png).stat().st_size > 1000
    assert "cost" in capsys.readouterr().out  # the summary table gains the cost columns
    assert main(["replay", str(path), "--loss", '{"spam": {"hamm": 1}}']) == 2
    err = capsys.readouterr().err  # the first label the replay meets is named
    assert "of the loss matrix (spam, hamm)" in err or "loss matrix does not list" in err
    assert main(["replay", str(path), "--reject", "0.5"]) == 2
    assert main(["replay", str(path), "--loss", '{"spam": {"ham": -1}}']) == 2
    assert "negative" in capsys.readouterr().err


def test_predict_decides_by_the_loss_matrix(tmp_path):
    from streambayes.cli import main

    train = tmp_path / "train.tsv"
    train.write_text("".join(f"{'spam' if i % 2 else 'ham'}\t{'win cash' if i % 2 else 'lunch'} x\n"
                             for i in range(40)))
    query = tmp_path / "q.jsonl"
    query.write_text('{"id": "a", "text": "win cash"}\n{"id": "b", "text": "x"}\n'
                     '{"id": "c", "text": "lunch"}\n')
    assert main(["learn", "--source", str(train), "--snapshots", str(tmp_path / "s")]) == 0
    out = tmp_path / "out.jsonl"
    assert main(["predict", "--source", str(query), "--sink", str(out), "--snapshots",
                 str(tmp_path / "s"), "--loss", '{"spam": {"ham": 10}}', "--reject", "0.1"]) == 0
    decisions = {p["id"]: p["decision"] for p in map(json.loads, out.read_text().splitlines())}
    assert decisions == {"a": "spam", "b": "unsure", "c": "ham"}


def test_online_calibration_lowers_the_log_loss_of_over_confident_naive_bayes(capsys):
    """On SMS spam, α fitted prequentially squashes MNB's extreme posteriors: lower log loss."""
    from streambayes.runtime.loops.replay import FileReplay, replay_file

    result = replay_file(FileReplay(path=SMS, models=("mnb",), limit=3000), progress=False)
    m = result.run.summary()["mnb"]
    assert m["calibration_alpha"] < 0.8
    assert m["log_loss_calibrated"] < 0.85 * m["log_loss"]


def test_per_key_replay_learns_each_readers_interest_and_reports_ranking(tmp_path):
    """--per-key: each key's model learns its reader's interest (a global model cannot); metrics
    gain precision_at_10pct and ndcg; an event without a key is a dead letter, not a crash."""
    import random

    from streambayes.cli import main

    rng = random.Random(0)
    topics = {"sport": "goal match team score", "tech": "code python linux chip",
              "food": "pizza pasta recipe cook"}
    likes = {f"u{i}": list(topics)[i % 3] for i in range(6)}
    lines = []
    for n in range(1500):
        topic, user = rng.choice(list(topics)), rng.choice(list(likes))
        text = " ".join(rng.choice(topics[topic].split()) for _ in range(5))
        label = "interesting" if likes[user] == topic else "boring"
        lines.append(json.dumps({"id": f"a{n}", "key": user, "text": text, "label": label}))
    lines.insert(700, json.dumps({"id": "no-key", "text": "goal", "label": "boring"}))
    path = tmp_path / "interest.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = {}
    for flag in ([], ["--per-key"]):
        report = tmp_path / ("keyed" if flag else "global")
        assert main(["replay", str(path), "--model", "mnb", "--report", str(report), *flag]) == 0
        out[bool(flag)] = json.loads((report / "metrics.json").read_text())
    keyed, pooled = out[True]["models"]["mnb"], out[False]["models"]["mnb"]
    assert keyed["accuracy"] > 0.95 > pooled["accuracy"]
    assert keyed["keys"] == 6 and keyed["precision_at_10pct"] > 0.9 and keyed["ndcg"] > 0.9
    assert "precision_at_10pct" not in pooled
    assert out[True]["dead_letters_by_reason"] == {"bad_feature": 1}
    assert out[False]["dead_letters"] == 0


def test_bad_input_with_a_label_delay_is_dead_lettered_at_its_own_line(tmp_path):
    """With --label-delay, rejections come back by stream position: the letters still name the
    right lines and nothing is lost."""
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(line for line, _ in BAD_LINES) + b"\n")
    expected = [(i + 1, reason) for i, (_, reason) in enumerate(BAD_LINES) if reason]
    for delay in (0, 3):
        sink = MemorySink()
        with FileSource(path) as src:
            result = replay(src, Decoder("jsonl"), build_models(["nb", "mnb"]), sink,
                            batch_size=4, topic=src.topic, label_delay=delay)
        letters = [json.loads(v) for v in sink.values("dead-letters")]
        got = sorted((d["line"], d["reason"]) for d in letters)
        if delay == 0:
            assert got == expected
        else:  # events whose labels are still pending at the end are never learned, so a fault
            # that only learning would find is not found for them; they are counted as pending
            assert set(got) <= set(expected) and result.run.pending == delay
            missing = sorted(set(expected) - set(got))
            assert all(reason == "bad_feature" for _, reason in missing) and len(missing) <= delay


def test_replay_with_a_label_delay_reports_windows_and_drift(tmp_path):
    from streambayes.cli import main

    report = tmp_path / "r"
    assert main(["replay", str(SMS), "--model", "mnb", "--limit", "2000", "--label-delay", "300",
                 "--report", str(report)]) == 0
    m = json.loads((report / "metrics.json").read_text())["models"]["mnb"]
    assert m["pending"] == 300 and m["events"] == 1700
    assert 0.8 < m["window_accuracy"] <= 1 and 0.8 < m["fading_accuracy"] <= 1
    assert isinstance(m["drift_points"], list)
    assert (report / "window_accuracy.png").stat().st_size > 1000


def test_a_stream_shorter_than_one_batch_gets_every_metric():
    values = [f"{'spam' if i % 3 == 0 else 'ham'}\t{'win cash' if i % 3 == 0 else 'lunch at noon'}"
              for i in range(40)]
    result = replay(MemorySource({"m": values}), Decoder("tsv"), {"mnb": make_model("mnb", alpha=1.0)},
                    MemorySink(), batch_size=256)
    summary = result.run.summary()["mnb"]
    assert summary["cold"] == 1 and summary["accuracy"] is not None and summary["accuracy"] > 0.9


def test_the_cli_replays_with_the_default_batch_size():
    from streambayes.cli import build_parser
    from streambayes.runtime.loops.replay import DEFAULT_BATCH_SIZE, FileReplay

    args = build_parser().parse_args(["replay", "events.jsonl"])
    assert args.batch_size is None and FileReplay.__dataclass_fields__["batch_size"].default is None
    assert DEFAULT_BATCH_SIZE == 256  # while every model predicts per event, else BATCH_PATH_SIZE
