"""Regressions from the review of the learn/predict runtime (each failed before its fix)."""

from __future__ import annotations

import json
from collections import deque, namedtuple
from types import SimpleNamespace

from streambayes.cli import main
from streambayes.models import make_model
from streambayes.runtime.kafka.kafka_python import GroupSource
from streambayes.runtime.loops.predict import ModelWatcher
from streambayes.runtime.loops.shards import open_stores
from streambayes.runtime.records.sources import FileSource
from streambayes.snapshot import SnapshotStore


def _jsonl(path, events):
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_a_model_error_is_a_dead_letter_not_a_crash(tmp_path, capsys):
    """spode trained on numbers still in warm-up used to raise IndexError in predict."""
    train = _jsonl(tmp_path / "num.jsonl", [{"id": "1", "label": "a", "features": {"n": 1.5}},
                                           {"id": "2", "label": "b", "features": {"n": 3.0}}])
    query = _jsonl(tmp_path / "q.jsonl", [{"id": "q1", "features": {"n": 2.0}}])
    assert main(["learn", "--source", str(train), "--snapshots", str(tmp_path / "s"),
                 "--model", "spode"]) == 0
    out, dead = tmp_path / "out.jsonl", tmp_path / "dead.jsonl"
    assert main(["predict", "--source", str(query), "--sink", str(out), "--snapshots",
                 str(tmp_path / "s"), "--dead-letter", str(dead)]) == 0
    posted = out.read_text().splitlines() if out.exists() else []
    letters = [json.loads(line) for line in dead.read_text().splitlines()] if dead.exists() else []
    assert len(posted) + len(letters) == 1  # served or dead-lettered, never lost
    assert all(d["reason"] == "model_error" for d in letters)


def test_a_snapshot_refuses_another_source_unless_asked(tmp_path, capsys, monkeypatch):
    events = _jsonl(tmp_path / "ev.jsonl", [{"id": str(i), "label": "ab"[i % 2], "text": f"w{i}"}
                                            for i in range(10)])
    snaps = str(tmp_path / "s")
    monkeypatch.chdir(tmp_path)
    assert main(["learn", "--source", "ev.jsonl", "--snapshots", snaps]) == 0
    assert main(["learn", "--source", str(events), "--snapshots", snaps]) == 2
    assert "was learned from ev.jsonl" in capsys.readouterr().err
    assert SnapshotStore(snaps).latest().events == 10  # nothing counted twice
    assert main(["learn", "--source", str(events), "--snapshots", snaps, "--new-source"]) == 0
    assert SnapshotStore(snaps).latest().events == 20


def test_following_a_csv_waits_for_the_end_of_a_quoted_field(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(b'label,text\nspam,"hello\n')
    source = FileSource(path, follow=True)
    assert source.poll(10) == []  # the field is still open
    with open(path, "ab") as f:
        f.write(b'world"\nham,bye\n')
    got = source.poll(10)
    assert [r.value for r in got] == [b'spam,"hello\nworld"', b"ham,bye"]
    assert [r.offset for r in got] == [0, 1] and [r.line for r in got] == [2, 4]
    source.close()


def test_group_positions_forget_revoked_partitions():
    """A partition taken away and given back must not commit its old, lower offset."""
    assignment = {0, 1}
    committed = []

    def record(p, off):
        return SimpleNamespace(value=b"{}", key=None, topic="t", partition=p, offset=off,
                               timestamp=0)

    tp = namedtuple("TP", "partition")
    batches = iter([{tp(0): [record(0, 99)]}, {tp(1): [record(1, 4)]}])
    fake = SimpleNamespace(poll=lambda **kw: next(batches),
                           assignment=lambda: {tp(p) for p in assignment},
                           commit=lambda offsets: committed.append(
                               {tp.partition: o.offset for tp, o in offsets.items()}))
    source = GroupSource.__new__(GroupSource)
    source.topic, source._consumer, source._next = "t", fake, {}
    source._resets, source._deleted = deque(), 0
    source._backoff = SimpleNamespace(reset=lambda: None, wait=lambda: True)
    source.poll(10)
    source.commit(source.positions())
    assignment.discard(0)  # p0 moves to another member, which commits 200 ...
    assignment.add(0)  # ... and comes back
    assignment.discard(0)
    source.poll(10)
    assignment.add(0)
    source.commit(source.positions())
    assert committed == [{0: 100}, {1: 5}]


def test_the_predictor_keeps_serving_when_new_shards_cannot_merge(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for directory, name in ((a, "mnb"), (b, "mnb")):
        model = make_model(name)
        model.learn_many([{"text": "x y"}, {"text": "z"}], ["p", "q"])
        SnapshotStore(directory).write(model.to_state(), model=name,
                                       positions={"t": {"0" if directory == a else "1": 1}},
                                       events=2)
    watcher = ModelWatcher(open_stores([a, b]))
    assert watcher.check() and watcher.current.label == "000001+000001"
    other = make_model("bnb")
    other.learn_many([{"text": "x"}], ["p"])
    SnapshotStore(b).write(other.to_state(), model="bnb", positions={"t": {"1": 2}}, events=1)
    assert watcher.check() is False and watcher.current.label == "000001+000001"


def test_a_weight_that_could_overflow_the_counts_is_a_dead_letter():
    from streambayes.runtime.records.decode import Decoder
    from streambayes.runtime.records.sources import Record

    record = Record(b'{"id": "w", "label": "spam", "text": "x", "weight": 1e308}', None, "t", 0, 0)
    letter = Decoder("jsonl").decode(record)
    assert letter.reason == "limit" and "weight" in letter.error
