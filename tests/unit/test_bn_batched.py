"""Batched posterior queries (one compiled contraction per query variable) against pgmpy."""

import logging

import numpy as np
import pytest

from streambayes.errors import NetworkError
from streambayes.models.bayesnet import read_bif
from streambayes.models.bayesnet.batched import BatchedQueries

from .test_bif import DATA


def random_queries(net, n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = {}
        for v in net.order:  # evidence from a forward sample: always possible
            p = net.cpts[v][(slice(None), *[net.state_index[u][x[u]] for u in net.parents[v]])]
            x[v] = net.states[v][rng.choice(len(p), p=p / p.sum())]
        q, *ev = (str(v) for v in rng.choice(net.variables, 1 + rng.integers(0, 5), replace=False))
        out.append((q, {v: x[v] for v in ev}))
    return out


@pytest.mark.parametrize("name, tol", [("asia", 1e-12), ("child", 1e-9), ("sachs", 1e-6), ("alarm", 1e-6)])
def test_batched_posteriors_equal_pgmpy(name, tol):
    """``tol``: sachs/alarm CPT columns sum to 1 only to the file's rounding (see batched.py)."""
    from pgmpy.inference import VariableElimination
    from pgmpy.readwrite import BIFReader

    logging.disable(logging.WARNING)
    net = read_bif(DATA / "bif" / f"{name}.bif")
    queries = random_queries(net, 60, seed=3)
    pg = VariableElimination(BIFReader(str(DATA / "bif" / f"{name}.bif")).get_model())
    bq = BatchedQueries(net)
    by_target = {}
    for i, (q, _) in enumerate(queries):
        by_target.setdefault(q, []).append(i)
    for q, idx in by_target.items():
        got = bq.posteriors(q, [queries[i][1] for i in idx])
        for row, i in zip(got, idx, strict=True):
            r = pg.query([q], evidence=queries[i][1], show_progress=False)
            want = [r.values[r.state_names[q].index(s)] for s in net.states[q]]
            np.testing.assert_allclose(row, want, atol=tol)
    assert len(bq.plans) == len(by_target)  # one plan per query variable, reused


def test_batched_refuses_impossible_and_unknown_evidence():
    net = read_bif(DATA / "bif" / "asia.bif")
    bq = BatchedQueries(net)
    with pytest.raises(NetworkError, match="query 1 has probability zero"):
        bq.posteriors("dysp", [{"smoke": "yes"}, {"either": "no", "lung": "yes"}])
    with pytest.raises(NetworkError, match="unknown evidence 'lung'='maybe'"):
        bq.posteriors("dysp", [{"lung": "maybe"}])
    with pytest.raises(NetworkError, match="both queried"):
        bq.posteriors("dysp", [{"dysp": "yes"}])
