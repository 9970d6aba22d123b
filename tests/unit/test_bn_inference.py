"""Exact inference and d-separation on the bnlearn networks, against pgmpy and brute force."""

import itertools
import logging
import os
from pathlib import Path

import numpy as np
import pytest

from streambayes.errors import NetworkError
from streambayes.models.bayesnet import inference, read_bif
from streambayes.models.bayesnet.dsep import d_separated
from streambayes.models.bayesnet.inference import VariableElimination

DATA = Path(os.environ.get("STREAMBAYES_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")


def _net(name):
    return read_bif(DATA / "bif" / f"{name}.bif")


def _forward(net, n, rng):
    """Forward samples as codes (n, V): evidence taken from them has probability > 0."""
    codes = np.zeros((n, len(net.states)), np.int64)
    for v in net.order:
        table = net.cpts[v][(slice(None), *(codes[:, net.index[p]] for p in net.parents[v]))]
        cum = np.cumsum(table.reshape(net.card(v), -1) * np.ones((1, n)), axis=0)
        codes[:, net.index[v]] = np.minimum((rng.random(n) * cum[-1] > cum).sum(axis=0), net.card(v) - 1)
    return codes


def _random_queries(net, n, n_query, rng):
    queries = []
    for row in _forward(net, n, rng):
        chosen = [str(v) for v in rng.choice(net.variables, n_query + rng.integers(0, 5), replace=False)]
        queries.append((chosen[:n_query], {v: net.states[v][row[net.index[v]]] for v in chosen[n_query:]}))
    return queries


def _brute_joint(net):
    """P(every joint state) as an array with one axis per variable (small networks only)."""
    joint = np.ones([net.card(v) for v in net.states])
    for v in net.states:
        joint = joint * _expand(net.cpts[v], [net.index[u] for u in (v, *net.parents[v])], len(net.states))
    return joint


def _expand(table, axes, ndim):
    order = np.argsort(axes)
    shape = [1] * ndim
    for a, size in zip(np.array(axes)[order], np.array(table.shape)[order], strict=True):
        shape[a] = size
    return np.transpose(table, order).reshape(shape)


@pytest.mark.parametrize("name", ["asia", "sachs", "alarm", "child"])
def test_random_posterior_and_joint_queries_equal_pgmpy(name):
    from pgmpy.inference import VariableElimination as PgmpyVE
    from pgmpy.readwrite import BIFReader

    logging.disable(logging.WARNING)
    net = _net(name)
    ours, theirs = VariableElimination(net), PgmpyVE(BIFReader(str(DATA / "bif" / f"{name}.bif")).get_model())
    rng = np.random.default_rng(4)
    for n_query, n in [(1, 100), (2, 25)]:
        for variables, evidence in _random_queries(net, n, n_query, rng):
            got = ours.query(variables, evidence)
            ref = theirs.query(variables, evidence=evidence, show_progress=False, joint=True)
            ref_values = np.transpose(ref.values, [ref.variables.index(v) for v in variables])
            for axis, v in enumerate(variables):
                ref_values = np.take(ref_values, [ref.state_names[v].index(s) for s in net.states[v]], axis)
            np.testing.assert_allclose(got, ref_values, atol=1e-9, err_msg=f"{variables} | {evidence}")


def test_posterior_many_equals_row_by_row_query():
    net = _net("alarm")
    rng = np.random.default_rng(1)
    codes = _forward(net, 300, rng)
    codes[rng.random(codes.shape) < 0.7] = -1
    codes[:100, 5:] = -1  # some shared observed patterns
    ve = VariableElimination(net)
    got = ve.posterior_many("HYPOVOLEMIA", codes)
    for row, p in zip(net.decode(codes), got, strict=True):
        row.pop("HYPOVOLEMIA", None)
        np.testing.assert_allclose(p, ve.query(["HYPOVOLEMIA"], row), atol=1e-12)


@pytest.mark.parametrize("joint_limit", [4096, 1])
def test_log_likelihood_many_equals_brute_force_on_asia(monkeypatch, joint_limit):
    monkeypatch.setattr(inference, "JOINT_LIMIT", joint_limit)  # 1: every row goes through elimination
    net = _net("asia")
    joint = _brute_joint(net)
    rng = np.random.default_rng(2)
    codes = _forward(net, 200, rng)
    codes[rng.random(codes.shape) < 0.4] = -1
    codes[0] = -1
    got = VariableElimination(net).log_likelihood_many(codes)
    for row, value in zip(codes, got, strict=True):
        index = tuple(slice(None) if c < 0 else c for c in row)
        assert value == pytest.approx(np.log(joint[index].sum()), abs=1e-12)


@pytest.mark.parametrize("joint_limit", [4096, 1])
def test_expected_counts_equal_brute_force_on_asia(monkeypatch, joint_limit):
    monkeypatch.setattr(inference, "JOINT_LIMIT", joint_limit)
    net = _net("asia")
    joint = _brute_joint(net)
    rng = np.random.default_rng(3)
    codes = _forward(net, 150, rng)
    codes[rng.random(codes.shape) < 0.3] = -1
    codes[:, net.index["lung"]] = -1  # a hidden variable
    w = rng.random(len(codes)) + 0.5
    got = VariableElimination(net).expected_counts(codes, w)
    for v in net.states:
        fam = [net.index[u] for u in (v, *net.parents[v])]
        want = np.zeros(net.cpts[v].shape)
        for row, weight in zip(codes, w, strict=True):
            index = tuple(slice(None) if c < 0 else c for c in row)
            post = np.zeros(joint.shape)
            post[index] = joint[index] / joint[index].sum()
            keep = tuple(a for a in range(joint.ndim) if a not in fam)
            want += weight * np.transpose(post.sum(axis=keep), np.argsort(np.argsort(fam)))
        np.testing.assert_allclose(got[v], want, atol=1e-12, err_msg=v)


def test_zero_probability_evidence_raises_naming_it():
    net = _net("asia")  # either is a deterministic OR of lung and tub
    ve = VariableElimination(net)
    with pytest.raises(NetworkError, match="either.*probability zero"):
        ve.query(["dysp"], {"either": "no", "lung": "yes"})
    codes = np.full((3, len(net.states)), -1)
    codes[2, net.index["either"]], codes[2, net.index["tub"]] = 1, 0
    with pytest.raises(NetworkError, match="row 2"):
        ve.posterior_many("dysp", codes)
    with pytest.raises(NetworkError, match="row 2"):
        ve.expected_counts(codes)
    assert ve.log_likelihood_many(codes)[2] == -np.inf


def test_bad_names_raise():
    ve = VariableElimination(_net("asia"))
    for variables, evidence, word in [(["nope"], {}, "nope"), (["tub"], {"smoke": "maybe"}, "maybe"),
                                      (["tub"], {"tub": "yes"}, "tub")]:
        with pytest.raises(NetworkError, match=word):
            ve.query(variables, evidence)


def test_elimination_order_is_cached_per_shape():
    net = _net("alarm")
    ve = VariableElimination(net)

    def rows(**observed):
        codes = np.full((1, len(net.states)), -1)
        for v, s in observed.items():
            codes[0, net.index[v]] = net.state_index[v][s]
        return codes

    a = ve.posterior_many("HYPOVOLEMIA", rows(CVP="LOW", BP="HIGH"))
    assert ve.plans_built == 1
    b = ve.posterior_many("HYPOVOLEMIA", rows(BP="LOW", CVP="NORMAL"))
    assert ve.plans_built == 1 and not np.allclose(a, b)
    ve.posterior_many("HYPOVOLEMIA", rows(CVP="LOW"))
    assert ve.plans_built == 2


def test_d_separation_classic_asia_facts_and_brute_force():
    net = _net("asia")
    facts = [("tub", "smoke", [], True), ("tub", "smoke", ["dysp"], False),
             ("tub", "smoke", ["either"], False),
             ("xray", "dysp", ["either"], True), ("xray", "dysp", [], False),
             ("asia", "xray", ["tub"], True), ("lung", "bronc", ["smoke"], True),
             ("lung", "bronc", ["smoke", "dysp"], False)]
    for x, y, z, want in facts:
        assert d_separated(net, [x], [y], z) is want, (x, y, z)
    joint = _brute_joint(net)  # d-separated => independent in this (faithful enough) joint
    for x, y in itertools.combinations(net.variables, 2):
        for z in ([], ["either"], ["smoke"], ["either", "bronc"]):
            if x in z or y in z or not d_separated(net, x, y, z):
                continue
            axes = [net.index[u] for u in (x, y, *z)]
            m = joint.sum(axis=tuple(a for a in range(joint.ndim) if a not in axes))
            m = np.transpose(m, np.argsort(np.argsort(axes)))
            pz = m.sum(axis=(0, 1), keepdims=True)
            np.testing.assert_allclose(m * pz, m.sum(axis=1, keepdims=True) * m.sum(axis=0, keepdims=True),
                                       atol=1e-12)


def test_d_separation_equals_pgmpy_on_alarm():
    from pgmpy.readwrite import BIFReader

    logging.disable(logging.WARNING)
    net = _net("alarm")
    model = BIFReader(str(DATA / "bif" / "alarm.bif")).get_model()
    rng = np.random.default_rng(5)
    for _ in range(200):
        x, y, *z = [str(v) for v in rng.choice(net.variables, 2 + rng.integers(0, 4), replace=False)]
        assert d_separated(net, [x], [y], z) is (not model.is_dconnected(x, y, observed=z)), (x, y, z)
    with pytest.raises(NetworkError, match="nope"):
        d_separated(net, ["nope"], ["CVP"], [])
