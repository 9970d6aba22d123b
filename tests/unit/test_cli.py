"""The ``streambayes`` command line: DESIGN §6 is a contract; bad usage exits 2 in one line."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streambayes.cli import main

REPO = Path(__file__).resolve().parents[2]


def shared_data() -> Path:
    """$STREAMBAYES_DATA, else ../shared/data beside the repository; missing data fails."""
    env = os.environ.get("STREAMBAYES_DATA")
    root = Path(env).resolve() if env else REPO.parent / "shared" / "data"
    assert (root / "sms_spam_collection" / "SMSSpamCollection").is_file(), (
        f"SMS Spam Collection missing under {root}; set STREAMBAYES_DATA")
    return root


SMS = shared_data() / "sms_spam_collection" / "SMSSpamCollection"


def _usage_error(capsys, argv) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err + out
    return err


@pytest.mark.parametrize("argv, needle", [
    ([], "missing command"),
    (["replay"], "required: SOURCE"),
    (["replay", "/no/such/file.jsonl"], "no such file: /no/such/file.jsonl"),
    (["replay", str(SMS), "--model", "nb,zzz"], "unknown model 'zzz' (valid: nb, mnb"),
    (["replay", str(SMS), "--model", "nb,"], "--model"),
    (["replay", str(SMS), "--bogus"], "unrecognized arguments: --bogus"),
    (["replay", str(SMS), "--limit", "ten"], "--limit"),
    (["replay", str(SMS), "--batch-size", "0"], "--batch-size"),
    (["replay", str(SMS), "--format", "xml"], "--format"),
    (["replay", str(SMS), "--model", "bn"], "needs --network"),  # bn without its network
    (["replay", "kafka://localhost/t"], "HOST:PORT"),
    (["replay", "kafka://localhost:9092/t?at=3"], "unknown parameter 'at'"),
    (["replay", "."], "directory"),
    (["learn", "--source", "x"], "required: --snapshots"),
    (["learn", "--source", "x.tsv", "--snapshots", "s", "--every", "0"], "--every"),
    (["learn", "--source", "x.tsv", "--snapshots", "s", "--partitions", "0,0"], "--partitions"),
    (["predict", "--source", "x.tsv", "--sink", "o.jsonl"], "required: --snapshots"),
    (["snapshot", "show"], "DIR"),
    (["produce", "x.tsv"], "required: --to"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_usage_exits_2_with_one_line(capsys, argv, needle):
    assert needle in _usage_error(capsys, argv)


def test_csv_without_the_label_column_is_bad_usage(capsys, tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b\n1,2\n")
    assert "no label column 'label'" in _usage_error(capsys, ["replay", str(path)])


def test_bad_environment_is_bad_usage(capsys, monkeypatch):
    monkeypatch.setenv("STREAMBAYES_OFFLINE", "perhaps")
    assert "STREAMBAYES_OFFLINE" in _usage_error(capsys, ["demo"])


def test_help_and_version_exit_0(capsys):
    assert main(["--help"]) == 0
    assert "replay" in capsys.readouterr().out
    assert main(["replay", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--model", "--format", "--label-field", "--text-field", "--key-field",
                 "--limit", "--dead-letter", "--report", "--batch-size", "--positive"):
        assert flag in out
    assert main(["--version"]) == 0


def test_replay_sms_with_report(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["replay", str(SMS), "--model", "nb,mnb", "--report", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "accuracy" in out and "nb" in out and "5574 records" in out and "0 dead letters" in out
    doc = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert list(doc["models"]) == ["nb", "mnb"] and doc["models"]["nb"]["accuracy"] > 0.9
    assert not list(tmp_path.glob("*.jsonl"))


def test_replay_dead_letters_go_to_the_default_file(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "in.jsonl"
    data.write_bytes(b'{"id": "a", "label": "x", "text": "t"}\nnot json\n'
                     b'{"id": "b", "text": "t"}\n{"id": "c", "label": "y", "text": "u"}\n')
    assert main(["replay", str(data), "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "3 records, 1 events, 2 dead letters" in out
    assert ("dead letters (bad_json 1, missing_label 1) written to "
            "streambayes-dead-letters.jsonl") in out
    default = tmp_path / "streambayes-dead-letters.jsonl"
    letters = [json.loads(line) for line in default.read_text().splitlines()]
    assert [(d["line"], d["reason"]) for d in letters] == [(2, "bad_json"), (3, "missing_label")]
    explicit = tmp_path / "dl" / "bad.jsonl"
    assert main(["replay", str(data), "--dead-letter", str(explicit)]) == 0
    assert len(explicit.read_text().splitlines()) == 2


def test_csv_replay_with_fields(capsys, tmp_path):
    data = tmp_path / "t.csv"
    rows = ["who,colour,size,class"] + [
        f"u{i},{'red' if i % 3 else 'blue'},{i % 4},{'a' if i % 3 else 'b'}" for i in range(60)]
    data.write_text("\n".join(rows) + "\n")
    argv = ["replay", str(data), "--label-field", "class", "--key-field", "who",
            "--model", "nb,catnb", "--batch-size", "10", "--report", str(tmp_path / "r")]
    assert main(argv) == 0, capsys.readouterr().err
    doc = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert doc["events"] == 60 and doc["models"]["catnb"]["accuracy"] > 0.9
    assert doc["positive"] == "b"


def test_python_dash_m_runs_without_traceback(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "streambayes", "replay", str(tmp_path / "x")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"streambayes: error: no such file: {tmp_path / 'x'}"


def test_a_stop_while_waiting_for_the_broker_exits_0(tmp_path, capsys):
    """SIGTERM before the broker ever answered: nothing to save, exit 0 (a failure otherwise)."""
    import signal
    import threading

    argv = ["learn", "--source", "kafka://127.0.0.1:1/t", "--snapshots", str(tmp_path / "s")]
    timer = threading.Timer(1.0, lambda: signal.raise_signal(signal.SIGTERM))
    timer.start()
    try:
        assert main(argv) == 0
    finally:
        timer.cancel()
    assert "stopped before the broker answered" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["learn", "predict"])
def test_the_stop_handlers_are_in_before_the_runtime_is_imported(monkeypatch, command):
    """``_learn``/``_predict`` import the runtime (seconds on a loaded host): SIGTERM must
    already ask for a stop then, not kill the process (-15)."""
    import signal

    from streambayes.cli import commands

    seen = {}

    def body(args, settings, stop):
        seen["handler"] = signal.getsignal(signal.SIGTERM)
        seen["stop"] = stop
        return 0

    monkeypatch.setattr(commands, f"_{command}", body)
    before = signal.getsignal(signal.SIGTERM)
    assert getattr(commands, f"_run_{command}")(None, None) == 0
    assert callable(seen["handler"]) and seen["handler"] is not before
    seen["handler"](signal.SIGTERM, None)
    assert seen["stop"].is_set()
    assert signal.getsignal(signal.SIGTERM) is before  # put back afterwards


def test_sigterm_as_soon_as_the_learner_listens_exits_0(tmp_path):
    """How the kill harnesses stop members: SIGTERM the moment the process catches it ends it
    with status 0, even before the broker answered. SIGUSR1 before it writes the stacks of the
    process's threads to stderr and does not stop it."""
    import signal

    from streambayes.devtools.kills import catches_sigterm, wait_until

    argv = [sys.executable, "-m", "streambayes", "learn", "--source", "kafka://127.0.0.1:1/t",
            "--snapshots", str(tmp_path / "s")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: proc.poll() is not None or catches_sigterm(proc.pid), 60, "a handler")
        assert proc.poll() is None
        proc.send_signal(signal.SIGUSR1)  # its threads' stacks to stderr; it goes on
        time.sleep(0.5)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopped before the broker answered" in out
    assert "Current thread" in err and "(most recent call first)" in err, err


def test_catches_sigterm_reads_the_process_mask():
    """True for this test process once it handles SIGTERM, False before; True for a pid that
    does not exist (nothing to wait for)."""
    import signal

    from streambayes.devtools.kills import catches_sigterm

    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        assert not catches_sigterm(os.getpid())
        signal.signal(signal.SIGTERM, lambda *_: None)
        assert catches_sigterm(os.getpid())
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert catches_sigterm(2**22 + 12345)


def test_learn_and_predict_per_key_and_the_loss_matrix_from_the_environment(tmp_path, monkeypatch):
    """learn/predict --per-key: each reader's model (keys required: a keyless event is a dead
    letter); STREAMBAYES_LOSS/REJECT give the decisions when no flag does."""
    lines = []
    for n in range(300):
        user, topic = ("ann", "bob")[n % 2], ("goal match", "code linux")[(n // 2) % 2]
        liked = (user == "ann") == (topic == "goal match")
        lines.append(json.dumps({"id": f"a{n}", "key": user, "text": topic,
                                 "label": "interesting" if liked else "boring"}))
    lines.append(json.dumps({"id": "keyless", "text": "goal", "label": "boring"}))
    train = tmp_path / "train.jsonl"
    train.write_text("\n".join(lines) + "\n")
    snaps, dead = tmp_path / "s", tmp_path / "dead.jsonl"
    assert main(["learn", "--source", str(train), "--snapshots", str(snaps), "--model", "mnb",
                 "--per-key", "--dead-letter", str(dead)]) == 0
    assert [json.loads(line)["reason"] for line in dead.read_text().splitlines()] == ["bad_feature"]
    query = tmp_path / "q.jsonl"
    query.write_text('{"id": "1", "key": "ann", "text": "goal match"}\n'
                     '{"id": "2", "key": "bob", "text": "goal match"}\n'
                     '{"id": "3", "key": "cat", "text": "code"}\n')
    monkeypatch.setenv("STREAMBAYES_LOSS", '{"interesting": {"boring": 5}}')
    monkeypatch.setenv("STREAMBAYES_REJECT", "0.4")
    out = tmp_path / "out.jsonl"
    assert main(["predict", "--source", str(query), "--sink", str(out), "--snapshots", str(snaps)]) == 0
    posts = {p["id"]: p for p in map(json.loads, out.read_text().splitlines())}
    assert posts["1"]["decision"] == "interesting" and posts["2"]["decision"] == "boring"
    assert posts["3"]["model"] == "perkey" and posts["3"]["decision"] in ("boring", "unsure")
