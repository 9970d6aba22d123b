"""The learner's dead letters exactly once (issue 12): ``learn --exactly-once`` killed with ``kill -9``.

Events with one invalid record in 25 are produced while learners learn them into a Kafka state topic,
their dead letters going to a Kafka topic; learners are killed (SIGKILL) mid-stream and started
again (:mod:`streambayes.devtools.letter_kills`). Each checkpoint's letters and snapshot are one
Kafka transaction, so a ``read_committed`` reader of the dead-letter topic sees exactly one letter
per bad record, and the merged state equals one uninterrupted learner of the same events. A static
learner (``--partitions 0``) and a group of two (one shard per partition), on both clients. And
the state topic's reader skips an open or aborted checkpoint transaction (read_committed).
``LETTERS_EXACTLY_ONCE=0`` runs the same without the flag: the letters of the records read since
the last snapshot are sent again after each kill, and the test fails on duplicates.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter

import pytest

from streambayes.devtools.kills import crash_case, learn_file, wait_until
from streambayes.devtools.letter_kills import learn_letters_with_kills
from tests.integration.helpers import assert_states_equal, canonical_state, sms_path

KILLS = int(os.environ.get("LETTER_KILLS", 3))
FLAG = ["--exactly-once"] if os.environ.get("LETTERS_EXACTLY_ONCE", "1") != "0" else []
OPTIONS = ["--every", "1000", "--every-seconds", "0.5", "--batch-size", "250"]


@pytest.mark.parametrize(("client", "mode"), [("kafka-python", "static"), ("confluent", "group"),
                                              ("confluent", "static"), ("kafka-python", "group")])
def test_kill_9_exactly_one_dead_letter_per_bad_record(bootstrap, new_topic, tmp_path, client, mode):
    seed = int(os.environ.get("LETTER_SEED", time.time_ns() % 10_000))
    print(f"LETTER_SEED={seed}")  # shown on failure: rerun with it
    static = mode == "static"
    topic = new_topic(1 if static else 3, prefix="letters-in")
    dead, state = new_topic(2, prefix="letters-dlq"), f"letters-state-{topic}"
    good, options, _rate = crash_case("nb", sms_path().parents[1])

    def make(i: int) -> dict:
        return {**good(i), "text": 12345} if i % 25 == 7 else good(i)  # a number: a dead letter

    run = learn_letters_with_kills(
        bootstrap, topic, make, [*options, *OPTIONS, *FLAG], tmp_path, state_topic=state,
        dead_topic=dead, kills=KILLS, rng=random.Random(seed), members=2, static=static,
        client=client, rate=1_000, minimum=int(os.environ.get("LETTER_EVENTS", 6_000)))
    bad = [str(e["id"]) for e in run.events if e["text"] == 12345]
    n_good = len(run.events) - len(bad)
    assert len(run.kills) == KILLS and all(0 < k < n_good for k in run.kills), run.kills
    print(f"{len(bad)} bad records, {len(run.letters)} committed letters, {run.seconds:.1f} s")

    letters = Counter(run.letters)
    twice = {i: n for i, n in letters.items() if n > 1}
    assert not twice, (f"{len(twice)} bad records have several committed dead letters "
                       f"({len(run.letters)} letters for {len(bad)} bad records), e.g. {list(twice)[:5]}")
    assert set(letters) == set(bad), (f"missing {len(set(bad) - set(letters))} letters, "
                                      f"unexpected {len(set(letters) - set(bad))}")

    merged = run.merged
    assert merged.events == n_good
    assert sum(merged.positions[topic].values()) == len(run.events)
    uninterrupted = learn_file(run.events, options, tmp_path)
    assert uninterrupted.events == n_good
    assert_states_equal(canonical_state(merged.state), canonical_state(uninterrupted.state))


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_state_topic_readers_see_committed_snapshots_only(bootstrap, client):
    """A reader of the state topic (another host) does not see the snapshot of an open or an
    aborted checkpoint transaction, and is not held up by the open one."""
    from streambayes.errors import BrokerError
    from streambayes.runtime.kafka.transactions import Aborted, TransactionalSink
    from streambayes.runtime.stores.kafka_topic import KafkaSnapshotStore, TopicLog
    from tests.store_conformance import STATE

    topic = f"letters-state-{os.getpid()}-{time.time_ns()}"

    def store() -> KafkaSnapshotStore:
        return KafkaSnapshotStore(TopicLog(bootstrap, topic, timeout=20.0))

    def write(s, n: int):
        return s.write({**STATE, "counts": STATE["counts"] + n}, model="mnb",
                       positions={"events": {"0": n}}, events=n)

    writer, reader = store(), store()
    largest = writer.log.chunk_bytes + 1024
    size = ({"message.max.bytes": largest} if client == "confluent"
            else {"max_request_size": largest})
    sink = TransactionalSink(client, bootstrap, f"test-{topic}", options=size)
    log = writer.log
    try:
        log.writer = sink
        sink.exactly_once(lambda: write(writer, 1), None, "", {})
        log.overlay.update(log.pending)
        log.pending = {}
        # The commit's markers reach the partition just after the commit returns: until then the
        # last stable offset (a read_committed reader's end) stands before the snapshot.
        wait_until(lambda: reader.ids() == ["000001"], 20.0, "the committed snapshot", step=0.1)

        def open_then_fail() -> None:
            write(writer, 2)
            sink._impl.flush()  # the open transaction's records are in the topic
            assert reader.ids() == ["000001"]  # read_committed: stops before them, at once
            raise BrokerError("the learner died here")

        with pytest.raises(Aborted):
            sink.exactly_once(open_then_fail, None, "", {})
        log.pending = {}
        assert reader.ids() == ["000001"] and reader.latest().events == 1
        assert writer.ids() == ["000001"]
    finally:
        log.writer = None
        sink.close()
        writer.log.close()
        reader.log.close()


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_strict_read_sees_snapshots_committed_behind_another_open_transaction(bootstrap, client):
    """Every shard writes partition 0 of the state topic. A transaction another shard's writer
    left open (killed mid-checkpoint) holds the last stable offset below a snapshot committed
    after it began: a plain read stops before that snapshot at once (a predictor is not held
    up), and the strict read of a learner taking a shard over waits until the open transaction
    ends (here its id's next producer fences it after a second), then sees it."""
    import threading

    from streambayes.runtime.kafka.transactions import TransactionalSink
    from streambayes.runtime.stores.kafka_topic import KafkaSnapshotStore, TopicLog
    from tests.store_conformance import STATE

    topic = f"strict-state-{os.getpid()}-{time.time_ns()}"

    def store() -> KafkaSnapshotStore:
        return KafkaSnapshotStore(TopicLog(bootstrap, topic, timeout=20.0))

    writer = store()
    largest = writer.log.chunk_bytes + 1024
    size = ({"message.max.bytes": largest} if client == "confluent"
            else {"max_request_size": largest})
    sink = TransactionalSink(client, bootstrap, f"test-{topic}", options=size)
    killed = TransactionalSink(client, bootstrap, f"test-{topic}-other", options=size)
    log, stores = writer.log, [writer]

    def write(n: int) -> None:
        log.writer = sink
        try:
            sink.exactly_once(lambda: writer.write(
                {**STATE, "counts": STATE["counts"] + n}, model="mnb",
                positions={"events": {"0": n}}, events=n), None, "", {})
            log.overlay.update(log.pending)
        finally:
            log.writer, log.pending = None, {}

    fencer: list = []
    timer = threading.Timer(1.0, lambda: fencer.append(
        TransactionalSink(client, bootstrap, f"test-{topic}-other", options=size)))
    try:
        write(1)
        killed._impl.begin()  # another shard's checkpoint, left open
        killed._impl.send(topic, b"partition-x-1/snapshot-000001.sbs:" + b"0" * 20 + b":000000",
                          b"chunk", 0)
        killed._impl.flush()
        write(2)  # committed behind the open transaction
        plain = store()
        stores.append(plain)
        started = time.monotonic()
        assert plain.ids() == ["000001"] and time.monotonic() - started < 5.0

        strict = store()
        stores.append(strict)
        started = time.monotonic()
        timer.start()
        strict.log.refresh(strict=True)
        waited = time.monotonic() - started
        seen = sorted(key for key in strict.log.records if key.endswith(".sbs"))
        timer.join()
        assert seen == ["snapshot-000001.sbs", "snapshot-000002.sbs"], \
            f"the strict read stopped before snapshot 2: {seen}"
        assert strict.ids() == ["000001", "000002"]
        assert strict.latest().events == 2
        assert waited >= 0.9, f"the strict read did not wait for the open transaction ({waited:.2f} s)"
        assert plain.ids() == ["000001", "000002"]  # and a plain read catches up once it ended
    finally:
        timer.cancel()
        if timer.is_alive():
            timer.join()
        for s in stores:
            s.log.close()
        for producer in (sink, killed, *fencer):
            producer.close()
