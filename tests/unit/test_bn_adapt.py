"""Structure re-learned on a window; counting goes on under the new structure."""

import numpy as np

from streambayes.models.bayesnet import BayesNet, Network, read_bif
from streambayes.models.bayesnet.sampling import forward_sample
from streambayes.models.bayesnet.search import structural_hamming_distance

from .test_bif import DATA


def test_relearned_structure_follows_the_data_and_keeps_counting():
    asia = read_bif(DATA / "bif" / "asia.bif")
    codes = forward_sample(asia, 30_000, seed=4)
    empty = Network(asia.states, {}, None, "asia-unknown")  # start knowing no edges at all
    bn = BayesNet(empty, parameters="prior", prior="bdeu")
    bn.learn_many(codes[:20_000])
    assert bn.structure() == {v: [] for v in asia.states}
    changed = bn.learn_structure(codes[15_000:20_000])  # a window: the last 5,000 events
    assert changed and structural_hamming_distance(bn.structure(), asia.parents) <= 2
    kept = [v for v in asia.states if v not in changed]
    assert all(bn._counts.counts[v].sum() == 20_000 for v in kept)  # unchanged families kept counts
    bn.learn_many(codes[20_000:])  # counting goes on under the new structure
    assert all(t.sum() == (30_000 if v in kept else 15_000) for v, t in bn._counts.counts.items())
    truth = BayesNet(asia).query("lung", {"dysp": "yes", "smoke": "yes"})
    got = bn.query("lung", {"dysp": "yes", "smoke": "yes"})
    assert abs(got["yes"] - truth["yes"]) < 0.05
    restored = BayesNet.from_state(bn.to_state())  # the new structure is in the state
    assert restored.structure() == bn.structure()
    ask = ("lung", {"dysp": "yes"})
    assert np.isclose(restored.query(*ask)["yes"], bn.query(*ask)["yes"])
