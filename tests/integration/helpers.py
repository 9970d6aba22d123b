"""Shared pieces of the Kafka integration tests: SMS events, bad records, state comparison."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from streambayes.config import Settings
from streambayes.runtime.records.sources import FileSource

GROUP_OPTIONS_BY_CLIENT = {"kafka-python": {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000},
                           "confluent": {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}}
GROUP_OPTIONS = GROUP_OPTIONS_BY_CLIENT[Settings().kafka_client]  # the client of Settings()

# (raw bytes, the dead-letter reason they must get)
BAD_RECORDS = [
    (b"\xff\xfe not utf-8", "undecodable"),
    (b'{"id": "bad-json", "label": "spam", "text": "unterminated', "bad_json"),
    (b'{"id": "no-label", "text": "hello there"}', "missing_label"),
    (b'{"id": "empty", "label": "ham"}', "empty_event"),
]
BAD_UNLABELLED = [
    (b"not json at all", "bad_json"),
    (b'{"id": "feature-named-text", "features": {"text": "x"}}', "bad_feature"),
]


def sms_path() -> Path:
    data = Path(os.environ.get("STREAMBAYES_DATA", Path(__file__).parents[3] / "shared" / "data"))
    path = data / "sms_spam_collection" / "SMSSpamCollection"
    assert path.is_file(), f"the SMS Spam Collection is missing: {path} (set STREAMBAYES_DATA)"
    return path


def sms_events(n: int, *, labelled: bool = True, prefix: str = "m") -> list[dict]:
    """``n`` events from the SMS Spam Collection (cycled, with unique ids when n > 5,574)."""
    rows: list[tuple[str, str]] = []
    with FileSource(sms_path()) as source:
        for record in source.poll(10_000):
            label, _, text = record.value.decode("utf-8").partition("\t")
            rows.append((label, text))
    events = []
    for i in range(n):
        label, text = rows[i % len(rows)]
        event = {"id": f"{prefix}-{i:06d}", "text": text}
        if labelled:
            event["label"] = label
        events.append(event)
    return events


def encode(event: dict) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode("utf-8")


def write_jsonl(path: Path, events: list[dict]) -> Path:
    path.write_bytes(b"".join(encode(e) + b"\n" for e in events))
    return path


def wait_until(condition: Callable[[], bool], timeout: float, what: str, step: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(step)


class Background(threading.Thread):
    """Run ``fn`` in a thread; ``result()`` re-raises its exception in the test."""

    def __init__(self, fn: Callable[[], object]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.value: object = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.value = self.fn()
        except BaseException as exc:  # noqa: BLE001 (handed to the test thread)
            self.error = exc

    def result(self, timeout: float = 30.0) -> object:
        self.join(timeout)
        assert not self.is_alive(), "background loop did not stop"
        if self.error is not None:
            raise self.error
        return self.value


def canonical_state(state: dict) -> dict:
    """A learner state with every per-class array in sorted class order (for exact comparison).

    Class order is the order of first appearance, which differs between equal streams read
    in a different interleaving; the statistics themselves must match exactly. A fitted
    ``alpha="auto"`` is refitted to the final counts first: a merge refits it on the merged counts,
    one learner at its last refit point (an event count), so only the counts are comparable as
    they stand."""
    state = _refitted(state)
    classes = list(state["classes"])
    order = np.argsort(np.array(classes, dtype=object).astype(str), kind="stable")

    def walk(node, key=""):
        if isinstance(node, dict):
            return {k: walk(v, k) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, np.ndarray) and key != "cols" and node.ndim >= 1 \
                and node.shape[0] == len(classes):
            return node[order]
        return node

    out = walk(state)
    out["classes"] = sorted(classes, key=str)
    return out


def _refitted(state: dict) -> dict:
    params = state.get("params") if isinstance(state, dict) else None
    if not isinstance(params, dict) or params.get("alpha", 1.0) not in (None, "auto"):
        return state
    from streambayes.models import model_from_state

    model = model_from_state(state)
    model.refit_alpha()
    return model.to_state()


def assert_states_equal(a, b, path: str = "state") -> None:
    """Recursive exact equality of two states (arrays compared element by element, bitwise)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{path}: keys differ"
        for k in a:
            assert_states_equal(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_states_equal(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.shape == b.shape, f"{path}: shapes differ"
        assert np.array_equal(a, b), f"{path}: {int((a != b).sum())} elements differ"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def trained_snapshot(directory) -> None:
    """A snapshot of ``nb`` learned on 1,000 SMS messages in ``directory`` (for predictors)."""
    from streambayes.models import make_model
    from streambayes.snapshot import SnapshotStore

    events = sms_events(1000)
    model = make_model("nb")
    model.learn_many([{"text": e["text"]} for e in events], [e["label"] for e in events])
    SnapshotStore(directory).write(model.to_state(), model="nb", positions={}, events=len(events))
