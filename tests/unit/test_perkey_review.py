"""Regressions from the review of the merged per-key, snapshot and bounds work (issue 10)."""

from __future__ import annotations

import json
import logging

import pytest

from streambayes.cli import main
from streambayes.snapshot import SnapshotStore
from tests.unit.test_perkey_cli import write_events


def _learn(tmp_path, snaps, *flags, source="train.jsonl"):
    return main(["learn", "--source", str(tmp_path / source), "--snapshots", str(snaps),
                 "--model", "mnb", "--per-key", "--every", "50", *flags])


def test_a_per_key_snapshot_whose_global_model_does_not_rebuild_falls_back(tmp_path, capsys):
    write_events(tmp_path / "train.jsonl")
    write_events(tmp_path / "query.jsonl", n=16, labelled=False)
    snaps = tmp_path / "s"
    assert _learn(tmp_path, snaps, "--max-resident", "1") == 0
    store = SnapshotStore(snaps)
    good = store.latest()
    state = dict(good.state)
    state["global"] = {k: v for k, v in state["global"].items() if k != "classes"}  # cannot rebuild
    store.write(state, model="perkey", positions=good.positions, events=good.events,
                config=good.header["config"])
    out = tmp_path / "out.jsonl"
    assert main(["predict", "--source", str(tmp_path / "query.jsonl"), "--sink", str(out),
                 "--snapshots", str(snaps), "--per-key"]) == 0
    assert {json.loads(p)["snapshot"] for p in out.read_text().splitlines()} == {good.id}
    assert main(["snapshot", "ls", str(snaps)]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert sum("CORRUPT" in line for line in listed) == 1 and sum(" ok" in line for line in listed) >= 1


def test_spill_files_are_signed_like_snapshots(tmp_path, monkeypatch):
    from streambayes.snapshot.fileformat import unpack

    monkeypatch.setenv("STREAMBAYES_SNAPSHOT_KEY", "sekret")
    write_events(tmp_path / "train.jsonl")
    snaps = tmp_path / "s"
    assert _learn(tmp_path, snaps, "--max-resident", "1") == 0
    files = sorted((snaps / "spill").glob("*.sbs"))
    assert files
    header, _ = unpack(files[0].read_bytes(), key=b"sekret")  # verifies under the key
    with pytest.raises(Exception, match="(?i)sign"):
        unpack(files[0].read_bytes(), key=b"other")
    assert header["config"]["key"].startswith("r")


def test_model_bounds_reach_per_key_learners_in_learn_and_replay(tmp_path, capsys):
    lines = [json.dumps({"id": f"e{i}", "key": f"k{i % 3}", "text": "word " * (i % 4 + 1),
                         "label": f"c{i % 5}"}) for i in range(100)]
    (tmp_path / "five.jsonl").write_text("\n".join(lines) + "\n")
    dl = tmp_path / "dl.jsonl"
    assert main(["learn", "--source", str(tmp_path / "five.jsonl"), "--snapshots", str(tmp_path / "s"),
                 "--model", "mnb", "--per-key", "--max-classes", "2", "--dead-letter", str(dl)]) == 0
    reasons = [json.loads(line)["reason"] for line in dl.read_text().splitlines()]
    assert reasons and set(reasons) == {"limit"} and len(reasons) == 60
    dl2 = tmp_path / "dl2.jsonl"
    assert main(["replay", str(tmp_path / "five.jsonl"), "--model", "mnb", "--per-key",
                 "--max-classes", "2", "--dead-letter", str(dl2)]) == 0
    assert {json.loads(line)["reason"] for line in dl2.read_text().splitlines()} == {"limit"}


def test_per_key_posteriors_are_served_without_clue_errors(tmp_path, caplog):
    write_events(tmp_path / "train.jsonl")
    write_events(tmp_path / "query.jsonl", n=16, labelled=False)
    assert _learn(tmp_path, tmp_path / "s") == 0
    with caplog.at_level(logging.ERROR):
        assert main(["predict", "--source", str(tmp_path / "query.jsonl"), "--sink",
                     str(tmp_path / "out.jsonl"), "--snapshots", str(tmp_path / "s"), "--per-key"]) == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_replay_dead_letters_respect_the_sink_line_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMBAYES_SINK_MAX_LINE_BYTES", "2000")
    (tmp_path / "x.jsonl").write_text('{"label": "a", "text": "' + "x" * 50_000 + '" bad json\n'
                                      '{"label": "a", "text": "fine"}\n')
    dl = tmp_path / "dl.jsonl"
    assert main(["replay", str(tmp_path / "x.jsonl"), "--dead-letter", str(dl)]) == 0
    (line,) = dl.read_bytes().splitlines()
    assert len(line) <= 2000 and json.loads(line)["truncated"] is True


def test_a_clean_replay_leaves_no_dead_letters_of_an_earlier_run(tmp_path):
    dl = tmp_path / "dl.jsonl"
    (tmp_path / "bad.jsonl").write_text('{"label": "a", "text": "x"}\n{oops\n')
    (tmp_path / "good.jsonl").write_text('{"label": "a", "text": "x"}\n{"label": "b", "text": "y"}\n')
    assert main(["replay", str(tmp_path / "bad.jsonl"), "--dead-letter", str(dl)]) == 0
    assert dl.exists()
    assert main(["replay", str(tmp_path / "good.jsonl"), "--dead-letter", str(dl)]) == 0
    assert not dl.exists()
