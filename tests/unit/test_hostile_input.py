"""Hostile records mixed with good events through replay, learn and predict on files (issue 10).

The bounded CI version of ``bench/hostile_input.py``: every command exits 0, every record comes out
learned (or published) or as a dead letter with a reason, and the good events are all learned.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from streambayes.cli import main
from streambayes.devtools.hostile import hostile_records

N_HOSTILE = 240  # every kind ten times or so; the big (MB) kinds come every 500th record
N_GOOD = 300


def _good(n: int, labelled: bool = True) -> list[bytes]:
    words = ["win cash prize now", "lunch at noon", "free offer click", "see you tomorrow"]
    out = []
    for i in range(n):
        event = {"id": f"g{i}", "text": words[i % 4] + f" {i % 7}"}
        if labelled:
            event["label"] = "spam" if i % 2 == 0 else "ham"
        out.append(json.dumps(event).encode())
    return out


def _mixed(good: list[bytes], bad: list[bytes]) -> list[bytes]:
    """Good and bad records in turn, then the rest of the longer list."""
    pairs = [r for pair in zip(good, bad, strict=False) for r in pair]
    return pairs + good[len(bad):] + bad[len(good):]


def _letters(path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def streams(tmp_path_factory):
    work = tmp_path_factory.mktemp("hostile")
    bad = hostile_records(N_HOSTILE, big_max=1)
    bad.append(hostile_records(500, big_max=1)[499])  # one 2 MB record too
    train = _mixed(_good(N_GOOD), bad)
    test = _mixed(_good(N_GOOD // 2, labelled=False), bad)
    (work / "train.jsonl").write_bytes(b"\n".join(train) + b"\n")
    (work / "test.jsonl").write_bytes(b"\n".join(test) + b"\n")
    return work, len(train), len(test)


def test_replay_survives_hostile_records(streams, capsys):
    work, n_train, _ = streams
    dl = work / "replay-dl.jsonl"
    assert main(["replay", str(work / "train.jsonl"), "--model", "nb,mnb,gnb", "--report",
                 str(work / "report"), "--dead-letter", str(dl)]) == 0
    metrics = json.loads((work / "report" / "metrics.json").read_text())
    letters = _letters(dl)
    assert metrics["events"] + len(letters) == n_train
    assert all(letter["reason"] for letter in letters)
    assert metrics["events"] >= N_GOOD  # every good event, plus hostile ones that are merely odd
    reasons = Counter(letter["reason"] for letter in letters)
    assert reasons["limit"] > 0 and reasons["bad_json"] > 0


def test_learn_then_predict_survive_hostile_records(streams, capsys):
    work, n_train, n_test = streams
    snaps, dl = work / "snaps", work / "learn-dl.jsonl"
    assert main(["learn", "--source", str(work / "train.jsonl"), "--snapshots", str(snaps),
                 "--model", "nb", "--dead-letter", str(dl)]) == 0
    capsys.readouterr()
    assert main(["snapshot", "show", str(snaps)]) == 0
    learned = json.loads(capsys.readouterr().out)["events"]
    letters = _letters(dl)
    assert learned + len(letters) == n_train and learned >= N_GOOD
    assert all(letter["reason"] for letter in letters)

    out, dl = work / "posteriors.jsonl", work / "predict-dl.jsonl"
    assert main(["predict", "--source", str(work / "test.jsonl"), "--sink", str(out),
                 "--snapshots", str(snaps), "--dead-letter", str(dl)]) == 0
    posteriors = _letters(out)
    letters = _letters(dl)
    assert len(posteriors) + len(letters) == n_test
    assert {p["id"] for p in posteriors} >= {f"g{i}" for i in range(N_GOOD // 2)}
    assert all(letter["reason"] for letter in letters)
