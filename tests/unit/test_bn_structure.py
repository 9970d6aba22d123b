"""Structure learning (issue 4): scores against pgmpy, hill climbing, K2, Chow–Liu / TAN, SHD."""

import logging
import math
import os
from pathlib import Path

import numpy as np
import pytest

from streambayes.errors import NetworkError
from streambayes.models.bayesnet import read_bif
from streambayes.models.bayesnet.network import Network
from streambayes.models.bayesnet.sampling import forward_sample
from streambayes.models.bayesnet.scores import FamilyScorer, network_score
from streambayes.models.bayesnet.search import (
    changed_families,
    chow_liu,
    hill_climb,
    k2,
    restructure,
    structural_hamming_distance,
)

DATA = Path(os.environ.get("STREAMBAYES_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")


@pytest.fixture(scope="module")
def asia():
    net = read_bif(DATA / "bif" / "asia.bif")
    return net, forward_sample(net, 50_000, seed=4)


def _frame(net, codes):
    import pandas as pd

    return pd.DataFrame({v: np.array(net.states[v], dtype=object)[codes[:, i]]
                         for i, v in enumerate(net.states)})


def _families(net, seed=0, extra=12):
    """The true families plus random ones of up to three parents."""
    rng = np.random.default_rng(seed)
    vs = list(net.states)
    out = [(v, list(net.parents[v])) for v in vs]
    for _ in range(extra):
        child, *ps = rng.choice(vs, size=int(rng.integers(1, 5)), replace=False).tolist()
        out.append((child, ps))
    return out


@pytest.mark.parametrize("name", ["asia", "sachs"])
@pytest.mark.parametrize("score", ["bic", "aic", "bdeu", "k2"])
def test_family_scores_equal_pgmpy(name, score):
    pytest.importorskip("pgmpy")
    import warnings

    warnings.simplefilter("ignore", FutureWarning)
    from pgmpy.estimators import AIC, BIC, K2, BDeu

    logging.disable(logging.WARNING)
    net = read_bif(DATA / "bif" / f"{name}.bif")
    codes = forward_sample(net, 3000, seed=1)
    df, names = _frame(net, codes), {v: list(s) for v, s in net.states.items()}
    ess = 5.0
    ref = {"bic": BIC, "aic": AIC, "k2": K2}.get(score)
    ref = ref(df, state_names=names) if ref else BDeu(df, equivalent_sample_size=ess, state_names=names)
    ours = FamilyScorer(codes, net, score, equivalent_sample_size=ess)
    for child, ps in _families(net):
        expected = ref.local_score(child, ps)
        if score == "k2":  # pgmpy adds log Γ(r) for every parent configuration never seen
            seen = len(np.unique(codes[:, [net.index[p] for p in ps]], axis=0)) if ps else 1
            q = math.prod(net.card(p) for p in ps)
            expected -= (q - seen) * math.lgamma(net.card(child))
        assert ours.local(child, ps) == pytest.approx(expected, abs=1e-6), (child, ps)


def test_sparse_families_counted_by_unique_agree_with_pgmpy():
    pytest.importorskip("pgmpy")
    from pgmpy.estimators import BIC, BDeu

    rng = np.random.default_rng(3)
    states = {f"x{i}": tuple(f"s{k}" for k in range(10)) for i in range(5)}
    codes = rng.integers(0, 10, (40, 5))
    net = Network(states, {})
    df, names = _frame(net, codes), {v: list(s) for v, s in states.items()}
    for score, ref in [("bic", BIC(df, state_names=names)),
                       ("bdeu", BDeu(df, equivalent_sample_size=2, state_names=names))]:
        ours = FamilyScorer(codes, states, score, equivalent_sample_size=2)
        family = ["x1", "x2", "x3"]
        assert ours.local("x0", family) == pytest.approx(ref.local_score("x0", family), abs=1e-6)


def test_aic_and_bic_are_the_mdl_form_of_reference_002(asia):
    net, codes = asia
    true = dict(net.parents)
    ll = network_score(codes, net, true, "aic") + net.n_parameters()
    bic = network_score(codes, net, true, "bic")
    assert bic == pytest.approx(ll - 0.5 * math.log(len(codes)) * net.n_parameters(), rel=1e-12)


def test_hill_climb_bic_recovers_asia_skeleton(asia):
    net, codes = asia
    learned = hill_climb(codes, net, score="bic")
    assert structural_hamming_distance(learned, net.parents) <= 2
    Network(net.states, learned)  # a DAG


@pytest.mark.parametrize("score", ["bic", "bdeu", "k2", "aic"])
def test_hill_climb_improves_the_score_and_stays_acyclic(asia, score):
    net, codes = asia
    rows = codes[:5000]
    scorer = FamilyScorer(rows, net, score)
    start = {"either": ("lung",), "xray": ("either",), "smoke": ("xray",)}
    for kwargs in [{}, {"start": start}, {"start": start, "tabu_length": 5, "max_parents": 1}]:
        learned = hill_climb(rows, net, score=score, scorer=scorer, **kwargs)
        Network(net.states, learned)
        assert max(len(ps) for ps in learned.values()) <= kwargs.get("max_parents", 3)
        assert scorer.total(learned) >= scorer.total(kwargs.get("start", {})) - 1e-9


def test_hill_climb_is_deterministic_under_row_order(asia):
    net, codes = asia
    rows = codes[:3000]
    perm = np.random.default_rng(0).permutation(len(rows))
    assert hill_climb(rows, net) == hill_climb(rows[perm], net)


def test_k2_with_the_true_order_recovers_asia(asia):
    net, codes = asia
    learned = k2(codes, net, net.order)
    assert structural_hamming_distance(learned, net.parents, directed=True) <= 1
    assert all(net.order.index(p) < net.order.index(v) for v in learned for p in learned[v])


def _tree_network(seed=0):
    rng = np.random.default_rng(seed)
    parents = {"a": (), "b": ("a",), "c": ("a",), "d": ("b",), "e": ("b",), "f": ("c",), "g": ("f",)}
    states = {v: tuple(f"{v}{k}" for k in range(2 + i % 2)) for i, v in enumerate(parents)}
    net = Network(states, parents)
    for v in parents:
        shape = net.family_shape(v)
        table = rng.dirichlet(np.ones(shape[0]), size=shape[1:]).reshape(*shape[1:], shape[0])
        strong = np.eye(shape[0])[rng.integers(0, shape[0], shape[1:])] if len(shape) > 1 else 1 / shape[0]
        net.set_cpt(v, np.moveaxis(0.4 * table + 0.6 * strong, -1, 0))  # clear dependencies
    return net


def test_chow_liu_recovers_a_tree():
    net = _tree_network()
    codes = forward_sample(net, 20_000, seed=2)
    learned = chow_liu(codes, net, root="a")
    assert structural_hamming_distance(learned, net.parents) == 0
    assert learned == {v: tuple(ps) for v, ps in net.parents.items()}  # directed away from the root


def test_tan_adds_the_class_to_every_family():
    net = _tree_network(1)
    codes = forward_sample(net, 20_000, seed=3)
    learned = chow_liu(codes, net, class_variable="a")
    Network(net.states, learned)
    assert learned["a"] == () and all(learned[v][0] == "a" and len(learned[v]) <= 2 for v in "bcdefg")
    tree = {v: tuple(p for p in ps if p != "a") for v, ps in learned.items()}
    truth = {v: tuple(p for p in ps if p != "a") for v, ps in net.parents.items()}
    skeleton = {frozenset((p, v)) for v, ps in tree.items() for p in ps}
    # given the class the truth is two trees ({b, d, e}, {c, f, g}); the spanning tree joins them once
    assert {frozenset((p, v)) for v, ps in truth.items() for p in ps} < skeleton and len(skeleton) == 5


def test_structural_hamming_distance():
    a = {"x": (), "y": ("x",), "z": ("y",)}
    b = {"x": ("y",), "y": (), "z": (), "w": ("x",)}
    assert structural_hamming_distance(a, b) == 2  # y–z missing, x–w extra
    assert structural_hamming_distance(a, b, directed=True) == 3  # and x–y reversed
    assert structural_hamming_distance(a, a, directed=True) == 0


def test_restructure_keeps_unchanged_families(asia):
    net, _ = asia
    new = dict(net.parents, dysp=("bronc",), xray=("either", "smoke"))
    out = restructure(net, new)
    assert changed_families(net.parents, out.parents) == ["xray", "dysp"]
    assert "xray" not in out.cpts and "dysp" not in out.cpts
    assert np.array_equal(out.cpts["either"], net.cpts["either"])
    assert out.parents["either"] == net.parents["either"]
    with pytest.raises(NetworkError, match="cycle"):
        restructure(net, dict(net.parents, asia=("dysp",)))
    with pytest.raises(NetworkError, match="'nope'"):
        restructure(net, {"nope": ()})


def test_bad_input_is_refused_by_name(asia):
    net, codes = asia
    holes = codes[:100].copy()
    holes[5, net.index["lung"]] = -1
    with pytest.raises(NetworkError, match="'lung'.*missing"):
        hill_climb(holes, net)
    with pytest.raises(NetworkError, match="shape"):
        hill_climb(codes[:, :3], net)
    too_big = codes[:100].copy()
    too_big[0, 0] = 7
    with pytest.raises(NetworkError, match="outside"):
        FamilyScorer(too_big, net)
    with pytest.raises(NetworkError, match="'nope'"):
        hill_climb(codes[:100], net, start={"nope": ()})
    with pytest.raises(NetworkError, match="'nope'"):
        hill_climb(codes[:100], net, start={"lung": ("nope",)})
    with pytest.raises(NetworkError, match="cycle"):
        hill_climb(codes[:100], net, start={"lung": ("smoke",), "smoke": ("lung",)})
    with pytest.raises(NetworkError, match="missing"):
        k2(codes[:100], net, ["asia", "tub"])
    with pytest.raises(NetworkError, match="'nope'"):
        k2(codes[:100], net, [*net.order, "nope"])
    with pytest.raises(NetworkError, match="'nope'"):
        chow_liu(codes[:100], net, class_variable="nope")
    with pytest.raises(NetworkError, match="unknown score"):
        FamilyScorer(codes[:100], net, "bdue")
    with pytest.raises(NetworkError, match="'nope'"):
        FamilyScorer(codes[:100], net).local("nope", ())


def _shuffled_columns(net, codes, seed):
    """The same rows with the variables (states and columns) in another order."""
    names = list(net.states)
    perm = np.random.default_rng(seed).permutation(len(names))
    states = {names[i]: net.states[names[i]] for i in perm}
    return states, codes[:, perm]


@pytest.fixture(scope="module")
def child():
    net = read_bif(DATA / "bif" / "child.bif")
    return net, forward_sample(net, 3000, seed=7)


@pytest.mark.parametrize("kwargs", [{}, {"restarts": 2, "perturb": 4, "seed": 3}])
def test_hill_climb_does_not_depend_on_the_column_order(child, kwargs):
    net, codes = child
    learned = hill_climb(codes, net.states, **kwargs)
    for seed in (1, 2):
        states, columns = _shuffled_columns(net, codes, seed)
        again = hill_climb(columns, states, **kwargs)
        assert {v: set(ps) for v, ps in again.items()} == {v: set(ps) for v, ps in learned.items()}


def test_restarts_never_lower_the_score_and_are_seeded(child):
    net, codes = child
    scorer = FamilyScorer(codes, net.states, "bic")
    plain = hill_climb(codes, net.states, scorer=scorer)
    restarted = hill_climb(codes, net.states, scorer=scorer, restarts=3, perturb=6, seed=5)
    assert scorer.total(restarted) >= scorer.total(plain) - 1e-9
    assert restarted == hill_climb(codes, net.states, scorer=scorer, restarts=3, perturb=6, seed=5)
    Network(net.states, restarted)
