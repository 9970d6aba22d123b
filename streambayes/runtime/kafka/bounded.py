"""librdkafka calls that can block for good, given a time limit.

Some confluent-kafka calls take no timeout and do not hear signals while they wait:
``Producer.close()`` flushes with ``rd_kafka_flush(rk, -1)``; a synchronous ``Consumer.commit`` and
``Consumer.close()`` can wait on a broker that went away (confluent-kafka-python#1801). A process
stuck in one ignores SIGTERM. :func:`bounded` runs such a call in a daemon thread and waits
``seconds`` for it; past that the call is left behind (logged) and ends with the process. Only for
calls made when nothing else uses the client (closing, the final commit).

:class:`CallThread` does the same for calls on the hot path (a transactional producer's offsets,
commit and abort: ``rd_kafka_send_offsets_to_transaction`` ignores its timeout, librdkafka#5456
and #5511) with one long-lived thread instead of one thread per call.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from streambayes.errors import BrokerError

logger = logging.getLogger(__name__)

CLOSE_SECONDS = 5.0  # what a closing producer waits for its last reports, and for its destruction


def bounded(call: Callable[[], Any], seconds: float, what: str) -> bool:
    """Run ``call()`` for up to ``seconds`` on a thread of its own (a :class:`CallThread` used
    once): True when it returned (its exception, if any, is raised here), False when it is still
    running (logged as ``what``)."""
    calls = CallThread(f"bounded {what}")
    try:
        calls(call, seconds, what)
    except Stuck:
        logger.warning("%s did not finish within %g s; left to end with the process", what, seconds)
        return False
    finally:
        calls.close()  # its thread ends once the call has (at once, unless it is stuck)
    return True


def close_producer(producer: Any, flush_seconds: float = CLOSE_SECONDS) -> bool:
    """Close a confluent ``producer`` without ever blocking for good; True when it closed in time.

    ``Producer.close()`` flushes with no time limit: a fenced transactional producer whose broker
    had stalled never returned from it, and its predictor ignored SIGTERM. Here deliveries get
    ``flush_seconds``, what is left is purged, and the close itself gets :data:`CLOSE_SECONDS`."""
    from confluent_kafka import KafkaException

    try:
        if producer.flush(flush_seconds):
            producer.purge()
            producer.flush(0)
    except (KafkaException, RuntimeError) as exc:  # fenced or fatal: its messages are lost anyway
        logger.warning("flushing a closing Kafka producer: %s", exc)
    close = getattr(producer, "close", None)  # confluent-kafka >= 2.12; else the handle's GC
    if close is None:
        return True
    try:
        return bounded(close, CLOSE_SECONDS, "closing a Kafka producer")
    except (KafkaException, RuntimeError) as exc:
        logger.warning("closing a Kafka producer: %s", exc)
        return True


class Stuck(BrokerError):
    """A client call did not return within its time limit and still runs in its thread: the
    client is unusable (a transactional producer is replaced or, after a stuck commit, the
    process stops; see ``transactions``)."""


class CallThread:
    """One daemon thread that runs a client's blocking calls one at a time, each with a time
    limit. A call past its limit raises :class:`Stuck` here and marks the thread ``stuck``: it is
    left to its call, and every later call raises :class:`Stuck` at once."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.stuck = False
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            call, done, box = job
            try:
                box.append((True, call()))
            except BaseException as exc:  # noqa: BLE001 (raised again in the caller's thread)
                box.append((False, exc))
            done.set()

    def __call__(self, call: Callable[[], Any], seconds: float, what: str) -> Any:
        if self.stuck:
            raise Stuck(f"{what}: an earlier call of {self.name} never returned")
        done: threading.Event = threading.Event()
        box: list[tuple[bool, Any]] = []
        self._jobs.put((call, done, box))
        try:
            finished = done.wait(seconds)
        except BaseException:  # interrupted (KeyboardInterrupt): the call still runs
            self.stuck = True
            raise
        if not finished:
            self.stuck = True
            raise Stuck(f"{what} did not return within {seconds:g} s (a librdkafka call that can "
                        "ignore its timeout, librdkafka#5456)")
        ok, value = box[0]
        if ok:
            return value
        raise value

    def close(self) -> None:
        """End the thread once its call is done (a stuck one ends with the process)."""
        self._jobs.put(None)
