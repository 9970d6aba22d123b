"""Hot reload off the serving thread (issue 13 item 1): a predictor loads a newer snapshot on a
thread of its own (read, decode, merge, one throwaway prediction) while it serves batches with the
model it has, and swaps between two batches; a batch is never held behind a load."""

from __future__ import annotations

import json
import threading
import time

import pytest

from streambayes.errors import UsageError
from streambayes.models import make_model
from streambayes.runtime.loops.predict import ModelWatcher, PredictLoop
from streambayes.runtime.loops.shards import open_stores
from streambayes.runtime.loops.watcher import Reloader, warm
from streambayes.runtime.records.decode import Decoder
from streambayes.runtime.records.sinks import MemorySink
from streambayes.runtime.records.sources import Record
from streambayes.snapshot import SnapshotStore


def write(store: SnapshotStore, spam_words: str, events: int) -> None:
    model = make_model("mnb")
    model.learn_many([{"text": spam_words}, {"text": "see you at lunch"}], ["spam", "ham"])
    store.write(model.to_state(), model="mnb", positions={}, events=events)


class Trickle:
    """One record a poll, forever (until ``stop``); ``polls`` counts them."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop, self.next, self.polls = stop, 0, 0

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        self.polls += 1
        record = Record(json.dumps({"id": f"e{self.next}", "text": "cash prize"}).encode(), None,
                        "in", 0, self.next)
        self.next += 1
        time.sleep(0.002)
        return [record]

    def positions(self) -> dict:
        return {"in": {"0": self.next}}

    def commit(self, positions: dict) -> None:
        pass


def test_a_newer_snapshot_is_loaded_off_the_serving_thread_while_batches_go_on(tmp_path,
                                                                              monkeypatch):
    from streambayes.runtime.loops import watcher as watching

    store = SnapshotStore(tmp_path)
    write(store, "win cash now", 2)
    gate, loads, stop = threading.Event(), [], threading.Event()
    real = watching.latest_all

    def latest_all(stores):  # the load's read of the snapshots: held until the test lets it go
        loads.append(threading.current_thread().name)
        if len(loads) > 1:
            assert gate.wait(30)
        return real(stores)

    monkeypatch.setattr(watching, "latest_all", latest_all)
    watcher = ModelWatcher(open_stores([tmp_path]))
    source, sink = Trickle(stop), MemorySink()
    loop = PredictLoop(source, Decoder("jsonl", require_label=False), watcher, (sink, "out"),
                       stop=stop, stop_at_end=False, reload_seconds=0.05, clues=0)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while len(sink.values('out')) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        write(store, "win cash prize now", 3)  # a newer snapshot: its load is held at the gate
        while len(loads) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        served = len(sink.values('out'))
        time.sleep(0.3)  # the load waits at the gate; the loop goes on serving the old model
        assert len(sink.values('out')) > served + 20
        assert {json.loads(v)["snapshot"] for v in sink.values("out")} == {"000001"}
        gate.set()
        while loop.stats.reloads < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
    finally:
        gate.set()
        stop.set()
        thread.join(30)
    assert loop.stats.reloads == 1 and watcher.current.label == "000002"
    assert loads[0] == thread.name and loads[1] == "snapshot-reloader"  # the first: at start
    labels = [json.loads(v)["snapshot"] for v in sink.values('out')]
    first_new = labels.index("000002")
    assert set(labels[:first_new]) == {"000001"} and set(labels[first_new:]) == {"000002"}


def test_a_load_error_is_raised_in_the_serving_loop(tmp_path):
    store = SnapshotStore(tmp_path)
    write(store, "win cash now", 2)
    watcher = ModelWatcher(open_stores([tmp_path]))
    assert watcher.check()
    watcher.per_key = True  # the next model is refused: not a per-key one
    write(store, "win cash prize now", 3)
    reloader = Reloader(watcher)
    reloader.start()
    reloader.wait(30)
    with pytest.raises(UsageError, match="not a per-key model"):
        reloader.take()
    assert watcher.current.label == "000001" and reloader.take() is None


def test_an_unchanged_store_loads_nothing_and_one_load_runs_at_a_time(tmp_path):
    store = SnapshotStore(tmp_path)
    write(store, "win cash now", 2)
    watcher = ModelWatcher(open_stores([tmp_path]))
    assert watcher.check()
    reloader = Reloader(watcher)
    reloader.start()
    first = reloader._thread
    reloader.start()  # a load runs: no second one
    assert reloader._thread is first
    reloader.wait(30)
    assert reloader.take() is None and not reloader.busy()  # nothing new to load


def test_warm_makes_what_a_first_prediction_makes_and_never_raises(monkeypatch):
    from streambayes.models import model_from_state
    from streambayes.models.seminaive import ode

    model = make_model("aode")
    model.learn_many([{"a": "x", "b": "y"}, {"a": "z", "b": "y"}, {"a": "x", "b": "w"}],
                     ["p", "q", "p"])
    made = []
    real = ode.Derived
    monkeypatch.setattr(ode, "Derived", lambda *args: made.append(1) or real(*args))
    loaded = model_from_state(model.to_state())  # as a predictor loads it: no derived estimates
    warm(loaded)
    assert len(made) == 1  # the warm-up made them
    loaded.predict_log_proba_many(loaded.featurize([{"a": "x", "b": "y"}]))
    assert len(made) == 1  # the first batch served finds them made

    class Broken:
        def featurize(self, xs):
            raise ValueError("cannot")

    warm(Broken())  # logged at debug, not raised
