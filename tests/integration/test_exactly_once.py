"""Exactly-once posteriors (issue 12): ``predict --exactly-once`` killed with ``kill -9`` under load.

Two predictors in one group serve a 2-partition topic while events arrive; one of them, at random,
is killed and restarted (same transactional id) several times, so batches are cut mid-transaction
and partitions move between the members. One event in 40 is invalid (a dead letter, written in the
same transactions). ``read_committed`` readers must see exactly one posterior per good input and
one dead letter per bad one: none lost, none twice. Both client backends.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter

import pytest

from streambayes.devtools.kills import crash_case
from streambayes.devtools.predict_kills import predict_with_kills
from tests.integration.helpers import sms_path, trained_snapshot

KILLS = int(os.environ.get("EOS_KILLS", 3))


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_kill_9_exactly_once_posteriors(bootstrap, new_topic, tmp_path, client):
    seed = int(os.environ.get("EOS_SEED", time.time_ns() % 10_000))
    print(f"EOS_SEED={seed}")  # shown on failure: rerun with it
    inbox, outbox, dlq = (new_topic(2, prefix=p) for p in ("eos-in", "eos-out", "eos-dlq"))
    snaps = tmp_path / "s"
    trained_snapshot(snaps)
    good, _options, _rate = crash_case("nb", sms_path().parents[1])

    def make(i: int) -> dict:
        return {**good(i), "text": 12345} if i % 40 == 7 else good(i)  # a number: invalid

    run = predict_with_kills(bootstrap, inbox, outbox, make, snaps, tmp_path, kills=KILLS,
                             rng=random.Random(seed), client=client, rate=1_000, minimum=5_000,
                             dead_letters=dlq)
    assert len(run.kills) == KILLS
    bad = {str(e["id"]) for e in run.events if e["text"] == 12345}
    produced = {str(e["id"]) for e in run.events} - bad
    assert len(produced) + len(bad) == len(run.events) and bad
    for name, records, expected in (
            ("posteriors", [json.loads(r.value)["id"] for r in run.posteriors], produced),
            ("dead letters", [json.loads(json.loads(r.value)["payload"])["id"]
                              for r in run.dead_letters], bad)):
        committed = Counter(map(str, records))
        twice = {i: n for i, n in committed.items() if n > 1}
        assert not twice, f"{len(twice)} inputs have several committed {name}, e.g. {list(twice)[:5]}"
        assert set(committed) == expected, (f"{name}: missing {len(expected - set(committed))}, "
                                             f"unexpected {len(set(committed) - expected)}")
