"""BayesNet: CPT learning against pgmpy, the public API, state, bad input and the replay CLI.

pgmpy is the test-only reference. Its estimators are given our state names (so the state order is
the BIF order) and their CPD axes are reordered by variable name (pgmpy orders the evidence its own
way). Unseen parent configurations: pgmpy's MLE makes such a column uniform, and so do we, so every
column is compared (BDeu/K2 columns without data are the normalised prior, uniform, on both sides).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from streambayes import BayesNet
from streambayes.errors import FeatureError, ModelError, NetworkError
from streambayes.models import make_model, model_from_state
from streambayes.models.bayesnet import read_bif
from streambayes.models.bayesnet.sampling import forward_sample
from tests.unit.conftest import bif_dir

NETWORKS = ["asia", "sachs", "alarm", "child"]
PRIORS = [("none", 1.0), ("bdeu", 1.0), ("bdeu", 5.0)]


def path(name: str) -> str:
    return str(bif_dir() / f"{name}.bif")


@pytest.fixture(scope="module")
def samples():
    cache = {}

    def get(name: str, n: int = 5000, seed: int = 0):
        if (name, n, seed) not in cache:
            net = read_bif(path(name))
            cache[name, n, seed] = (net, forward_sample(net, n, seed))
        return cache[name, n, seed]
    return get


def pgmpy_cpts(net, codes, prior: str, ess: float) -> dict:
    import pandas as pd
    from pgmpy.estimators import BayesianEstimator, MaximumLikelihoodEstimator
    from pgmpy.models import DiscreteBayesianNetwork

    data = pd.DataFrame(net.decode(codes), columns=net.variables)
    model = DiscreteBayesianNetwork(net.edges())
    model.add_nodes_from(net.variables)
    names = {v: list(s) for v, s in net.states.items()}
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if prior == "none":
            est = MaximumLikelihoodEstimator(model, data, state_names=names)
            cpds = {v: est.estimate_cpd(v) for v in net.variables}
        else:
            est = BayesianEstimator(model, data, state_names=names)
            cpds = {v: est.estimate_cpd(v, prior_type="BDeu", equivalent_sample_size=ess)
                    for v in net.variables}
    for v, cpd in cpds.items():
        assert [list(cpd.state_names[u]) for u in cpd.variables] == [names[u] for u in cpd.variables]
        axes = [cpd.variables.index(u) for u in (v, *net.parents[v])]
        out[v] = np.transpose(cpd.values, axes)
    return out


# -- CPT learning equals pgmpy ------------------------------------------------------------------
@pytest.mark.parametrize("prior,ess", PRIORS, ids=[f"{p}-{e}" for p, e in PRIORS])
@pytest.mark.parametrize("name", NETWORKS)
def test_cpts_equal_pgmpy(samples, name, prior, ess):
    net, codes = samples(name)
    bn = BayesNet.from_bif(path(name), parameters="prior", prior=prior, equivalent_sample_size=ess)
    bn.learn_many(codes)
    expected = pgmpy_cpts(net, codes, prior, ess)
    for v in net.variables:
        np.testing.assert_allclose(bn.cpt(v, as_array=True), expected[v], rtol=0, atol=1e-9, err_msg=v)


def test_dict_rows_equal_codes(samples):
    net, codes = samples("asia", 500)
    a, b = (BayesNet.from_bif(path("asia"), parameters="prior", prior="k2") for _ in range(2))
    a.learn_many(codes)
    b.learn_many(net.decode(codes))
    for v in net.variables:
        assert np.array_equal(a._counts.counts[v], b._counts.counts[v])


# -- from_bif / to_bif / queries ------------------------------------------------------------------
@pytest.mark.parametrize("name", NETWORKS)
def test_from_bif_has_the_file_cpts_and_round_trips(tmp_path, name):
    net = read_bif(path(name))
    bn = BayesNet.from_bif(path(name))
    for v in net.variables:
        assert np.array_equal(bn.cpt(v, as_array=True), net.cpts[v])
    bn.to_bif(tmp_path / "out.bif")
    again = BayesNet.from_bif(tmp_path / "out.bif")
    assert again.variables == bn.variables
    for v in net.variables:
        np.testing.assert_allclose(again.cpt(v, as_array=True), net.cpts[v], rtol=0, atol=1e-12)


def test_query_cpt_sample_forms():
    bn = BayesNet.from_bif(path("asia"))
    one = bn.query("lung", {"smoke": "yes"})
    assert one == pytest.approx({"yes": 0.1, "no": 0.9})
    two = bn.query(["lung", "tub"], {"smoke": "yes"})
    assert set(two) == {("yes", "yes"), ("yes", "no"), ("no", "yes"), ("no", "no")}
    assert sum(two.values()) == pytest.approx(1.0)
    assert bn.cpt("either")[("no", "no")] == {"yes": 0.0, "no": 1.0}  # keys: (lung, tub) as in the file
    assert bn.cpt("asia") == {(): {"yes": 0.01, "no": 0.99}}
    rows = bn.sample(50, seed=3)
    assert rows == bn.sample(50, seed=3) and set(rows[0]) == set(bn.variables)
    with pytest.raises(NetworkError, match="probability zero"):
        bn.query("tub", {"either": "no", "lung": "yes"})


# -- merge, batches, state --------------------------------------------------------------------------
def test_merge_equals_sequential_and_batches(samples):
    net, codes = samples("child", 2000)
    rows = net.decode(codes)
    seq = BayesNet.from_bif(path("child"), parameters="prior", prior="bdeu")
    seq.learn_many(rows)
    a, b, ones = (seq.clone() for _ in range(3))
    a.learn_many(rows[:700])
    b.learn_many(codes[700:])
    a.merge(b)
    for row in rows[:300]:
        ones.learn_one(row)
    part = seq.clone()
    part.learn_many(rows[:300])
    for v in net.variables:
        assert np.array_equal(a._counts.counts[v], seq._counts.counts[v])
        assert np.array_equal(ones._counts.counts[v], part._counts.counts[v])
    assert a.n_events == seq.n_events == 2000 and ones.n_events == 300
    with pytest.raises(ModelError):
        a.merge(BayesNet.from_bif(path("child"), parameters="prior", prior="k2"))


def test_snapshot_round_trip_gives_identical_queries(samples):
    from streambayes.snapshot import pack, unpack

    net, codes = samples("alarm", 1000)
    bn = BayesNet.from_bif(path("alarm"), parameters="prior", prior="bdeu", equivalent_sample_size=5.0)
    bn.learn_many(codes)
    state = bn.to_state()
    data, _ = pack(state, snapshot_id="1", model=bn.name, config={}, positions={}, events=1000,
                   created_at="2024-01-01T00:00:00Z")
    restored = model_from_state(unpack(data)[1])
    assert restored.params() == bn.params()
    for v, ev in [("HYPOVOLEMIA", {"BP": "LOW"}), ("LVFAILURE", {"HR": "HIGH", "CO": "LOW"})]:
        assert restored.query(v, ev) == bn.query(v, ev)
    assert json.dumps(restored.to_state()["network"]) == json.dumps(state["network"])


def test_missing_values_go_to_online_em(samples):
    net, codes = samples("asia", 3000)
    codes = codes.copy()
    codes[::2, net.index["either"]] = -1
    bn = BayesNet.from_bif(path("asia"), parameters="prior", prior="bdeu")
    bn.learn_many(codes[:1000])
    bn.learn_many(net.decode(codes[1000:]))
    assert bn._em is not None and bn.n_events == 3000
    truth = read_bif(path("asia"))
    assert np.abs(bn.cpt("lung", as_array=True) - truth.cpts["lung"]).max() < 0.05
    restored = model_from_state(bn.to_state())
    assert restored.query("either", {"lung": "yes"}) == bn.query("either", {"lung": "yes"})
    with pytest.raises(ModelError, match="EM"):
        bn.merge(bn.clone())


def test_decay_forgets_per_event():
    bn = BayesNet.from_bif(path("asia"), parameters="prior", prior="none", decay=0.5)
    rows = BayesNet.from_bif(path("asia")).sample(3, seed=0)
    bn.learn_many(rows)
    assert bn._counts.counts["asia"].sum() == pytest.approx(0.25 + 0.5 + 1.0)


# -- bad input --------------------------------------------------------------------------------------
def test_bad_input_names_the_culprit():
    bn = BayesNet.from_bif(path("asia"), parameters="prior")
    with pytest.raises(NetworkError, match="'nope'"):
        bn.learn_many([{"asia": "yes", "nope": "x"}])
    with pytest.raises(NetworkError, match="'maybe'.*'smoke'"):
        bn.learn_many([{"smoke": "maybe"}])
    with pytest.raises(NetworkError, match="'nope'"):
        bn.query("nope")
    with pytest.raises(NetworkError, match="'maybe'"):
        bn.query("lung", {"smoke": "maybe"})
    assert bn.n_events == 0
    with pytest.raises(ModelError, match="network"):
        make_model("bn")


def test_classifier_mode_refuses_missing_labels_and_dead_letters_bad_events():
    clf = make_model("bn", network=path("asia"), class_variable="either")
    assert clf.classes == ["yes", "no"]
    x = {"asia": "no", "tub": "no", "smoke": "yes", "lung": "yes", "bronc": "no", "xray": "yes",
         "dysp": "yes"}
    with pytest.raises(ModelError, match="either"):
        clf.learn_many([x], [None])
    with pytest.raises(ModelError, match="either"):
        clf.learn_many([x])
    for bad in ({**x, "colour": "red"}, {**x, "smoke": "maybe"}, {**x, "either": "yes"}):
        with pytest.raises(FeatureError):  # the runtime dead-letters FeatureError
            clf.featurize([bad])
    clf.learn_many([x], ["yes"])
    assert clf.predict_one(x) == "yes" and clf.n_events == 1
    with pytest.raises(FeatureError, match="7"):  # a CSV number is looked up as its string, "7"
        clf.featurize([{"xray": 7}])


# -- the replay CLI -----------------------------------------------------------------------------------
def test_replay_cli_with_a_network(tmp_path, capsys):
    from streambayes.cli import main

    net = read_bif(path("asia"))
    rows = net.decode(forward_sample(net, 600, 7))
    lines = [",".join(net.variables)] + [",".join(r[v] for v in net.variables) for r in rows]
    lines.append(lines[1].replace("yes", "maybe", 1))  # a state outside a domain: dead-lettered
    (tmp_path / "asia.csv").write_text("\n".join(lines) + "\n")
    status = main(["replay", str(tmp_path / "asia.csv"), "--model", "bn,catnb", "--network", path("asia"),
                   "--label-field", "either", "--report", str(tmp_path / "report")])
    assert status == 0, capsys.readouterr().err
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_text())
    assert metrics["events"] == 600 and metrics["dead_letters"] == 1
    assert metrics["models"]["bn"]["accuracy"] > 0.95
    assert main(["replay", str(tmp_path / "asia.csv"), "--model", "bn", "--label-field", "either"]) == 2



@pytest.mark.parametrize("bad", [{"em_alpha": 0.3}, {"em_batch_size": 0}])
def test_em_settings_are_checked_up_front(bad):
    with pytest.raises(ModelError, match="em_alpha"):
        BayesNet(bif_dir() / "asia.bif", **bad)


def test_numeric_and_bool_cells_match_states_named_like_them():
    text = """variable n { type discrete [ 3 ] { 0, 0.50, 1e3 }; }
    variable b { type discrete [ 2 ] { true, false }; }
    probability ( n ) { table 0.2, 0.3, 0.5; }
    probability ( b | n ) { (0) 0.5, 0.5; (0.50) 0.9, 0.1; (1e3) 0.1, 0.9; }"""
    from streambayes.models.bayesnet import parse_bif

    bn = BayesNet(parse_bif(text), class_variable="b")
    codes = bn.encode([{"n": 0.5, "b": True}, {"n": 1000, "b": False}, {"n": "0"}])
    assert codes.tolist() == [[1, 0], [2, 1], [0, -1]]
    assert bn.predict_one({"n": 0.5}) == "true"
    with pytest.raises(FeatureError, match="not in the domain of 'n'"):
        bn.encode([{"n": 7}])
