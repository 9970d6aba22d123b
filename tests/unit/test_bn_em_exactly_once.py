"""Online EM is exactly-once: its state does not depend on how the stream is cut into calls.

A learner restarted from a snapshot reads the rest of a Kafka stream in other poll batches than an
uninterrupted one. The rows short of an EM mini-batch wait in the state (``pending``), so for any
split of the same rows into ``learn_many`` calls, with snapshot round trips (through the real
snapshot file format) at any split points, the final state is bit-identical to one call with all
rows: every array ``np.array_equal``, the same ``n_steps``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streambayes import BayesNet
from streambayes.errors import ModelError
from streambayes.models import model_from_state
from streambayes.models.bayesnet import read_bif
from streambayes.models.bayesnet.em import OnlineEM
from streambayes.models.bayesnet.sampling import forward_sample
from streambayes.snapshot import pack, unpack
from tests.unit.conftest import bif_dir

ASIA = read_bif(bif_dir() / "asia.bif")
ROWS = forward_sample(ASIA, 400, seed=7)
WEIGHTS = np.random.default_rng(7).choice([0.5, 1.0, 2.0], size=len(ROWS))  # dyadic: exact sums


def _stream(n: int, first_missing: int, missing: float, seed: int) -> np.ndarray:
    """``n`` asia rows, complete up to ``first_missing``, then cells missing with rate ``missing``
    (and ``either`` hidden in every third row, so EM always has work)."""
    codes = ROWS[:n].copy()
    rng = np.random.default_rng(seed)
    tail = codes[first_missing:]
    tail[rng.random(tail.shape) < missing] = -1
    tail[::3, ASIA.index["either"]] = -1
    return codes


def _round_trip(bn: BayesNet) -> BayesNet:
    data, _ = pack(bn.to_state(), snapshot_id="1", model=bn.name, config={}, positions={},
                   events=bn.n_events, created_at="2024-01-01T00:00:00Z")
    return model_from_state(unpack(data)[1])


def _assert_identical(a, b, path: str = "state") -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{path}: keys differ"
        for k in a:
            _assert_identical(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, path
        assert np.array_equal(a, b), f"{path}: {int((a != b).sum())} elements differ"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 240), first_missing=st.integers(0, 60), missing=st.sampled_from([0.0, 0.1, 0.3]),
       batch=st.integers(1, 40), prior=st.sampled_from(["prior", "file"]), seed=st.integers(0, 3),
       cuts=st.lists(st.tuples(st.floats(0, 1), st.booleans()), max_size=8))
def test_em_state_does_not_depend_on_how_rows_are_split(n, first_missing, missing, batch, prior, seed, cuts):
    codes, w = _stream(n, min(first_missing, n), missing, seed), WEIGHTS[:n]
    params = {"parameters": prior, "prior": "bdeu", "em_batch_size": batch}
    whole = BayesNet(ASIA, **params)
    whole.learn_many(codes, w=w)

    points = sorted({int(f * n) for f, _ in cuts} | {0, n})
    trips = {int(f * n) for f, trip in cuts if trip}
    parts = BayesNet(ASIA, **params)
    for lo, hi in zip(points, points[1:], strict=False):
        parts.learn_many(codes[lo:hi], w=w[lo:hi])
        if hi in trips:
            parts = _round_trip(parts)
    _assert_identical(parts.to_state(), whole.to_state())
    if whole._em is not None:
        assert parts._em.n_steps == whole._em.n_steps
        assert len(whole._em.pending_w) < batch


def test_one_step_per_full_chunk_and_the_short_chunk_waits_in_the_state():
    codes = _stream(100, 0, 0.0, 0)
    em = OnlineEM(ASIA, batch_size=30, seed=0)
    for lo in range(0, 100, 7):
        em.partial_fit(codes[lo:lo + 7])
    assert em.n_steps == 3 and em.n_rows == 90 and len(em.pending_w) == 10
    state = em.to_state()
    assert np.array_equal(state["pending_codes"], codes[90:])
    again = OnlineEM.from_state(ASIA, state, batch_size=30, seed=0)
    one = OnlineEM(ASIA, batch_size=30, seed=0).partial_fit(codes)
    for e in (em, again):
        e.partial_fit(codes[:20])      # the 10 waiting rows + 20 new ones fill the 4th chunk
        assert e.n_steps == 4 and len(e.pending_w) == 0
    one.partial_fit(codes[:20])
    for v in ASIA.variables:
        assert np.array_equal(em.cpts[v], one.cpts[v]) and np.array_equal(again.stats[v], one.stats[v])
    em.partial_fit(codes[:5])
    assert em.flush().n_steps == 5 and len(em.pending_w) == 0 and em.n_rows == 125


def test_predictions_use_the_steps_made_not_the_waiting_rows():
    codes = _stream(50, 0, 0.0, 0)
    bn = BayesNet(ASIA, parameters="prior", em_batch_size=40)
    bn.learn_many(codes[:40])
    before = bn.cpt("either", as_array=True)
    bn.learn_many(codes[40:45])
    assert np.array_equal(bn.cpt("either", as_array=True), before) and bn.n_events == 45
    with pytest.raises(ModelError, match="EM"):
        bn.merge(bn.clone())


@pytest.mark.parametrize("bad", [
    {"pending_codes": np.zeros((2, 8), np.int64), "pending_w": np.ones(3)},         # lengths differ
    {"pending_codes": np.zeros((2, 7), np.int64), "pending_w": np.ones(2)},         # too few columns
    {"pending_codes": np.full((2, 8), 5, np.int64), "pending_w": np.ones(2)},       # state out of range
    {"pending_codes": np.zeros((30, 8), np.int64), "pending_w": np.ones(30)},       # a full chunk
    {"pending_codes": np.zeros((2, 8), np.int64), "pending_w": np.array([1.0, np.nan])},
])
def test_a_state_with_bad_pending_rows_is_refused(bad):
    state = OnlineEM(ASIA, batch_size=30, seed=0).to_state() | bad
    with pytest.raises(ModelError, match="pending"):
        OnlineEM.from_state(ASIA, state, batch_size=30, seed=0)
