"""Memory of many per-key learners (issue 10): with ``max_resident`` set, the live learners stay
within the cap and the traced peak stays within a bound derived from the cap, however many keys
the stream brings (the spilled learners live in files next to the snapshots)."""

import tracemalloc

import numpy as np

from streambayes.models.perkey import MODEL_OVERHEAD, PerKeyModel
from streambayes.runtime.loops.spill import DiskSpillStore

N_KEYS = 2_500  # distinct keys, each a new learner, 25 times the cap (bench/perkey_memory.py runs 100,000)
CAP = 100  # live learners
BOOKKEEPING = 600  # bytes per key ever seen: its label count and manifest entries, key strings
SLACK = 6 * 2**20  # one batch's events, features and the global learner


def stream(n_keys, batch=500, seed=0):
    """Batches of categorical events, every event a new key (the worst case for residency)."""
    rng = np.random.default_rng(seed)
    for lo in range(0, n_keys, batch):
        xs = [{"colour": str(c), "size": str(s)} for c, s in rng.integers(0, 6, (batch, 2))]
        ys = [str(y) for y in rng.integers(0, 2, batch)]
        yield xs, ys, [f"reader-{i}" for i in range(lo, lo + batch)]


def test_many_keys_keep_the_live_learners_and_the_traced_peak_within_the_cap(tmp_path):
    model = PerKeyModel("catnb", max_resident=CAP, spill=DiskSpillStore(tmp_path / "spill"))
    batches = list(stream(N_KEYS))
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        most_resident = 0
        for xs, ys, keys in batches:
            model.learn_many(xs, ys, keys=keys)
            most_resident = max(most_resident, len(model.resident_keys))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    learner = model.resident_bytes // len(model.resident_keys)  # arrays + MODEL_OVERHEAD each
    assert learner >= MODEL_OVERHEAD
    bound = 2 * CAP * learner + N_KEYS * BOOKKEEPING + SLACK
    assert len(model.keys) == N_KEYS and most_resident <= CAP
    assert peak - base < bound, f"traced peak {(peak - base) / 2**20:.1f} MiB over {bound / 2**20:.1f}"
    # every key's learner is on disk or live, and comes back with what it learned
    assert model.n_labels("reader-0") == 1 and model.user_model("reader-0").n_events == 1
