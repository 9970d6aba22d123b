"""Calibrated serving (issue 11): the learner fits α prequentially, the snapshot keeps it, the
predictor serves calibrated posteriors and decisions with the raw log-posterior alongside."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from streambayes.cli import main
from streambayes.evaluate.calibration import OnlineCalibrator
from streambayes.runtime.loops import calibrate
from streambayes.snapshot import SnapshotStore

WORDS = {"spam": "win cash prize free offer claim now click".split(),
         "ham": "lunch meeting report call team noon see you".split()}


def _events(n: int, seed: int, labelled: bool = True) -> list[str]:
    """Long, noisy two-class texts whose words come in runs of four: naive Bayes counts each piece
    of evidence four times, so its posteriors are over-confident (α near 1/4 repairs them)."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        y = "spam" if rng.random() < 0.4 else "ham"
        other = "ham" if y == "spam" else "spam"
        words = [str(rng.choice(WORDS[y] if rng.random() < 0.58 else WORDS[other])) for _ in range(15)]
        words = [w for w in words for _ in range(4)]
        event = {"id": f"e{i}", "text": " ".join(words)}
        if labelled:
            event["label"] = y
        lines.append(json.dumps(event))
    return lines


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    work = tmp_path_factory.mktemp("cal")
    (work / "train.jsonl").write_text("\n".join(_events(1500, 0)) + "\n")
    test = _events(600, 1)
    (work / "test.jsonl").write_text("\n".join(test) + "\n")
    assert main(["learn", "--source", str(work / "train.jsonl"), "--snapshots", str(work / "s"),
                 "--model", "mnb", "--batch-size", "100"]) == 0
    return work, [json.loads(line)["label"] for line in test]


def _log_loss(path, truth) -> float:
    posts = [json.loads(line) for line in path.read_text().splitlines()]
    pairs = zip(posts, truth, strict=True)
    return -sum(math.log(max(p["posterior"][y], 1e-300)) for p, y in pairs) / len(truth)


def test_the_snapshot_carries_the_calibration_the_learner_fitted(trained):
    work, _ = trained
    snap = SnapshotStore(work / "s").latest()
    stored = snap.header["config"]["calibration"]
    # a new learner starts with batches of 1, 2, 4...: only the events met while it knew fewer
    # than two classes (or not their own class) are left out
    assert 1490 <= stored["n_events"] <= 1498
    assert 0 < stored["alpha"] < 0.8  # the long noisy texts make raw posteriors over-confident
    assert calibrate.from_config(snap.header["config"]).alpha == pytest.approx(stored["alpha"])


def test_predict_serves_calibrated_posteriors_with_the_raw_ones_alongside(trained):
    work, truth = trained
    cal, raw = work / "cal.jsonl", work / "raw.jsonl"
    assert main(["predict", "--source", str(work / "test.jsonl"), "--sink", str(cal),
                 "--snapshots", str(work / "s")]) == 0
    assert main(["predict", "--source", str(work / "test.jsonl"), "--sink", str(raw),
                 "--snapshots", str(work / "s"), "--raw"]) == 0
    first = json.loads(cal.read_text().splitlines()[0])
    alpha = first["calibration_alpha"]
    row = np.array([first["raw_log_proba"]["ham"], first["raw_log_proba"]["spam"]])
    expected = np.exp(alpha * row - np.logaddexp(*(alpha * row)))
    assert [first["posterior"]["ham"], first["posterior"]["spam"]] == pytest.approx(expected.tolist())
    plain = json.loads(raw.read_text().splitlines()[0])
    assert plain["calibration_alpha"] is None and plain["raw_log_proba"] is None
    assert _log_loss(cal, truth) < 0.8 * _log_loss(raw, truth)


def test_restart_resumes_the_calibrator_and_counts_each_event_once(tmp_path):
    lines = _events(400, 2)
    (tmp_path / "a.jsonl").write_text("\n".join(lines[:250]) + "\n")
    (tmp_path / "all.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["learn", "--source", str(tmp_path / "a.jsonl"), "--snapshots", str(tmp_path / "s"),
                 "--model", "mnb"]) == 0
    first = SnapshotStore(tmp_path / "s").latest().header["config"]["calibration"]["n_events"]
    # another file (--new-source): its 400 events are added to the restored calibrator
    assert main(["learn", "--source", str(tmp_path / "all.jsonl"), "--snapshots", str(tmp_path / "s"),
                 "--new-source"]) == 0
    header = SnapshotStore(tmp_path / "s").latest().header
    assert 240 <= first <= 248 and header["config"]["calibration"]["n_events"] == first + 400


def test_no_calibration_flag_and_per_key_models_store_none(tmp_path):
    (tmp_path / "t.jsonl").write_text("\n".join(_events(50, 3)) + "\n")
    assert main(["learn", "--source", str(tmp_path / "t.jsonl"), "--snapshots", str(tmp_path / "s"),
                 "--model", "mnb", "--no-calibration"]) == 0
    assert "calibration" not in SnapshotStore(tmp_path / "s").latest().header["config"]


def test_shard_calibrators_add_like_counts():
    a, b = OnlineCalibrator(), OnlineCalibrator()
    rows = np.log(np.array([[0.99, 0.01], [0.2, 0.8], [0.999, 0.001]]))
    a.update(rows[:2], np.array([1, 1]))
    b.update(rows[2:], np.array([1]))
    total = calibrate.merged([{"calibration": calibrate.to_config(a)},
                              {"calibration": calibrate.to_config(b)}])
    both = OnlineCalibrator()
    both.update(rows, np.array([1, 1, 1]))
    assert total.n_events == 3 and total.alpha == pytest.approx(both.alpha)
    assert calibrate.merged([{"calibration": calibrate.to_config(a)}, {}]) is None
