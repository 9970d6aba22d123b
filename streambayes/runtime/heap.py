"""The cyclic garbage collector and a long-running stream loop.

A learn loop allocates a handful of tracked objects per event (records, events, ``x`` dicts), so
the collector runs often, and each of its full collections walks every tracked object of the
process: the imported modules, pydantic schemas, the model. On SMS events that walking was about a
quarter of the learner's time. :func:`freeze_long_lived` collects once, then moves the objects
alive at that moment out of the collector's view (:func:`gc.freeze`): later collections walk only
what the stream allocates. Frozen objects are still freed by reference counting as usual; only a
reference cycle among them would stay until :func:`gc.unfreeze`, so it is called once, when a
loop starts, not per model or per batch.
"""

from __future__ import annotations

import gc


def freeze_long_lived() -> None:
    """Collect, then freeze the objects alive now (see the module docstring)."""
    gc.collect()
    gc.freeze()
