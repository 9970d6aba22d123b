"""Model bounds (max_classes, max_fields, max_values): accepted at the bound, refused one past it
with a LimitError before anything changes, dead-lettered as ``limit`` by the runtime; prediction
never grows a model; the memory of many field names follows the data."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest

from streambayes.cli import main
from streambayes.errors import FeatureError, LimitError, ModelError
from streambayes.models import AODE, CategoricalNB, MultinomialNB, NaiveBayes, make_model, model_from_state
from streambayes.snapshot import SnapshotStore
from streambayes.snapshot.fileformat import pack, unpack


def _same(a: dict, b: dict) -> bool:
    return repr(a) == repr(b)


def _letters(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _jsonl(path, rows: list[dict]):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# -- the pure layer ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["nb", "catnb", "gnb", "mnb", "aode"])
def test_max_classes_at_the_bound_and_one_past(name):
    m = make_model(name, max_classes=3)
    xs = [{"colour": "red", "n": 1.0, "text": "hello"}] * 3
    m.learn_many(xs, ["a", "b", "c"])  # exactly at the bound
    before = m.to_state()
    with pytest.raises(LimitError) as info:  # a good event and one past the bound: all refused
        m.learn_many(xs[:2], ["a", "d"])
    assert (info.value.bound, info.value.limit, info.value.offending) == ("max_classes", 3, "d")
    assert "max_classes=3" in str(info.value) and "'d'" in str(info.value)
    assert isinstance(info.value, FeatureError)  # the runtime's per-event fallback applies
    assert _same(before, m.to_state()) and m.classes == ["a", "b", "c"]
    m.learn_one(xs[0], "c")  # known classes still learn
    assert m.n_events == 4


def test_max_classes_on_the_plain_text_fast_path():
    m = MultinomialNB(max_classes=2)
    m.learn_one({"text": "hi"}, "a")
    m.learn_one({"text": "ho"}, "b")
    before = m.to_state()
    with pytest.raises(LimitError, match="max_classes=2"):
        m.learn_one({"text": "hu"}, "c")
    assert _same(before, m.to_state())


@pytest.mark.parametrize("name", ["nb", "catnb", "gnb", "aode"])
def test_max_fields_counts_categorical_and_numeric_names(name):
    m = make_model(name, max_fields=3)
    m.learn_many([{"a": "x", "b": 1.0}, {"c": "y"}], ["p", "q"])  # 3 fields: at the bound
    before = m.to_state()
    with pytest.raises(LimitError) as info:
        m.learn_many([{"a": "x"}, {"d": 2.0}], ["p", "q"])
    assert (info.value.bound, info.value.limit, info.value.offending) == ("max_fields", 3, "d")
    assert _same(before, m.to_state())
    m.learn_one({"a": "z", "b": 2.0, "c": "y"}, "p")  # known fields still learn
    assert m.n_events == 3


@pytest.mark.parametrize("name", ["nb", "catnb"])
def test_max_values_per_categorical_field(name):
    m = make_model(name, max_values=3)
    m.learn_many([{"colour": c, "size": "s"} for c in ("red", "green", "blue")], ["a", "b", "a"])
    before = m.to_state()
    with pytest.raises(LimitError) as info:
        m.learn_many([{"colour": "red"}, {"colour": "pink"}, {"colour": "cyan"}], ["a", "b", "a"])
    assert (info.value.bound, info.value.limit, info.value.offending) == ("max_values", 3, "pink")
    assert "'colour'" in str(info.value)
    assert _same(before, m.to_state())
    m.learn_many([{"colour": "red", "size": "m"}], ["b"])  # another field has room of its own
    assert m.n_events == 4


def test_max_values_for_the_semi_naive_models_is_refused_not_dropped():
    m = AODE(max_values=2)
    m.learn_many([{"v": "x"}, {"v": "y"}], ["a", "b"])
    before = m.to_state()
    with pytest.raises(LimitError, match="max_values=2"):
        m.learn_one({"v": "z"}, "a")
    assert _same(before, m.to_state())


def test_numbers_are_values_too_for_categorical_nb():
    m = CategoricalNB(max_values=2)
    m.learn_many([{"n": 1}, {"n": 2}], ["a", "b"])
    with pytest.raises(LimitError, match="max_values"):
        m.learn_one({"n": 3}, "a")


@pytest.mark.parametrize("name", ["nb", "catnb", "gnb", "aode"])
def test_prediction_never_grows_a_model(name):
    m = make_model(name, max_classes=2, max_fields=2, max_values=2)
    m.learn_many([{"a": "x", "b": 1.0}, {"a": "y", "b": 2.0}], ["p", "q"])
    before = m.to_state()
    unseen = [{"a": "new", "b": 3.0, "c": "past the field bound", "d": 4.0, "text": "unseen"},
              {"a": "newer", "z": "q"}]
    proba = m.predict_proba_many(unseen)
    assert proba.shape == (2, 2) and np.allclose(proba.sum(axis=1), 1)
    m.predict_proba_one(unseen[0])
    m.clues_many(unseen)
    assert _same(before, m.to_state())


def test_bounds_survive_a_snapshot_round_trip():
    m = NaiveBayes(max_classes=2, max_fields=5, max_values=7)
    m.learn_many([{"a": "x", "n": 1.0}, {"a": "y", "n": 2.0}], ["p", "q"])
    state = m.to_state()
    data, _ = pack(state, snapshot_id="1", model=m.name, config={}, positions={}, events=2,
                   created_at="2026-01-01T00:00:00Z")
    for restored in (model_from_state(state), model_from_state(unpack(data)[1])):
        assert (restored.max_classes, restored.max_fields, restored.max_values) == (2, 5, 7)
        with pytest.raises(LimitError, match="max_classes=2"):
            restored.learn_one({"a": "x"}, "r")
        assert _same(state, restored.to_state())


def test_a_state_from_before_the_bounds_still_loads_and_counts_its_fields():
    m = NaiveBayes(max_fields=2)
    m.learn_many([{"a": "x", "n": 1.0}], ["p"])
    state = m.to_state()
    del state["fields"]
    for key in ("max_classes", "max_fields", "max_values"):
        del state["params"][key]
    old = model_from_state(state)
    assert old.max_fields == 10_000 and sorted(old._fields.values) == ["a", "n"]


@pytest.mark.parametrize("bound, a_rows, b_rows", [
    ("max_classes", [({"f": "x"}, "p"), ({"f": "x"}, "q")], [({"f": "x"}, "r")]),
    ("max_fields", [({"f": "x", "g": "y"}, "p")], [({"h": "x"}, "p")]),
    ("max_values", [({"f": "x"}, "p"), ({"f": "y"}, "p")], [({"f": "z"}, "p")]),
])
def test_a_merge_whose_union_exceeds_a_bound_is_refused(bound, a_rows, b_rows):
    a, b = NaiveBayes(**{bound: 2}), NaiveBayes(**{bound: 2})
    for model, rows in ((a, a_rows), (b, b_rows)):
        model.learn_many([x for x, _ in rows], [y for _, y in rows])
    before = a.to_state()
    with pytest.raises(ModelError, match=bound):
        a.merge(b)
    assert _same(before, a.to_state())


def test_merge_within_the_bounds_still_adds():
    a, b = NaiveBayes(max_classes=2, max_values=2), NaiveBayes(max_classes=2, max_values=2)
    a.learn_one({"f": "x"}, "p")
    b.learn_one({"f": "y"}, "q")
    a.merge(b)
    assert a.classes == ["p", "q"] and a.n_events == 2


def test_bounds_must_be_positive_integers():
    with pytest.raises(ModelError, match="max_classes"):
        NaiveBayes(max_classes=0)


# -- memory follows the data -------------------------------------------------------------------
def test_many_distinct_field_names_cost_memory_in_proportion():
    """100,000 distinct categorical field names (ten new names per event, as a hostile stream
    sends them) through nb in batches of 32, predicted then learned: the peak allocation stays
    under 600 bytes per field name, names, indexes and counts included (the old per-field arrays
    and ValueIndex objects took 660)."""
    n, per, batch = 100_000, 10, 32
    m = NaiveBayes(max_fields=n + 10)
    tracemalloc.start()
    for start in range(0, n // per, batch):
        xs = [{**{f"f{i}_{j}": "v" for j in range(per)}, "n": float(i % 3)}
              for i in range(start, min(n // per, start + batch))]
        X = m.featurize(xs)
        m.predict_log_proba_many(X)
        m.learn_many(X, ["ab"[i % 2] for i in range(len(xs))])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(m._fields) == n + 1
    assert peak < 600 * n, f"peak {peak:,} bytes for {n:,} field names"


def test_many_distinct_numeric_field_names_cost_memory_in_proportion():
    """The Gaussian component used to build a dense (batch, all fields) matrix per batch."""
    n, batch = 20_000, 256
    m = NaiveBayes(max_fields=n + 10)
    tracemalloc.start()
    for start in range(0, n, batch):
        xs = [{f"f{i}": 1.5, "g": float(i % 3)} for i in range(start, min(n, start + batch))]
        X = m.featurize(xs)
        m.predict_log_proba_many(X)
        m.learn_many(X, ["ab"[i % 2] for i in range(len(xs))])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1024 * n, f"peak {peak:,} bytes for {n:,} numeric field names"


# -- the runtime: learn, replay, predict -------------------------------------------------------
def test_learn_dead_letters_the_events_past_a_bound_and_learns_the_rest(tmp_path):
    rows = [{"id": str(i), "label": f"c{i % 5}", "features": {"f": "x"}} for i in range(10)]
    rows.insert(6, {"id": "new-label", "label": "c9", "features": {"f": "x"}})
    rows.insert(8, {"id": "new-field", "label": "c1", "features": {"g": "y"}})
    src, dead, snaps = _jsonl(tmp_path / "ev.jsonl", rows), tmp_path / "dead.jsonl", tmp_path / "s"
    assert main(["learn", "--source", str(src), "--snapshots", str(snaps), "--model", "catnb",
                 "--max-classes", "5", "--max-fields", "1", "--dead-letter", str(dead)]) == 0
    letters = _letters(dead)
    assert sorted(json.loads(d["payload"])["id"] for d in letters) == ["new-field", "new-label"]
    assert {d["reason"] for d in letters} == {"limit"}
    snap = SnapshotStore(snaps).latest()
    model = model_from_state(snap.state)
    assert snap.events == 10 and model.classes == [f"c{i}" for i in range(5)]
    assert (model.max_classes, model.max_fields) == (5, 1)


def test_the_bounds_come_from_the_environment_too(tmp_path, monkeypatch):
    rows = [{"id": str(i), "label": f"c{i}", "features": {"f": "x"}} for i in range(4)]
    src, dead, snaps = _jsonl(tmp_path / "ev.jsonl", rows), tmp_path / "dead.jsonl", tmp_path / "s"
    monkeypatch.setenv("STREAMBAYES_MAX_CLASSES", "3")
    assert main(["learn", "--source", str(src), "--snapshots", str(snaps), "--model", "nb",
                 "--dead-letter", str(dead)]) == 0
    assert [d["reason"] for d in _letters(dead)] == ["limit"]
    assert model_from_state(SnapshotStore(snaps).latest().state).classes == ["c0", "c1", "c2"]


def test_replay_of_1200_labels_keeps_1000_classes_and_letters_200(tmp_path, capsys):
    from streambayes.runtime.loops.replay import FileReplay, replay_file

    rows = [{"id": f"e{i}", "label": f"c{i}", "features": {"colour": "xyz"[i % 3], "n": i % 5}}
            for i in range(1200)]
    src, dead = _jsonl(tmp_path / "labels.jsonl", rows), tmp_path / "dead.jsonl"
    assert main(["replay", str(src), "--model", "catnb", "--dead-letter", str(dead)]) == 0
    letters = _letters(dead)
    assert len(letters) == 200 and {d["reason"] for d in letters} == {"limit"}
    assert {json.loads(d["payload"])["label"] for d in letters} == {f"c{i}" for i in range(1000, 1200)}
    result = replay_file(FileReplay(path=src, models=("catnb",), dead_letter=tmp_path / "d2.jsonl"))
    assert len(result.run.models["catnb"].classes) == 1000
    assert result.dead_letters == {"limit": 200}


def test_replay_takes_the_bounds_on_the_command_line(tmp_path, capsys):
    rows = [{"id": str(i), "label": "ab"[i % 2], "features": {"v": f"x{i}"}} for i in range(6)]
    src, dead = _jsonl(tmp_path / "ev.jsonl", rows), tmp_path / "dead.jsonl"
    assert main(["replay", str(src), "--model", "nb,catnb", "--max-values", "4",
                 "--dead-letter", str(dead)]) == 0
    assert [json.loads(d["payload"])["id"] for d in _letters(dead)] == ["4", "5"]
    assert main(["replay", str(src), "--max-values", "0"]) == 2


def test_predict_serves_events_past_the_bounds_without_growing(tmp_path):
    train = _jsonl(tmp_path / "t.jsonl", [{"id": str(i), "label": "ab"[i % 2], "features": {"f": f"v{i % 2}"}}
                                          for i in range(4)])
    query = _jsonl(tmp_path / "q.jsonl", [{"id": "q1", "features": {"f": "unseen", "g": "new field"}},
                                          {"id": "q2", "label": "brand-new", "features": {"f": "v0"}}])
    snaps, out, dead = tmp_path / "s", tmp_path / "out.jsonl", tmp_path / "dead.jsonl"
    assert main(["learn", "--source", str(train), "--snapshots", str(snaps), "--model", "catnb",
                 "--max-classes", "2", "--max-fields", "1", "--max-values", "2"]) == 0
    before = SnapshotStore(snaps).latest()
    assert main(["predict", "--source", str(query), "--sink", str(out), "--snapshots", str(snaps),
                 "--dead-letter", str(dead)]) == 0
    posted = [json.loads(line) for line in out.read_text().splitlines()]
    assert [p["id"] for p in posted] == ["q1", "q2"] and not _letters(dead)
    assert set(posted[0]["posterior"]) == {"a", "b"}
    assert SnapshotStore(snaps).latest().id == before.id


def test_replay_with_label_delay_letters_the_events_past_a_bound_as_limit(tmp_path, capsys):
    rows = [{"id": str(i), "label": f"c{i}", "features": {"f": "x"}} for i in range(10)]
    src, dead = _jsonl(tmp_path / "ev.jsonl", rows), tmp_path / "dead.jsonl"  # the last 2: pending
    assert main(["replay", str(src), "--model", "catnb", "--max-classes", "5", "--label-delay", "2",
                 "--dead-letter", str(dead)]) == 0
    letters = _letters(dead)
    assert [json.loads(d["payload"])["id"] for d in letters] == ["5", "6", "7"]
    assert {d["reason"] for d in letters} == {"limit"}
