"""A learn loop freezes what is alive when it starts, so collections skip it (runtime/heap.py)."""

from __future__ import annotations

import gc
import json

from streambayes.models import make_model
from streambayes.runtime.loops.learn import LearnLoop
from streambayes.runtime.records.decode import Decoder
from streambayes.runtime.records.sources import MemorySource
from streambayes.snapshot.store import SnapshotStore


def test_learn_loop_freezes_the_objects_alive_at_its_start(tmp_path):
    gc.unfreeze()
    held = [[i] for i in range(1000)]  # tracked objects alive before the loop
    events = [json.dumps({"id": f"m{i}", "text": f"word{i % 7} spam", "label": "ab"[i % 2]}).encode()
              for i in range(50)]
    loop = LearnLoop(MemorySource({"learn": events}), Decoder("jsonl"), SnapshotStore(tmp_path),
                     lambda: make_model("nb"), "nb", stop_at_end=True)
    try:
        stats = loop.run()
        assert stats.events == 50
        assert gc.get_freeze_count() >= len(held)
    finally:
        gc.unfreeze()  # the rest of the test session collects as usual
