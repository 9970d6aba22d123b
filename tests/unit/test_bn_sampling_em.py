"""Sampling (forward, Gibbs, likelihood weighting), online/batch EM and gradient ascent on CPTs."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from streambayes.errors import ModelError, NetworkError
from streambayes.models.bayesnet.bif import read_bif
from streambayes.models.bayesnet.counts import FamilyCounts, cpts_from_counts, dirichlet
from streambayes.models.bayesnet.em import OnlineEM, batch_em
from streambayes.models.bayesnet.gradient import GradientLearner
from streambayes.models.bayesnet.inference import VariableElimination
from streambayes.models.bayesnet.network import Network
from streambayes.models.bayesnet.sampling import (
    approximate_query,
    forward_sample,
    gibbs,
    likelihood_weighting,
)

BIF = Path("/work/shared/data/bif")


@pytest.fixture(scope="module")
def asia() -> Network:
    return read_bif(BIF / "asia.bif")


# -- brute force over the joint (asia has 2^8 = 256 states) -------------------------------------
class BruteForce:
    """Exact inference by enumerating the joint: the reference for small networks."""

    def __init__(self, net: Network) -> None:
        self.net = net
        cards = [net.card(v) for v in net.variables]
        self.states = np.array(list(itertools.product(*map(range, cards))), np.int64)   # (J, V)
        p = np.ones(len(self.states))
        for v in net.variables:
            idx = (self.states[:, net.index[v]], *(self.states[:, net.index[u]] for u in net.parents[v]))
            p *= net.cpts[v][idx]
        self.joint = p

    def _consistent(self, codes: np.ndarray) -> np.ndarray:
        codes = np.atleast_2d(codes)
        return np.all((codes[:, None, :] < 0) | (codes[:, None, :] == self.states[None]), axis=2)

    def query(self, variable: str, evidence: dict) -> np.ndarray:
        row = np.full(len(self.net.variables), -1)
        for v, s in evidence.items():
            row[self.net.index[v]] = self.net.state_index[v][s]
        post = self._consistent(row)[0] * self.joint
        out = np.bincount(self.states[:, self.net.index[variable]], weights=post,
                          minlength=self.net.card(variable))
        return out / out.sum()

    def log_likelihood_many(self, codes: np.ndarray) -> np.ndarray:
        return np.log(self._consistent(codes) @ self.joint)

    def expected_counts(self, codes: np.ndarray, w=None) -> dict[str, np.ndarray]:
        post = self._consistent(codes) * self.joint
        post /= post.sum(axis=1, keepdims=True)
        mass = (np.ones(len(codes)) if w is None else np.asarray(w, float)) @ post     # (J,)
        out = {}
        for v in self.net.variables:
            fam = [self.net.index[u] for u in (v, *self.net.parents[v])]
            table = np.zeros(self.net.family_shape(v))
            np.add.at(table, tuple(self.states[:, f] for f in fam), mass)
            out[v] = table
        return out


# -- sampling ------------------------------------------------------------------------------------
def test_forward_sampling_frequencies_match_the_cpts(asia):
    codes = forward_sample(asia, 200_000, seed=0)
    assert codes.shape == (200_000, 8) and codes.dtype == np.int64
    for v in asia.variables:
        fam = [asia.index[u] for u in (v, *asia.parents[v])]
        counts = np.zeros(asia.family_shape(v))
        np.add.at(counts, tuple(codes[:, f] for f in fam), 1.0)
        totals = counts.sum(axis=0)
        seen = totals > 2000
        freq = counts[:, seen] / totals[seen]
        assert np.allclose(freq, asia.cpts[v][:, seen], atol=0.02), v
    assert np.array_equal(codes, forward_sample(asia, 200_000, seed=0))


QUERIES = [
    ("lung", {"xray": "yes"}),
    ("tub", {"either": "yes", "smoke": "no"}),
    ("bronc", {"dysp": "yes", "xray": "no"}),
    ("either", {"dysp": "yes", "asia": "yes"}),
    ("smoke", {"dysp": "no", "either": "yes"}),
    ("lung", {"either": "yes", "tub": "no"}),
]


@pytest.mark.parametrize("method", ["gibbs", "lw"])
@pytest.mark.parametrize(("variable", "evidence"), QUERIES)
def test_gibbs_and_likelihood_weighting_within_002_of_exact(asia, method, variable, evidence):
    exact = BruteForce(asia).query(variable, evidence)
    n = 40_000 if method == "gibbs" else 400_000     # LW: rare evidence leaves few effective samples
    approx = approximate_query(asia, variable, evidence, n, seed=3, method=method)
    assert approx.shape == exact.shape and np.isclose(approx.sum(), 1.0)
    assert np.max(np.abs(approx - exact)) < 0.02, (approx, exact)


def test_gibbs_keeps_evidence_and_is_seeded(asia):
    ev = {"xray": "yes", "dysp": "no"}
    codes = gibbs(asia, ev, 500, seed=1, burn_in=50, thin=2)
    assert codes.shape == (500, 8)
    assert np.all(codes[:, asia.index["xray"]] == 0) and np.all(codes[:, asia.index["dysp"]] == 1)
    assert np.array_equal(codes, gibbs(asia, ev, 500, seed=1, burn_in=50, thin=2))
    # asia's either = tub OR lung: every Gibbs state must respect it
    tub, lung, either = (codes[:, asia.index[v]] == 0 for v in ("tub", "lung", "either"))
    assert np.array_equal(either, tub | lung)


def test_likelihood_weights_are_the_evidence_probabilities(asia):
    codes, w = likelihood_weighting(asia, {"asia": "yes"}, 100, seed=0)
    assert np.all(codes[:, asia.index["asia"]] == 0) and np.allclose(w, 0.01)


def test_bad_evidence_is_named(asia):
    with pytest.raises(NetworkError, match="nope"):
        gibbs(asia, {"nope": "yes"}, 10, seed=0)
    with pytest.raises(NetworkError, match="maybe"):
        likelihood_weighting(asia, {"xray": "maybe"}, 10, seed=0)
    # either = no with tub = yes is impossible
    with pytest.raises(NetworkError, match="probability"):
        gibbs(asia, {"either": "no", "tub": "yes"}, 10, seed=0)
    with pytest.raises(NetworkError, match="probability"):
        approximate_query(asia, "lung", {"either": "no", "tub": "yes"}, 10, seed=0, method="lw")


# -- EM ------------------------------------------------------------------------------------------


def _with(net: Network, cpts) -> Network:
    return Network(net.states, net.parents, cpts, net.name)


def _heldout(net: Network, cpts, codes: np.ndarray) -> float:
    """Mean held-out log-likelihood per row, marginalising hidden/missing values."""
    return float(VariableElimination(_with(net, cpts)).log_likelihood_many(codes).mean())


@pytest.fixture(scope="module")
def asia_hidden(asia):
    """2,000 training and 2,000 held-out asia rows with ``bronc`` hidden."""
    codes = forward_sample(asia, 4000, seed=0)
    codes[:, asia.index["bronc"]] = -1
    return codes[:2000], codes[2000:]


def _pgmpy_cpts(net: Network, cpds, hidden: str) -> dict:
    """pgmpy TabularCPDs → our axis order (child, parents in our order) and state order."""
    out = {}
    for cpd in cpds:
        v = cpd.variable
        vals = cpd.get_values().reshape(cpd.cardinality)
        vals = np.transpose(vals, [cpd.variables.index(u) for u in (v, *net.parents[v])])
        for ax, u in enumerate((v, *net.parents[v])):
            if u != hidden:
                vals = np.take(vals, [cpd.state_names[u].index(s) for s in net.states[u]], axis=ax)
        out[v] = vals
    return out


def test_online_em_with_a_hidden_variable_matches_pgmpy_batch_em(asia, asia_hidden):
    pd = pytest.importorskip("pandas")
    pgmpy_models = pytest.importorskip("pgmpy.models")
    from pgmpy.estimators import ExpectationMaximization

    train, test = asia_hidden
    df = pd.DataFrame({v: [asia.states[v][c] for c in train[:, asia.index[v]]]
                       for v in asia.variables if v != "bronc"})
    model = pgmpy_models.DiscreteBayesianNetwork(asia.edges(), latents={"bronc"})
    with pytest.warns(FutureWarning):
        cpds = ExpectationMaximization(model, df).get_parameters(
            latent_card={"bronc": 2}, max_iter=30, seed=0, show_progress=False)
    reference = _heldout(asia, _pgmpy_cpts(asia, cpds, "bronc"), test)

    em = OnlineEM(asia, prior="none", alpha=0.6, batch_size=100, seed=0)
    for _ in range(3):                      # three passes over the stream
        em.partial_fit(train)
    ours = _heldout(asia, em.cpts, test)
    assert ours >= reference - 0.01 * abs(reference), (ours, reference)
    one_pass = OnlineEM(asia, prior="none", alpha=0.7, batch_size=200, seed=0).partial_fit(train)
    assert _heldout(asia, one_pass.cpts, test) >= reference - 0.01 * abs(reference)


def test_online_em_approaches_batch_em_and_batch_em_is_monotone(asia, asia_hidden):
    train, test = asia_hidden
    batch = batch_em(asia, train, max_iter=200, tol=1e-8, prior="none", seed=0)
    assert batch.converged and np.all(np.diff(batch.log_likelihoods) > -1e-9)
    em = OnlineEM(asia, prior="none", alpha=0.6, batch_size=100, seed=0)
    for _ in range(3):
        em.partial_fit(train)
    assert abs(_heldout(asia, em.cpts, test) - _heldout(asia, batch.cpts, test)) < 0.01
    # warm start: online EM from the batch solution stays there
    warm = OnlineEM(asia, prior="none", alpha=0.7, batch_size=500, init=batch.cpts).partial_fit(train)
    assert abs(_heldout(asia, warm.cpts, test) - _heldout(asia, batch.cpts, test)) < 0.002


def test_em_engine_is_injectable_and_matches_brute_force(asia, asia_hidden):
    train, _ = asia_hidden
    a = batch_em(asia, train[:500], max_iter=5, tol=0, seed=1)
    b = batch_em(asia, train[:500], max_iter=5, tol=0, seed=1, inference=BruteForce)
    assert np.allclose(a.log_likelihoods, b.log_likelihoods, rtol=1e-10)
    for v in asia.variables:
        assert np.allclose(a.cpts[v], b.cpts[v], atol=1e-10)


def test_online_em_handles_missing_values(asia):
    rng = np.random.default_rng(5)
    full = forward_sample(asia, 12_000, seed=2)
    train, test = full[:10_000].copy(), full[10_000:]
    train[rng.random(train.shape) < 0.10] = -1                # 10% of the cells missing at random
    complete = FamilyCounts(asia)
    complete.add(full[:10_000])
    best = cpts_from_counts(asia, complete.counts, dirichlet(asia, "bdeu", 1.0))
    em = OnlineEM(asia, alpha=0.7, batch_size=500, seed=0)
    for _ in range(2):
        em.partial_fit(train)
    ours, reference = _heldout(asia, em.cpts, test), _heldout(asia, best, test)
    assert ours >= reference - 0.005 * abs(reference), (ours, reference)
    # the CPT columns seen often are close to the generating ones
    for v in ("smoke", "bronc", "dysp", "xray"):
        assert np.allclose(em.cpts[v], asia.cpts[v], atol=0.05), v


def test_online_em_step_sizes_state_and_validation(asia, asia_hidden):
    train, _ = asia_hidden
    with pytest.raises(ModelError, match="alpha"):
        OnlineEM(asia, alpha=0.5)
    with pytest.raises(ModelError, match="alpha"):
        OnlineEM(asia, alpha=1.2)
    em = OnlineEM(asia, alpha=0.8, batch_size=100, seed=3)
    assert [round(em.step_size(k), 4) for k in range(3)] == [1.0, round(3 ** -0.8, 4), round(4 ** -0.8, 4)]
    em.partial_fit(train[:1000])
    state = em.to_state()
    assert all(isinstance(a, np.ndarray) for a in state.values())
    resumed = OnlineEM.from_state(asia, state, alpha=0.8, batch_size=100, seed=3)
    em.partial_fit(train[1000:])
    resumed.partial_fit(train[1000:])
    assert resumed.n_rows == em.n_rows == 2000 and resumed.n_steps == em.n_steps == 20
    for v in asia.variables:
        assert np.array_equal(resumed.cpts[v], em.cpts[v])
        assert np.allclose(em.stats[v].sum(), 1.0)          # an average per row


def _naive_bayes_stream(n: int, seed: int) -> tuple[Network, np.ndarray]:
    """A class ``c`` with 8 binary features, each P(x = 1 | c) = 0.3 / 0.7 (reversed for half)."""
    feats = [f"x{i}" for i in range(8)]
    states = {"c": ("a", "b"), **{f: ("0", "1") for f in feats}}
    cpts = {"c": np.array([0.5, 0.5])}
    for i, f in enumerate(feats):
        p = 0.7 if i % 2 else 0.3
        cpts[f] = np.array([[1 - p, p], [p, 1 - p]])
    net = Network(states, {f: ("c",) for f in feats}, cpts)
    return net, forward_sample(net, n, seed)


def _semi_supervised_run(seed: int, n_labelled: int = 8) -> tuple[float, float, float]:
    """Accuracy of NB from the labelled rows, after online EM on the unlabelled stream, and of the truth."""
    truth, codes = _naive_bayes_stream(6000, seed=seed)
    shell = truth.structure_copy()
    labelled, stream, test = codes[:n_labelled], codes[n_labelled:4000].copy(), codes[4000:]
    stream[:, 0] = -1                                          # the class is unobserved in the stream
    counts = FamilyCounts(shell)
    counts.add(labelled)
    supervised = cpts_from_counts(shell, counts.counts, dirichlet(shell, "bdeu", 1.0))
    em = OnlineEM(shell, alpha=0.7, batch_size=200, init=supervised)
    em.partial_fit(labelled)
    em.partial_fit(stream)
    hidden = test.copy()
    hidden[:, 0] = -1

    def accuracy(cpts) -> float:
        post = VariableElimination(_with(shell, cpts)).posterior_many("c", hidden)
        return float(np.mean(post.argmax(axis=1) == test[:, 0]))

    return accuracy(supervised), accuracy(em.cpts), accuracy(truth.cpts)


def test_semi_supervised_naive_bayes_improves_with_unlabelled_rows():
    runs = np.array([_semi_supervised_run(seed) for seed in range(4)])
    before, after, bayes = runs.T
    assert after.mean() > before.mean() + 0.03, runs
    assert np.all(after >= before - 0.005) and np.all(after >= bayes - 0.02), runs


# -- gradient ascent -----------------------------------------------------------------------------
def test_gradient_ascent_increases_the_log_likelihood_monotonically(asia, asia_hidden):
    train, test = asia_hidden
    learner = GradientLearner(asia, learning_rate=0.002, batch_size=len(train), seed=0)
    lls = []
    for _ in range(25):
        lls.append(float(VariableElimination(learner.network()).log_likelihood_many(train).sum()))
        learner.partial_fit(train)
    assert np.all(np.diff(lls) > 0), np.diff(lls)
    for v, cpt in learner.cpts.items():
        assert np.all(cpt >= learner.floor * 0.5) and np.allclose(cpt.sum(axis=0), 1.0), v


@pytest.mark.parametrize(("update", "rate", "slack"), [("project", 0.05, 0.10), ("natural", 0.5, 0.03)])
def test_online_gradient_ascent_learns_with_a_hidden_variable(asia, asia_hidden, update, rate, slack):
    train, test = asia_hidden
    before = _heldout(asia, GradientLearner(asia, seed=0).cpts, test)
    learner = GradientLearner(asia, learning_rate=rate, batch_size=50, update=update, seed=0)
    for _ in range(3):
        learner.partial_fit(train)
    batch = batch_em(asia, train, max_iter=100, prior="none", seed=0)
    after, best = _heldout(asia, learner.cpts, test), _heldout(asia, batch.cpts, test)
    assert after > before and after >= best - slack * abs(best), (before, after, best)
    state = learner.to_state()
    again = GradientLearner.from_state(asia, state, learning_rate=rate, batch_size=50, update=update, seed=0)
    assert all(np.array_equal(again.cpts[v], learner.cpts[v]) for v in asia.variables)
    assert again.n_rows == learner.n_rows == 3 * len(train)


def test_renormalised_gradient_step_can_descend():
    """Reference 000's add-then-renormalise step on w = (0.9, 0.1) with E = (2.7, 0.1) lowers w_1."""
    net = Network({"a": ("x", "y")}, {}, {"a": np.array([0.9, 0.1])})
    rows = np.array([[0]] * 27 + [[1]])
    for update, sign in [("renormalise", -1), ("project", 1)]:
        learner = GradientLearner(net, learning_rate=0.001, batch_size=28, update=update, init="file")
        learner.partial_fit(rows)
        assert np.sign(learner.cpts["a"][0] - 0.9) == sign, update


def test_online_em_without_prior_skips_rows_made_impossible_by_earlier_batches():
    net = Network({"z": ("a", "b"), "x": ("yes", "no")}, {"x": ("z",)})
    early = np.array([[0, 0], [1, 0]] * 50)                   # x = yes under both z
    late = np.array([[-1, 1]] * 20 + [[-1, 0]] * 30)          # x = no has probability 0 by then
    rows = np.vstack([early, late])
    em = OnlineEM(net, prior="none", batch_size=50, seed=0).partial_fit(rows)
    assert em.n_impossible == 20 and em.n_rows == 130
    assert OnlineEM(net, prior="bdeu", batch_size=50, seed=0).partial_fit(rows).n_impossible == 0
