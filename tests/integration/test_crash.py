"""Exactly-once state: ``kill -9`` the learner process mid-stream, for ``nb``, AODE and ``bn`` with EM.

Events are produced at a steady pace while the learner runs (and until every kill has happened),
so every kill lands mid-stream; the learner is restarted at once each time
(:func:`streambayes.devtools.kills.learn_with_kills`). Its final snapshot must equal, array for
array, the state of one uninterrupted learn of the same events from a file: nothing lost, nothing
counted twice. The file run reads other batches than the Kafka polls, so the ``bn`` case (asia
rows with missing values: online EM) also checks that EM's steps do not depend on batch limits.
``bench/reliability.py --parts kills`` runs the same with 20 kills each.
"""

from __future__ import annotations

import os
import random
import time

import pytest

from streambayes.devtools.kills import CASES, crash_case, learn_file, learn_with_kills
from tests.integration.helpers import assert_states_equal, sms_path

KILLS = int(os.environ.get("CRASH_KILLS", 3))
KAFKA_OPTIONS = ["--every", "2000", "--every-seconds", "0.5", "--batch-size", "500"]


@pytest.mark.parametrize("model", CASES)
def test_kill_9_mid_stream_loses_and_doubles_nothing(bootstrap, new_topic, tmp_path, model):
    seed = int(os.environ.get("CRASH_SEED", time.time_ns() % 10_000))
    print(f"CRASH_SEED={seed}")  # shown on failure: rerun with it
    rng = random.Random(seed)
    topic = new_topic(1)
    make, options, rate = crash_case(model, sms_path().parents[1])
    run = learn_with_kills(bootstrap, topic, make, [*options, *KAFKA_OPTIONS], tmp_path, kills=KILLS,
                           rng=rng, rate=rate, minimum=5_000)
    n = len(run.events)
    assert len(run.kills) == KILLS
    assert all(0 < k < n for k in run.kills), f"kills must land mid-stream: {run.kills} of {n}"
    assert run.kills == sorted(set(run.kills)), f"no progress between kills: {run.kills}"

    crashed = run.snapshot
    assert crashed.events == n
    assert crashed.positions == {topic: {"0": n}}
    uninterrupted = learn_file(run.events, options, tmp_path)
    assert uninterrupted.events == n
    if model == "bn":  # EM ran: rows with missing values, and its state is part of the comparison
        assert crashed.state["em"] is not None and int(crashed.state["em"]["n_steps"]) > 0
    assert_states_equal(crashed.state, uninterrupted.state)
