"""learn/predict/replay --per-key with bounds (issue 10): --max-resident, --max-resident-mb and
STREAMBAYES_MAX_KEYS on the command line; spilled learners serve the same posteriors."""

import json

from streambayes.cli import main
from streambayes.snapshot import SnapshotStore

READERS = [f"r{i}" for i in range(8)]
TOPICS = ("goal match league", "code linux kernel", "stocks market rates")


def write_events(path, n=240, labelled=True):
    lines = []
    for i in range(n):
        key, topic = READERS[i % len(READERS)], TOPICS[(i // len(READERS)) % 3]
        event = {"id": f"e{i}", "key": key, "text": topic}
        if labelled:
            liked = TOPICS.index(topic) == READERS.index(key) % 3
            event["label"] = "interesting" if liked else "boring"
        lines.append(json.dumps(event))
    path.write_text("\n".join(lines) + "\n")
    return path


def learn_and_predict(tmp_path, name, learn_flags, predict_flags):
    snaps, out = tmp_path / name, tmp_path / f"{name}.jsonl"
    assert main(["learn", "--source", str(tmp_path / "train.jsonl"), "--snapshots", str(snaps),
                 "--model", "mnb", "--per-key", "--every", "50", *learn_flags]) == 0
    assert main(["predict", "--source", str(tmp_path / "query.jsonl"), "--sink", str(out),
                 "--snapshots", str(snaps), "--per-key", "--clues", "0", *predict_flags]) == 0
    return snaps, {p["id"]: p["posterior"] for p in map(json.loads, out.read_text().splitlines())}


def test_bounded_learn_and_predict_serve_the_posteriors_of_unbounded_ones(tmp_path):
    write_events(tmp_path / "train.jsonl")
    write_events(tmp_path / "query.jsonl", n=48, labelled=False)
    snaps, bounded = learn_and_predict(tmp_path, "bounded", ["--max-resident", "2"],
                                       ["--max-resident", "1", "--max-resident-mb", "64"])
    _, unbounded = learn_and_predict(tmp_path, "unbounded", ["--max-resident", "100"], [])
    assert len(bounded) == 48 and bounded == unbounded
    state = SnapshotStore(snaps).latest().state
    assert state["params"]["max_resident"] == 2 and sorted(state["keys"]) == READERS
    spill_files = list((snaps / "spill").iterdir())
    assert len(spill_files) >= len(READERS) and "users" not in state


def test_keys_past_max_keys_are_dead_letters_with_reason_limit(tmp_path, monkeypatch, capsys):
    write_events(tmp_path / "train.jsonl", n=80)
    monkeypatch.setenv("STREAMBAYES_MAX_KEYS", "5")
    dead = tmp_path / "dead.jsonl"
    assert main(["learn", "--source", str(tmp_path / "train.jsonl"), "--snapshots",
                 str(tmp_path / "s"), "--model", "mnb", "--per-key", "--dead-letter", str(dead)]) == 0
    letters = [json.loads(line) for line in dead.read_text().splitlines()]
    assert len(letters) == 30 and {d["reason"] for d in letters} == {"limit"}
    assert all("max_keys is 5" in d["error"] for d in letters)
    assert sorted(SnapshotStore(tmp_path / "s").latest().state["keys"]) == READERS[:5]
    assert "learned 50 events from 80 records (30 dead letters)" in capsys.readouterr().out


def test_predict_per_key_refuses_a_model_that_is_not_per_key_and_bad_bounds(tmp_path, capsys):
    write_events(tmp_path / "train.jsonl", n=40)
    write_events(tmp_path / "query.jsonl", n=4, labelled=False)
    assert main(["learn", "--source", str(tmp_path / "train.jsonl"), "--snapshots",
                 str(tmp_path / "s"), "--model", "mnb"]) == 0
    assert main(["predict", "--source", str(tmp_path / "query.jsonl"), "--sink",
                 str(tmp_path / "o.jsonl"), "--snapshots", str(tmp_path / "s"), "--per-key"]) == 2
    assert "not a per-key model" in capsys.readouterr().err
    assert main(["replay", str(tmp_path / "train.jsonl"), "--per-key", "--max-resident", "0"]) == 2
    assert main(["replay", str(tmp_path / "train.jsonl"), "--per-key", "--max-resident-mb", "-1"]) == 2


def test_replay_per_key_with_a_small_cap_matches_an_unbounded_replay(tmp_path):
    write_events(tmp_path / "train.jsonl")
    reports = {}
    for name, flags in (("small", ["--max-resident", "1"]), ("big", [])):
        assert main(["replay", str(tmp_path / "train.jsonl"), "--model", "mnb", "--per-key",
                     "--report", str(tmp_path / name), *flags]) == 0
        reports[name] = json.loads((tmp_path / name / "metrics.json").read_text())["models"]["mnb"]
    for metric in ("events", "accuracy", "log_loss"):
        assert reports["small"][metric] == reports["big"][metric]


def test_learn_resumes_from_a_manifest_snapshot_and_collects_old_spill_files(tmp_path):
    full = write_events(tmp_path / "full.jsonl", n=480).read_text().splitlines(keepends=True)
    write_events(tmp_path / "query.jsonl", n=48, labelled=False)
    (tmp_path / "train.jsonl").write_text("".join(full[:200]))
    args = ["learn", "--source", str(tmp_path / "train.jsonl"), "--snapshots", str(tmp_path / "r"),
            "--model", "mnb", "--per-key", "--every", "40", "--keep", "2", "--max-resident", "3"]
    assert main(args) == 0
    (tmp_path / "train.jsonl").write_text("".join(full))  # more events arrive; learn again
    assert main(args) == 0
    out = tmp_path / "resumed.jsonl"
    assert main(["predict", "--source", str(tmp_path / "query.jsonl"), "--sink", str(out),
                 "--snapshots", str(tmp_path / "r"), "--per-key", "--clues", "0"]) == 0
    resumed = {p["id"]: p["posterior"] for p in map(json.loads, out.read_text().splitlines())}
    _, once = learn_and_predict(tmp_path, "once", ["--max-resident", "100"], [])
    assert resumed == once
    store = SnapshotStore(tmp_path / "r")
    named = set()
    for snapshot_id in store.ids():
        state = store.load(snapshot_id).state
        named |= {f"{k}:{g}" for k, g in zip(state["keys"], state["spill"].tolist(), strict=True)}
    assert len(list((tmp_path / "r" / "spill").iterdir())) == len(named)  # the rest collected


def test_shards_with_spilled_learners_merge_in_predict_and_in_snapshot_merge(tmp_path):
    lines = write_events(tmp_path / "all.jsonl", n=240).read_text().splitlines(keepends=True)
    (tmp_path / "a.jsonl").write_text("".join(lines[:120]))
    (tmp_path / "b.jsonl").write_text("".join(lines[120:]))
    write_events(tmp_path / "query.jsonl", n=48, labelled=False)
    for shard in ("a", "b"):
        assert main(["learn", "--source", str(tmp_path / f"{shard}.jsonl"), "--snapshots",
                     str(tmp_path / shard), "--model", "mnb", "--per-key", "--max-resident", "2"]) == 0
    assert main(["snapshot", "merge", str(tmp_path / "a"), str(tmp_path / "b"), "--to",
                 str(tmp_path / "m")]) == 0
    served = {}
    for name, dirs in (("both", f"{tmp_path / 'a'},{tmp_path / 'b'}"), ("merged", str(tmp_path / "m"))):
        out = tmp_path / f"{name}.jsonl"
        assert main(["predict", "--source", str(tmp_path / "query.jsonl"), "--sink", str(out),
                     "--snapshots", dirs, "--per-key", "--clues", "0", "--max-resident", "1"]) == 0
        served[name] = [p["posterior"] for p in map(json.loads, out.read_text().splitlines())]
    assert served["both"] == served["merged"] and len(served["both"]) == 48
    assert not (tmp_path / "m" / "spill").exists()  # the merged snapshot holds every learner
