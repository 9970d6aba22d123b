"""Cost of hostile shapes of data: many distinct field names, many values, many classes.

Each scenario streams ``--events`` events prequentially in mini-batches of 256 (featurize →
predict → learn, as ``replay`` does) and prints events/s (a run without tracing) and the
tracemalloc peak of the model's allocations (a second run). The model's bounds are raised above
the scenario's size so the cost of the data itself is measured (the bounds are tested in
``tests/unit/test_bounds.py``). On a version without the bounds the parameters are left out.

    .venv/bin/python bench/bounds.py --events 100000
    .venv/bin/python bench/bounds.py --events 20000 --only fields-num
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt, print_table  # noqa: E402

from streambayes.models import make_model  # noqa: E402

BATCH = 256


def fields_cat(n: int) -> Iterator[tuple[dict, str]]:
    """Every event a new categorical field name (plus one shared field)."""
    return (({f"f{i}": "v", "g": "xy"[i % 3 == 0]}, "ab"[i % 2]) for i in range(n))


def fields_num(n: int) -> Iterator[tuple[dict, str]]:
    """Every event a new numeric field name (plus one shared field)."""
    return (({f"f{i}": float(i % 7), "g": float(i % 3)}, "ab"[i % 2]) for i in range(n))


def values(n: int) -> Iterator[tuple[dict, str]]:
    """One categorical field, every event a new value."""
    return (({"id": f"v{i}", "g": "xy"[i % 3 == 0]}, "ab"[i % 2]) for i in range(n))


def classes(n: int) -> Iterator[tuple[dict, str]]:
    """1,000 distinct labels over two small categorical fields."""
    return (({"a": f"a{i % 10}", "b": f"b{i % 7}"}, f"c{i % 1000}") for i in range(n))


SCENARIOS: dict[str, tuple[str, Callable[[int], Iterator[tuple[dict, str]]]]] = {
    "fields-cat": ("nb", fields_cat), "fields-num": ("nb", fields_num),
    "values": ("catnb", values), "classes": ("catnb", classes),
}


def _model(name: str, n: int):
    bounds = {"max_classes": 10 * n + 10, "max_fields": 2 * n + 10, "max_values": n + 10}
    try:
        return make_model(name, **bounds)
    except TypeError:  # a version without the bounds
        return make_model(name)


def _run(name: str, events: Callable[[int], Iterator[tuple[dict, str]]], n: int) -> object:
    model, batch = _model(name, n), []
    for pair in events(n):
        batch.append(pair)
        if len(batch) == BATCH:
            _step(model, batch)
            batch = []
    if batch:
        _step(model, batch)
    return model


def _step(model, batch: list[tuple[dict, str]]) -> None:
    X = model.featurize([x for x, _ in batch])
    model.predict_log_proba_many(X)
    model.learn_many(X, [y for _, y in batch])


def measure(scenario: str, n: int) -> list[str]:
    name, events = SCENARIOS[scenario]
    start = time.perf_counter()
    _run(name, events, n)
    seconds = time.perf_counter() - start
    tracemalloc.start()
    model = _run(name, events, n)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return [scenario, name, fmt(n), fmt(n / seconds), fmt(1e3 * seconds / n, ".3f"),
            fmt(peak / 2**20, ",.1f"), fmt(model.memory_bytes() / 2**20, ",.1f")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    args = parser.parse_args(argv)
    rows = [measure(s, args.events) for s in args.only.split(",")]
    print_table("hostile shapes, prequential in batches of 256",
                ["scenario", "model", "events", "events/s", "ms/event", "peak MiB", "model MiB"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
