"""Pipelined acknowledgements: how many messages a sink has sent and not yet had acknowledged,
asked without blocking, so the predict loop commits offsets only after its posteriors are
acknowledged yet never waits for an acknowledgement between two micro-batches.

:func:`unacknowledged` serves the delivery reports that have arrived and counts what is still in
flight (failed deliveries count until a ``flush`` re-sends them). A sink of its own kind may say
it with an ``unacknowledged()`` method; the two Kafka sinks of the backends are read here (their
queue of messages in flight); for any other sink (a file, memory) the answer is ``None``: the
caller flushes (cheap there).

>>> from streambayes.runtime.records.sinks import MemorySink
>>> unacknowledged(MemorySink()) is None
True
"""

from __future__ import annotations

from typing import Any


def unacknowledged(sink: Any) -> int | None:
    """Messages ``sink`` sent that are not yet acknowledged (None: unknown, flush to be sure)."""
    own = getattr(sink, "unacknowledged", None)
    if own is not None:
        return own()
    if hasattr(sink, "_in_flight") and hasattr(sink, "_failed"):  # confluent.KafkaSink
        sink._serve(0)
        return max(0, sink._in_flight) + len(sink._failed)
    if hasattr(sink, "_pending") and hasattr(sink, "_reap"):  # kafka_python.KafkaSink
        sink._reap()
        return len(sink._pending)
    return None
