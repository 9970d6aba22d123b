"""A group that leaves a partition to nobody, on a real broker: the group learner's look at the
group (:meth:`GroupLearner._look_at_group`) finds it twice, joins again, and every event is learned.

The group's leader is a kafka-python consumer of the test's, joined first, whose assignor has the
learners' assignor's name (eager ``range`` for kafka-python learners, ``cooperative-sticky`` for
confluent ones) and assigns as a faulty one might: in the first assignment that has a learner it
gives the learner partition 1 and nobody partition 0 (what a kafka-python cooperative rebalance
once did in CI); afterwards every partition to the learner, nothing to itself."""

from __future__ import annotations

import threading

import pytest
from kafka import KafkaConsumer
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from streambayes.devtools.kills import learn_file
from tests.integration.helpers import (
    Background,
    assert_states_equal,
    canonical_state,
    encode,
    sms_events,
    wait_until,
)

LEADER = "orphaning-leader"  # its client id: the broker starts its member id with it


def faulty(base: type) -> type:
    class Faulty(base):
        calls: list[dict[str, list[int]]] = []  # each assignment made, by member id

        def assign(self, cluster, members):
            learners = sorted(m.member_id for m in members if not m.member_id.startswith(LEADER))
            topic = next(iter(members[0].metadata.topics))
            partitions = sorted(cluster.partitions_for_topic(topic) or [])
            first = learners and not any(any(c.values()) for c in Faulty.calls)
            give = [p for p in partitions if p != 0] if first else partitions
            made = {m.member_id: (give if learners and m.member_id == learners[0] else [])
                    for m in members}
            Faulty.calls.append(made)
            return {member: ConsumerProtocolAssignment(self.version, [(topic, parts)] if parts
                                                       else [], b"")
                    for member, parts in made.items()}

    return Faulty


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_partition_the_group_leaves_to_nobody_is_taken_and_learned(
        bootstrap, new_topic, tmp_path, caplog, client):
    from streambayes.config import Settings
    from streambayes.runtime.kafka import kafka_python
    from streambayes.runtime.loops.learn import LearnJob
    from streambayes.runtime.loops.learn_run import run_learn
    from streambayes.runtime.loops.shards import newest_state, newest_summary

    topic = new_topic(2)
    group = f"orphans-{topic}"
    assignor = faulty(RangePartitionAssignor if client == "kafka-python"
                      else CooperativeStickyAssignor)
    leader = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=LEADER,
                           enable_auto_commit=False, partition_assignment_strategy=(assignor,),
                           session_timeout_ms=30000, heartbeat_interval_ms=1000,
                           metadata_max_age_ms=1000)  # a long session: the learner in this
    # process keeps the cores busy, and a leader that times out leaves the learner to lead
    done = threading.Event()

    def lead():
        while not done.is_set():
            leader.poll(timeout_ms=100)

    leading = threading.Thread(target=lead, daemon=True)
    leading.start()
    events = sms_events(600, prefix=f"or{client[0]}")
    sink = kafka_python.KafkaSink(bootstrap)
    stop = threading.Event()
    run = None
    try:
        wait_until(lambda: bool(assignor.calls), 60, "the leader's group to form")
        settings = Settings(kafka_client=client, kafka_group=group, kafka_stall_seconds=3)
        job = LearnJob(source=f"kafka://{bootstrap}/{topic}", snapshots=tmp_path / "snaps",
                       model="nb", every=100, every_seconds=0.5)
        caplog.set_level("WARNING", "streambayes.runtime.loops.group")
        run = Background(lambda: run_learn(job, settings, stop))
        for e in events:
            sink.send(topic, e["id"], encode(e))
        sink.flush()

        def learned():
            header = newest_summary(tmp_path / "snaps")
            return 0 if header is None else header["events"]

        try:
            wait_until(lambda: learned() == len(events), 120, "every event learned")
        except AssertionError as exc:  # what the group and the learner did, as it is now
            raise AssertionError(f"{exc}; assignments made: {assignor.calls}; learner's "
                                 f"warnings: {caplog.text[-3000:]}") from None
    finally:
        sink.close()
        stop.set()
        if run is not None:
            run.result(60)
        done.set()
        leading.join(10)
        leader.close()
    made = [c for c in assignor.calls if any(c.values())]
    assert made, f"the faulty leader never assigned a partition (it left the group?): {assignor.calls}"
    first = made[0]
    assert sorted(p for parts in first.values() for p in parts) == [1]  # 0 left to nobody
    assert "partitions [0] were held by no member of the group at two looks" in caplog.text
    merged = newest_state(tmp_path / "snaps")
    assert merged.events == len(events) and sum(merged.positions[topic].values()) == len(events)
    reference = learn_file(events, ["--model", "nb"], tmp_path)
    assert_states_equal(canonical_state(merged.state), canonical_state(reference.state))
