"""Group-managed learners on a real broker: three learners in one consumer group on a
multi-partition topic, members killed with ``kill -9`` and started during the stream, partitions
added mid-stream; the merge of the partition shards must equal, array for array, one uninterrupted
learner of the same events (:mod:`streambayes.devtools.group_kills`)."""

from __future__ import annotations

import os
import random
import time

import pytest

from streambayes.devtools.group_kills import learn_group_with_kills
from streambayes.devtools.kills import crash_case, learn_file
from tests.integration.helpers import assert_states_equal, canonical_state, sms_path

KILLS = int(os.environ.get("GROUP_KILLS", 2))
OPTIONS = ["--every", "2000", "--every-seconds", "0.5", "--batch-size", "500"]


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_three_learners_killed_and_started_equal_one_learner(bootstrap, new_topic, tmp_path,
                                                             monkeypatch, client):
    monkeypatch.setenv("STREAMBAYES_KAFKA_CLIENT", client)
    seed = int(os.environ.get("GROUP_SEED", time.time_ns() % 10_000))
    print(f"GROUP_SEED={seed}")  # shown on failure: rerun with it
    topic = new_topic(6)  # two partitions per member
    make, options, _ = crash_case("nb", sms_path().parents[1])
    run = learn_group_with_kills(bootstrap, topic, make, [*options, *OPTIONS], tmp_path,
                                 members=3, kills=KILLS, rng=random.Random(seed), grow_to=8,
                                 rate=2_000, minimum=int(os.environ.get("GROUP_EVENTS", 20_000)))
    n = len(run.events)
    assert len(run.kills) == KILLS and run.started == 3 + KILLS
    assert all(0 < k < n for k in run.kills), f"kills must land mid-stream: {run.kills} of {n}"

    merged = run.merged
    assert merged.events == n
    assert sum(merged.positions[topic].values()) == n
    assert sorted(merged.positions[topic], key=int) == [str(p) for p in range(8)], \
        "every partition, the added ones too, has a shard"
    uninterrupted = learn_file(run.events, options, tmp_path)
    assert uninterrupted.events == n
    assert_states_equal(canonical_state(merged.state), canonical_state(uninterrupted.state))
