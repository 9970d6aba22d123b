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


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_member_whose_consumer_stops_fetching_is_renewed_and_stays_exact(
        bootstrap, new_topic, tmp_path, monkeypatch, caplog, client):
    """The stall guard on a real broker: the member's consumer is made to stop fetching (its
    partitions paused inside its own poll, as a wedged fetcher looks: no records, its last
    fetched ends standing still) while events keep coming; the guard renews the consumer and the
    shards equal one uninterrupted learner of every event."""
    import importlib
    import threading

    from streambayes.config import Settings
    from streambayes.runtime.kafka import kafka_python
    from streambayes.runtime.loops.learn import LearnJob
    from streambayes.runtime.loops.learn_run import run_learn
    from streambayes.runtime.loops.shards import newest_summary
    from tests.integration.helpers import Background, encode, sms_events, wait_until

    topic = new_topic(2)
    module = importlib.import_module("streambayes.runtime.kafka.member_"
                                     + client.replace("-", "_"))
    freeze, frozen, members, ends = threading.Event(), [], [], []
    real_poll = module.MemberSource.poll

    def poll(self, max_records=500, timeout=0.0):
        if freeze.is_set() and self._consumer not in frozen:  # once, this consumer only
            held = list(self._consumer.assignment())
            assert held, "the member holds partitions when it is frozen"
            members.append(self.joined())
            ends.append(self.fresh_ends(sorted(tp.partition for tp in held)))
            self._consumer.pause(held) if client == "confluent" else self._consumer.pause(*held)
            frozen.append(self._consumer)
            freeze.clear()
        return real_poll(self, max_records, timeout)

    monkeypatch.setattr(module.MemberSource, "poll", poll)
    from streambayes.runtime.loops import group

    monkeypatch.setattr(group, "RECHECK_SECONDS", 1.0)  # the second look sooner: a shorter test
    settings = Settings(kafka_client=client, kafka_group=f"stall-{topic}", kafka_stall_seconds=3)
    events = sms_events(600, prefix=f"st{client[0]}")
    sink = kafka_python.KafkaSink(bootstrap)

    def send(part):
        for e in part:
            sink.send(topic, e["id"], encode(e))
        sink.flush()

    def learned():
        header = newest_summary(tmp_path / "snaps")
        return 0 if header is None else header["events"]

    stop = threading.Event()
    job = LearnJob(source=f"kafka://{bootstrap}/{topic}", snapshots=tmp_path / "snaps",
                   model="nb", every=100, every_seconds=0.5)
    caplog.set_level("WARNING", "streambayes.runtime.loops.group")
    run = Background(lambda: run_learn(job, settings, stop))
    try:
        send(events[:300])
        wait_until(lambda: learned() == 300, 60, "the first 300 events learned")
        freeze.set()
        wait_until(lambda: bool(frozen), 30, "the member's consumer to be frozen")
        send(events[300:])
        wait_until(lambda: learned() == 600, 90, "learning to go on after the consumer froze")
    finally:
        sink.close()
        stop.set()
        run.result(60)
    assert len(frozen) == 1 and members == [True]  # a member of the group, whose ends a new
    assert ends[0] is not None and sum(ends[0].values()) == 300  # client gets from the broker
    assert "the consumer is not fetching" in caplog.text, caplog.text
    from streambayes.runtime.loops.shards import newest_state

    merged = newest_state(tmp_path / "snaps")
    assert merged.events == 600 and sum(merged.positions[topic].values()) == 600
    reference = learn_file(events, ["--model", "nb"], tmp_path)
    assert_states_equal(canonical_state(merged.state), canonical_state(reference.state))
