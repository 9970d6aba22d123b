"""Snapshot formats and crafted snapshots: what loading costs, and what refusing costs.

1. Formats, on an ``nb`` model trained on the SMS Spam Collection: file size, write (pack) and read
   (verify + unpack) time, median of ``--repeats``, and the read's peak traced allocation, for
   format 1 (npz, stored or deflated; read only since format 2) and format 2 (safetensors).
2. Crafted snapshots (those of ``tests/unit/test_snapshot_hostile.py``, plus a zip bomb of
   ``--bomb-mb`` MiB), written as snapshot 000002 over a good 000001: the time to refuse it
   (``store.load`` with ``model_from_state``) and the peak traced allocation (tracemalloc) of that,
   next to loading and rebuilding the good snapshot, and the snapshot ``latest`` then serves.

Figures only, no asserts: ``.venv/bin/python bench/snapshot_hostile.py [--bomb-mb 2600]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import load_sms_spam  # noqa: E402

from streambayes.errors import SnapshotError  # noqa: E402
from streambayes.models import make_model, model_from_state  # noqa: E402
from streambayes.snapshot import pack, unpack  # noqa: E402
from tests.unit import test_snapshot_hostile as hostile  # noqa: E402

MB = 2**20


def measure(action: Callable[[], object], repeats: int = 1) -> tuple[float, float, object]:
    """(median seconds, peak traced MiB of one more run, its result)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    try:
        result = action()
        peak = tracemalloc.get_traced_memory()[1] / MB
    finally:
        tracemalloc.stop()
    return statistics.median(times), peak, result


def formats(repeats: int) -> None:
    texts, labels = load_sms_spam()
    model = make_model("nb")
    model.learn_many([{"text": t} for t in texts], labels)
    state = model.to_state()
    print(f"nb on SMS ({len(texts)} events)")
    print(f"{'format':<26}{'bytes':>10}{'write ms':>10}{'read ms':>10}{'read peak MiB':>15}")
    for label, options in (("1: npz (stored)", {"version": 1}),
                           ("1: npz (deflated)", {"version": 1, "compress": True}),
                           ("2: safetensors", {})):
        def write(options=options):
            return pack(state, snapshot_id="000001", model="nb", config={}, positions={}, events=1,
                        created_at="2026-01-01T00:00:00.000Z", **options)[0]

        write_s, _, data = measure(write, repeats)
        read_s, peak, _ = measure(lambda data=data: unpack(data), repeats)
        print(f"{label:<26}{len(data):>10}{write_s * 1e3:>10.2f}{read_s * 1e3:>10.2f}{peak:>15.1f}")


def crafted(bomb_mb: int, repeats: int) -> None:
    cases = {name: make for name, (make, _) in hostile.CRAFTED.items()}
    cases.update({f"bad state: {name}": make for name, make in hostile.BAD_STATES.items()})
    bomb = hostile._bomb(bomb_mb * MB)
    cases[f"zip bomb {len(bomb) / MB:.2f} MiB -> {bomb_mb} MiB"] = lambda: bomb
    print(f"\n{'snapshot 000002':<48}{'ms':>9}{'peak MiB':>10}  then served  refused because")
    with tempfile.TemporaryDirectory() as tmp:
        store = hostile._store(Path(tmp) / "good")
        seconds, peak, snap = measure(lambda: store.load("000001", model_from_state), repeats)
        print(f"{'a good one, loaded and rebuilt':<48}{seconds * 1e3:>9.2f}{peak:>10.1f}  {snap.id}")
        signed = {"signed: tampered": lambda: hostile._tampered(hostile._signed_by(hostile.KEY, tmp_path)),
                  "signed: another key": lambda: hostile._signed_by(b"another key", tmp_path),
                  "signed: unsigned": lambda: hostile._signed_by(None, tmp_path)}
        for index, (name, make) in enumerate({**cases, **signed}.items()):
            tmp_path = Path(tmp) / f"other{index}"
            keyed = {"key": hostile.KEY} if name.startswith("signed") else {}
            store = hostile._store(Path(tmp) / str(index), **keyed)
            made = make()
            if isinstance(made, bytes):
                hostile._put(store, made)
            else:  # a state: written with a valid checksum
                store.write(made, model="nb", positions=hostile.POSITIONS, events=3)
            seconds, peak, error = measure(lambda store=store: _refusal(store), repeats)
            served = store.latest(model_from_state).id
            print(f"{name:<48}{seconds * 1e3:>9.2f}{peak:>10.1f}  {served:<11}  {str(error)[:70]}")


def _refusal(store) -> SnapshotError | None:
    try:
        store.load("000002", model_from_state)
    except SnapshotError as exc:
        return exc
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bomb-mb", type=int, default=512, help="zip bomb size, MiB (default 512)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import logging

    logging.disable(logging.WARNING)  # one warning per refusal: the table says it already
    formats(args.repeats)
    crafted(args.bomb_mb, args.repeats)


if __name__ == "__main__":
    main()
