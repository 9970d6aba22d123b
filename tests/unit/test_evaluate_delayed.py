"""Prequential evaluation with label delay: order of predict/learn, equivalence at delay 0,
pending labels, windowed accuracies and drift points."""


import numpy as np
import pytest

from streambayes.evaluate.delayed import DelayedPrequential, delayed_prequential
from streambayes.evaluate.prequential import Prequential, prequential
from streambayes.models import make_model
from tests.unit.recorder import Recorder


def batches_of(xs, ys, sizes, ws=None):
    out, start = [], 0
    for size in sizes:
        chunk = slice(start, start + size)
        out.append((xs[chunk], ys[chunk]) if ws is None else (xs[chunk], ys[chunk], ws[chunk]))
        start += size
    return out


TIMING = ("seconds", "events_per_s")


def test_delay_zero_gives_exactly_the_prequential_summary(make_stream):
    xs, ys = make_stream(n=400, seed=4)
    ws = [1.0 + (i % 3) / 2 for i in range(len(xs))]
    batches = batches_of(xs, ys, [1, 7, 64, 128, 200], ws)
    names = ("nb", "aode", "mnb")
    plain = prequential({n: make_model(n) for n in names}, batches, per_event=False)  # by batch
    delayed = delayed_prequential({n: make_model(n) for n in names}, batches, delay=0)
    for name, row in plain.summary().items():
        got = delayed.summary()[name]
        assert {k: v for k, v in got.items() if k in row and k not in TIMING} == \
            {k: v for k, v in row.items() if k not in TIMING}
        assert got["pending"] == 0 and got["events"] == 400
        assert plain.curves[name] == delayed.curves[name]
    assert plain.labels == delayed.labels


def test_each_event_is_predicted_on_arrival_and_learned_delay_events_later():
    log: list = []
    run = DelayedPrequential({"r": Recorder(log)}, delay=3)
    for start in (0, 2, 4, 6):
        run.step([{"i": start}, {"i": start + 1}], ["a", "a"])
    # after the batch ending at position p, the labels of positions <= p - 3 are learned
    assert log == [("predict", [0, 1]), ("predict", [2, 3]), ("learn", [0]),
                   ("predict", [4, 5]), ("learn", [1]), ("learn", [2]),
                   ("predict", [6, 7]), ("learn", [3]), ("learn", [4])]
    assert run.pending == 3 and run.summary()["r"]["pending"] == 3


def test_a_delayed_model_is_scored_on_more_unlearned_labels():
    xs = [{"i": i} for i in range(100)]
    ys = ["a"] * 50 + ["b"] * 50
    batches = batches_of(xs, ys, [10] * 10)
    now = delayed_prequential({"r": Recorder()}, batches, delay=0).summary()["r"]
    late = delayed_prequential({"r": Recorder()}, batches, delay=30).summary()["r"]
    assert (now["events"], now["cold"], now["pending"]) == (100, 10, 0)
    # released at the end of batch k are positions <= 10k + 9 - 30: the first after batch 3
    assert (late["events"], late["cold"], late["pending"]) == (70, 40, 30)
    assert now["accuracy"] == pytest.approx(40 / 90)  # "a" stays the majority: 10-49 right
    assert late["accuracy"] == pytest.approx(10 / 30)  # positions 40-69 scored: 40-49 right
    assert late["accuracy"] < now["accuracy"]


def test_per_event_delays_release_out_of_order_and_missing_labels_stay_pending():
    log: list = []
    run = DelayedPrequential({"r": Recorder(log)})
    run.step([{"i": 0}, {"i": 1}, {"i": 2}], ["a", "b", "a"], delays=[5, 0, 10**9])
    run.step([{"i": 3}, {"i": 4}, {"i": 5}], ["a", "a", "a"], delays=[0, 0, 0])
    assert log == [("predict", [0, 1, 2]), ("learn", [1]), ("predict", [3, 4, 5]),
                   ("learn", [0]), ("learn", [3, 4, 5])]
    s = run.summary()["r"]
    assert (s["events"], s["cold"], s["pending"]) == (5, 2, 1)  # 0 and 1 were predicted cold
    assert run.labels == {"b": 1.0, "a": 4.0}
    with pytest.raises(ValueError):
        run.step([{"i": 6}], ["a"], delays=[-1])
    with pytest.raises(ValueError):
        run.step([{"i": 6}], ["a"], delays=[1, 2])


def test_rejections_carry_stream_positions():
    log: list = []
    run = DelayedPrequential({"r": Recorder(log), "nb": make_model("nb")}, delay=1)
    assert run.step([{"i": 0, "text": "x"}, {"i": 1, "text": "y"}], ["a", "b"]) == []
    rejected = run.step([{"i": 2, "text": "z"}, {"i": 3, "poison": 1}], ["a", "b"])
    assert [(r.index, "poison" in r.error) for r in rejected] == [(3, True)]
    # the bad event still ticks the clock: position 2 is due at position 3
    assert run.models["nb"].n_events == 3 and run.pending == 0


def test_learn_time_feature_errors_of_a_partial_release_are_rejected_by_position():
    run = DelayedPrequential({"mnb": make_model("mnb")})
    xs = [{"text": "cheap pills", "n": 1}, {"text": "hello", "n": -2}, {"text": "hi", "n": 0}]
    rejected = run.step(xs, ["spam", "ham", "ham"], delays=[0, 0, 5])  # cold: caught when learning
    assert [r.index for r in rejected] == [1] and "negative" in rejected[0].error
    assert run.models["mnb"].n_events == 1 and run.pending == 1


def test_window_and_fading_accuracy_and_drift_points_after_a_concept_flip():
    n_a, n_b, size = 3000, 2000, 100
    xs = [{"i": i} for i in range(n_a + n_b)]
    ys = ["a"] * n_a + ["b"] * n_b
    run = delayed_prequential({"r": Recorder()}, batches_of(xs, ys, [size] * 50), delay=0)
    s = run.summary()["r"]
    assert s["accuracy"] == pytest.approx(2900 / 4900)  # the majority stays "a"
    assert s["window_accuracy"] == 0.0  # the last 1,000 events are all wrong
    ages = np.arange(n_a + n_b - size)[::-1]  # scored events (the first batch is cold)
    decay = 0.999**ages
    assert s["fading_accuracy"] == pytest.approx(decay[: n_a - size].sum() / decay.sum(), rel=1e-9)
    assert s["drift_points"] and n_a <= s["drift_points"][0] < n_a + 200
    curve = run.window_curves["r"]
    assert curve.events[0] == 2 * size and curve.events[-1] == n_a + n_b
    assert curve.window_accuracy[len(curve.events) // 2] == 1.0 and curve.window_accuracy[-1] == 0.0
    assert run.drift_points == {"r": s["drift_points"]}


def test_drift_points_are_positions_of_the_triggering_events_whatever_the_delay():
    xs = [{"i": i} for i in range(4000)]
    ys = ["a"] * 2000 + ["b"] * 2000
    batches = batches_of(xs, ys, [50] * 80)
    for delay in (0, 300):
        points = delayed_prequential({"r": Recorder()}, batches, delay=delay).drift_points["r"]
        assert points and 2000 <= points[0] < 2200, (delay, points)


def test_summary_keys_extend_prequential_and_bad_parameters():
    run = DelayedPrequential({"r": Recorder()}, delay=2)
    run.step([{"i": 0}], ["a"])
    row = run.summary()["r"]
    assert set(Prequential({"r": Recorder()}).summary()["r"]) < set(row)
    assert {"pending", "window_accuracy", "fading_accuracy", "drift_points"} <= set(row)
    assert row["window_accuracy"] is None and row["drift_points"] == [] and row["pending"] == 1
    with pytest.raises(ValueError):
        DelayedPrequential({"r": Recorder()}, delay=-1)
