"""PerKeyModel: one learner per key backed off to a global learner (issue 6)."""

import numpy as np
import pytest

from streambayes.errors import FeatureError, ModelError
from streambayes.models.perkey import PerKeyModel, positive_log_odds
from streambayes.snapshot.codec import decode_state, encode_state

TOPICS = {
    "sport": "goal league striker match referee penalty season coach",
    "money": "stocks market rates bonds inflation bank shares dividend",
    "space": "orbit rocket launch nasa moon shuttle satellite probe",
}


def articles(n, seed=0):
    """``n`` (x, topic) pairs: five words of one topic plus two of another."""
    rng = np.random.default_rng(seed)
    names = sorted(TOPICS)
    out = []
    for _ in range(n):
        topic, noise = rng.choice(names, 2, replace=False)
        words = list(rng.choice(TOPICS[topic].split(), 5)) + list(rng.choice(TOPICS[noise].split(), 2))
        out.append(({"text": " ".join(words)}, str(topic)))
    return out


def feed(model, readers, n, seed=0, batch=25):
    """Each of ``readers`` (key -> liked topic) labels the same ``n`` articles, in batches."""
    data = articles(n, seed)
    for lo in range(0, n, batch):
        xs, ys, keys = [], [], []
        for x, topic in data[lo:lo + batch]:
            for key, liked in readers.items():
                xs.append(x)
                ys.append("interesting" if topic == liked else "not")
                keys.append(key)
        model.learn_many(xs, ys, keys=keys)


POPULATION = {f"sport-fan-{i}": "sport" for i in range(4)} | {"money-fan": "money"}
PROBES = [x for x, _ in articles(30, seed=99)]


def test_a_key_without_labels_gets_exactly_the_global_posterior():
    m = PerKeyModel("mnb")
    feed(m, POPULATION, 60)
    expected = m.global_model.predict_log_proba_many(PROBES)
    got = m.predict_log_proba_many(PROBES, "stranger")
    assert np.array_equal(got, expected)
    assert m.user_model("stranger") is None and "stranger" not in m.keys  # prediction creates nothing
    mixed = m.predict_log_proba_many(PROBES[:2], ["stranger", "money-fan"])
    assert np.array_equal(mixed[0], expected[0]) and not np.allclose(mixed[1], expected[1])


def test_a_key_with_many_labels_moves_towards_its_own_model():
    m = PerKeyModel("mnb", backoff=20)
    feed(m, POPULATION, 60)  # the population mostly likes sport, none likes space
    space = [x for x, t in articles(200, seed=7) if t == "space"][:20]
    gaps = []
    for step in range(4):
        feed(m, {"space-fan": "space"}, 40, seed=10 + step)
        own = positive_log_odds(m.user_model("space-fan").predict_log_proba_many(space), m.classes,
                                "interesting")
        backed = positive_log_odds(m.predict_log_proba_many(space, "space-fan"), m.classes, "interesting")
        glob = positive_log_odds(m.global_model.predict_log_proba_many(space), m.classes, "interesting")
        assert np.all(backed > glob)  # the fan's labels pull space articles up
        gaps.append(float(np.mean(np.abs(backed - own))))
    assert m.n_labels("space-fan") == 160
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < gaps[0] / 2


def test_backoff_is_the_interpolation_of_log_odds_for_two_classes():
    m = PerKeyModel("mnb", backoff=20)
    feed(m, POPULATION, 10)  # 10 labels each: λ = 10 / 30
    lo_user = positive_log_odds(m.user_model("money-fan").predict_log_proba_many(PROBES), m.classes,
                                "interesting")
    lo_glob = positive_log_odds(m.global_model.predict_log_proba_many(PROBES), m.classes, "interesting")
    got = positive_log_odds(m.predict_log_proba_many(PROBES, "money-fan"), m.classes, "interesting")
    np.testing.assert_allclose(got, lo_user / 3 + 2 * lo_glob / 3, rtol=1e-9, atol=1e-9)


def test_a_key_that_saw_one_class_only_defers_to_the_global_model():
    m = PerKeyModel("mnb", backoff=1)
    feed(m, POPULATION, 20)
    m.learn_many([PROBES[0]] * 3, ["interesting"] * 3, keys=["keen"] * 3)
    np.testing.assert_allclose(m.predict_log_proba_many(PROBES, "keen"),
                               m.global_model.predict_log_proba_many(PROBES), atol=1e-12)


def test_eviction_and_restore_predict_like_never_evicting():
    bounded, unbounded = PerKeyModel("mnb", max_resident=2), PerKeyModel("mnb")
    for model in (bounded, unbounded):
        feed(model, POPULATION, 40, batch=7)
    assert len(bounded.resident_keys) == 2 and len(bounded.keys) == len(POPULATION)
    for key in [*POPULATION, "stranger", *reversed(POPULATION)]:
        assert np.array_equal(bounded.predict_log_proba_many(PROBES, key),
                              unbounded.predict_log_proba_many(PROBES, key)), key
        assert bounded.rank(PROBES, key) == unbounded.rank(PROBES, key)
    assert bounded.resident_keys == list(POPULATION)[:2][::-1]  # the two most recently used


def test_state_round_trip_through_the_snapshot_codec_keeps_every_key():
    m = PerKeyModel("mnb", {"n_features": 2**12}, backoff=5, max_resident=2)
    feed(m, POPULATION, 30)
    skeleton, arrays = encode_state(m.to_state())  # refuses anything but arrays and plain JSON
    back = PerKeyModel.from_state(decode_state(skeleton, arrays))
    assert back.params() == m.params() and back.resident_keys == m.resident_keys
    assert back.keys == m.keys and all(back.n_labels(k) == m.n_labels(k) for k in m.keys)
    for key in [*POPULATION, "stranger"]:
        assert np.array_equal(back.predict_log_proba_many(PROBES, key), m.predict_log_proba_many(PROBES, key))
    with pytest.raises(ModelError, match="not 'perkey'"):
        PerKeyModel.from_state({**m.to_state(), "model": "mnb"})


def test_learning_without_a_key_names_the_event():
    m = PerKeyModel("mnb")
    xs = [{"text": "a b"}] * 4
    with pytest.raises(FeatureError, match="needs a key for every event; event 3 has none"):
        m.learn_many(xs, ["interesting", "not", "not", "interesting"], keys=["u", "v", "u", None])
    with pytest.raises(FeatureError, match="event 1 has none"):
        m.learn_many(xs[:2], ["not", "not"], keys=["u", ""])
    with pytest.raises(FeatureError, match="no keys were given"):
        m.learn_many(xs, ["not"] * 4)
    with pytest.raises(FeatureError, match="event 0 has key 7 of type int"):
        m.learn_one(xs[0], "not", key=7)
    assert m.n_events == 0 and m.classes == []  # nothing was learned
    with pytest.raises(FeatureError, match="per-key prediction needs a key"):
        m.predict_log_proba_many(xs[:2], ["u", None])


def test_rank_orders_the_window_by_the_posterior():
    m = PerKeyModel("mnb", backoff=2)
    feed(m, POPULATION, 40)
    order = m.rank(PROBES, "money-fan")
    p = m.predict_proba_many(PROBES, "money-fan")[:, m.classes.index("interesting")]
    assert sorted(order) == list(range(len(PROBES)))
    assert np.all(np.diff(p[order]) <= 0)


def test_merge_equals_learning_both_streams():
    laplace = {"alpha": 1.0}  # a merge refits alpha="auto" on the merged counts, learning at fixed counts
    a, b = PerKeyModel("mnb", laplace), PerKeyModel("mnb", laplace, max_resident=1)
    both = PerKeyModel("mnb", laplace)
    feed(a, POPULATION, 20, seed=1)
    feed(b, POPULATION, 20, seed=2)
    feed(both, POPULATION, 20, seed=1)
    feed(both, POPULATION, 20, seed=2)
    a.merge(b)
    for key in [*POPULATION, "stranger"]:
        np.testing.assert_allclose(a.predict_log_proba_many(PROBES, key),
                                   both.predict_log_proba_many(PROBES, key), atol=1e-9)
    with pytest.raises(ModelError, match="cannot merge"):
        a.merge(PerKeyModel("mnb", laplace, backoff=3))


def test_parameters_and_clone():
    m = PerKeyModel("bnb", {"alpha": 0.5}, backoff=3.0, max_resident=4, positive="relevant")
    assert m.clone().params() == m.params() and m.clone().keys == []
    with pytest.raises(ModelError, match="backoff"):
        PerKeyModel(backoff=-1)
    with pytest.raises(ModelError, match="max_resident"):
        PerKeyModel(max_resident=0)
    with pytest.raises(ModelError, match="unknown model"):
        PerKeyModel("nope")
