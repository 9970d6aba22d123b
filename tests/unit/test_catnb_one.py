"""CategoricalNB one event at a time (River style): ``learn_one`` / ``predict_proba_one`` take a
path of their own, without a batch, and must leave the very state and give the very floats of
``learn_many([x])`` / ``predict_proba_many([x])``."""

from __future__ import annotations

import contextlib
import math
import random

import numpy as np
import pytest

from streambayes.errors import FeatureError, ModelError
from streambayes.models import make_model
from streambayes.models.base import NaiveBayesBase


def stream(n: int, seed: int):
    """Events of 3-6 fields out of 8: strings, bools, ints, floats, None; values and fields
    keep appearing; classes too, and a few weights."""
    rng = random.Random(seed)
    kinds = [lambda: rng.choice("abcdefgh"), lambda: rng.choice([True, False]),
             lambda: rng.randint(-3, 12), lambda: rng.choice([0.5, 1.0, 2.25, -7.0]),
             lambda: None]
    for t in range(n):
        width = min(8, 3 + t // 40)
        x = {f"f{j}": kinds[j % 5]() for j in rng.sample(range(width), rng.randint(1, width))}
        y = rng.choice(["spam", "ham", "eggs"][: 2 + (t > 150)])
        w = rng.choice([1, 1, 1, 0.5, 2.0])
        yield x, y, w


@pytest.mark.parametrize("params", [{}, {"alpha": 0.3}, {"m": 2.0}, {"prior_alpha": 1.0},
                                    {"decay": 0.99}, {"class_prior": {"spam": 0.2, "ham": 0.5,
                                                                      "eggs": 0.3}}])
def test_one_event_at_a_time_equals_batches_of_one(params):
    one, batch = make_model("catnb", **params), make_model("catnb", **params)
    for x, y, w in stream(400, 7):
        p_one = one.predict_proba_one(x)
        p_batch = (dict(zip(batch.classes, batch.predict_proba_many([x])[0].tolist(), strict=True))
                   if batch.classes else {})
        assert p_one == p_batch  # the same floats, not merely close
        one.learn_one(x, y, w)
        batch.learn_many([x], [y], [w])
    a, b = one._components[0], batch._components[0]
    assert one.n_events == batch.n_events == 400
    assert np.array_equal(one._class_counts, batch._class_counts)
    assert np.array_equal(a._counts, b._counts) and a._column == b._column


def test_an_event_of_values_seen_before_is_counted_without_a_batch(monkeypatch):
    model = make_model("catnb")
    model.learn_many([{"colour": "red", "n": 3, "ok": True}, {"colour": "blue", "n": 4, "ok": False}],
                     ["a", "b"])
    model.predict_proba_one({"colour": "red"})

    def no_batch(*args, **kwargs):
        raise AssertionError("the batch path was taken")

    monkeypatch.setattr(NaiveBayesBase, "learn_many", no_batch)
    monkeypatch.setattr(NaiveBayesBase, "predict_proba_many", no_batch)
    model.learn_one({"colour": "red", "n": 3, "ok": True, "unused": None}, "a")
    p = model.predict_proba_one({"colour": "red", "n": 3, "never": "seen"})
    assert p["a"] > p["b"] and math.isclose(sum(p.values()), 1.0)
    with pytest.raises(AssertionError, match="batch path"):  # a new value needs the batch path
        model.learn_one({"colour": "green"}, "a")


def test_what_the_batch_path_refuses_is_refused_the_same_way():
    model = make_model("catnb", max_values=2)
    model.learn_one({"colour": "red", "n": 1}, "a")
    for x, y, error in [({"n": math.nan}, "a", FeatureError), ({"n": math.inf}, "a", FeatureError),
                        ({"n": 10**400}, "a", FeatureError), ({"colour": [1]}, "a", FeatureError),
                        ({"colour": "red"}, None, ModelError)]:
        with pytest.raises(error):
            model.learn_one(x, y)
        with pytest.raises(error) if y is not None else contextlib.nullcontext():
            model.predict_proba_one(x)
    model.learn_one({"colour": "blue"}, "a")
    with pytest.raises(Exception, match="max_values"):
        model.learn_one({"colour": "green"}, "a")
    assert model.n_events == 2


def test_a_text_field_and_odd_weights_take_the_batch_path():
    one, batch = make_model("catnb"), make_model("catnb")
    for x, y, w in [({"text": "free prize", "tld": "biz"}, "spam", 1.0),
                    ({"text": "lunch", "tld": "org"}, "ham", 1.0),
                    ({"tld": "biz"}, "spam", np.float64(3.0)), ({"tld": "org"}, "ham", True)]:
        assert one.predict_proba_one(x) == (
            dict(zip(batch.classes, batch.predict_proba_many([x])[0].tolist(), strict=True))
            if batch.classes else {})
        one.learn_one(x, y, w)
        batch.learn_many([x], [y], [w])
    assert np.array_equal(one._components[0]._counts, batch._components[0]._counts)


@pytest.mark.parametrize("params", [{"alpha": np.float32(0.3)}, {"m": np.float16(1.5)}])
def test_numpy_smoothing_parameters_give_the_batch_paths_floats(params):
    one, batch = make_model("catnb", **params), make_model("catnb", **params)
    for x, y, w in stream(200, 3):
        if batch.classes:
            assert one.predict_proba_one(x) == dict(
                zip(batch.classes, batch.predict_proba_many([x])[0].tolist(), strict=True))
        one.learn_one(x, y, w)
        batch.learn_many([x], [y], [w])


def test_a_merged_or_restored_model_goes_on_one_event_at_a_time_as_in_batches():
    from streambayes.models import model_from_state

    events = list(stream(300, 11))
    one, batch = make_model("catnb"), make_model("catnb")
    other = make_model("catnb")
    other.learn_many([x for x, _, _ in events[200:]], [y for _, y, _ in events[200:]])
    for t, (x, y, w) in enumerate(events[:200]):
        if t == 80:
            one, batch = model_from_state(one.to_state()), model_from_state(batch.to_state())
        if t == 140:
            one.merge(other)
            batch.merge(other)
        if batch.classes:
            assert one.predict_proba_one(x) == dict(
                zip(batch.classes, batch.predict_proba_many([x])[0].tolist(), strict=True))
        one.learn_one(x, y, w)
        batch.learn_many([x], [y], [w])
    assert np.array_equal(one._components[0]._counts, batch._components[0]._counts)


def test_clues_of_a_dict_changed_since_its_batch_are_of_the_dict_as_it_is():
    model = make_model("catnb")
    model.learn_many([{"f": "a", "g": "x"}, {"f": "b", "g": "y"}, {"f": "a", "g": "y"}],
                     ["p", "q", "p"])
    x = {"f": "a", "g": "x"}
    model.predict_proba_many([x])  # its batch is remembered for clues of the same dicts
    x["f"], x["g"] = "b", "y"
    model.predict_proba_one(x)
    assert [name for name, _ in model.clues_many([x])[0]] == ["f=b", "g=y"]
