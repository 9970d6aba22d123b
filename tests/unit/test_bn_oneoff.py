"""One-off queries (pruned, one global order, cached sub-products) against the batched plans."""

import numpy as np
import pytest

from streambayes.errors import NetworkError
from streambayes.models.bayesnet import read_bif
from streambayes.models.bayesnet.inference import VariableElimination
from streambayes.models.bayesnet.oneoff import OneOffQueries

from .test_bn_inference import DATA, _forward, _random_queries


def _net(name):
    return read_bif(DATA / "bif" / f"{name}.bif")


def _batched(ve, net, variable, evidence):
    codes = np.full((1, len(net.states)), -1)
    for v, s in evidence.items():
        codes[0, net.index[v]] = net.state_index[v][s]
    return ve.posterior_many(variable, codes)[0]


@pytest.mark.parametrize(("name", "max_cached"), [("alarm", 100_000), ("child", 100_000), ("alarm", 5)])
def test_one_off_queries_equal_the_batched_plans(name, max_cached):
    """Many evidence sets (up to 12 variables) on one engine: the cache never changes an answer."""
    net = _net(name)
    rng = np.random.default_rng(11)
    oneoff = OneOffQueries(net, net.cpts, max_cached=max_cached)
    ve = VariableElimination(net)
    for row in _forward(net, 150, rng):
        chosen = [str(v) for v in rng.choice(net.variables, 1 + rng.integers(0, 13), replace=False)]
        q, evidence = chosen[0], {v: int(row[net.index[v]]) for v in chosen[1:]}
        got = oneoff.query([q], evidence)
        want = _batched(ve, net, q, {v: net.states[v][c] for v, c in evidence.items()})
        np.testing.assert_allclose(got, want, atol=1e-12, err_msg=f"{q} | {evidence}")
    assert len(oneoff._cache) <= max_cached + 200


def test_single_queries_build_no_plan_and_joint_queries_agree():
    net = _net("alarm")
    ve = VariableElimination(net)
    for variables, evidence in _random_queries(net, 40, 2, np.random.default_rng(5)):
        got = ve.query(variables, evidence)
        assert got.shape == tuple(net.card(v) for v in variables)
    assert ve.plans_built == 0
    both = ve.query(["HR", "CO"], {"BP": "LOW"})
    np.testing.assert_allclose(both.sum(axis=1), ve.query(["HR"], {"BP": "LOW"}), atol=1e-12)


def test_pruned_parts_are_not_eliminated_and_a_zero_cpt_still_raises():
    net = _net("asia")
    oneoff = OneOffQueries(net, net.cpts)
    lung = oneoff.query(["lung"], {"tub": 0})  # asia, either, xray, dysp, bronc: barren or cut off
    np.testing.assert_allclose(lung, net.cpts["lung"] @ net.cpts["smoke"], atol=1e-12)
    eliminated = {oneoff.names[name[0]] for name in oneoff._cache if name[0] >= 0}
    assert eliminated and not eliminated & {"either", "xray", "dysp", "bronc"}  # never reached
    assert {oneoff.names[i] for i in oneoff._marginals} == {"lung", "tub"}  # smoke, asia summed once
    with pytest.raises(NetworkError, match="probability zero"):  # either=no with lung=yes: cut off
        oneoff.query(["dysp"], {"either": 1, "lung": 0})


def test_tiny_products_fall_back_to_the_scaled_engine(monkeypatch):
    from streambayes.models.bayesnet import oneoff

    net = _net("asia")
    ve = VariableElimination(net)
    want = ve.query(["lung"], {"xray": "yes", "dysp": "no"})
    monkeypatch.setattr(oneoff, "TINY", 2.0)  # every total counts as tiny
    ve2 = VariableElimination(net)
    np.testing.assert_allclose(ve2.query(["lung"], {"xray": "yes", "dysp": "no"}), want, atol=1e-14)
    assert ve2.plans_built == 1


def test_bn_query_gives_the_engines_answers_and_refuses_what_it_refuses():
    """BayesNet.query hands the engine state codes (no round trip through the names): the same
    answers as VariableElimination.query, and the same refusals."""
    from streambayes.models import BayesNet

    bn = BayesNet.from_bif(DATA / "bif" / "asia.bif")
    ve = VariableElimination(_net("asia"))
    for q, ev in [("lung", {"smoke": "yes"}), ("dysp", {"asia": "no", "xray": "yes"}), ("tub", {})]:
        np.testing.assert_allclose(list(bn.query(q, ev).values()), ve.query([q], ev), rtol=1e-12)
    with pytest.raises(NetworkError, match="distinct and not in the evidence: \\['lung'\\]"):
        bn.query("lung", {"lung": "yes"})
    with pytest.raises(NetworkError, match="distinct and not in the evidence"):
        bn.query(["tub", "tub"])
    for ask in (lambda: ve.query(["dysp"], {"either": "no", "lung": "yes"}),
                lambda: bn.query("dysp", {"either": "no", "lung": "yes"})):
        with pytest.raises(NetworkError, match="'either': 'no', 'lung': 'yes'} has probability zero"):
            ask()


def test_a_bayes_net_pickle_holds_no_engine_and_an_older_one_is_made_again():
    import pickle

    from streambayes.models import BayesNet

    bn = BayesNet.from_bif(DATA / "bif" / "asia.bif")
    want = bn.query("lung", {"smoke": "yes"})
    assert bn._cache is not None
    back = pickle.loads(pickle.dumps(bn))
    assert back._cache is None and back.query("lung", {"smoke": "yes"}) == want
    older = BayesNet.__new__(BayesNet)
    older.__setstate__(dict(bn.__dict__))  # a state with its engine, as pickles before stop 28
    assert older._cache is None
    with pytest.raises(NetworkError, match="'either': 'no', 'lung': 'yes'} has probability zero"):
        older.query("dysp", {"either": "no", "lung": "yes"})
