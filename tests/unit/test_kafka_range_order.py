"""A replay range of several partitions comes out in one order whatever the client's fetch
interleaving: by timestamp, then partition, then offset; bounds apply per partition."""

import random

import pytest

from streambayes.runtime.kafka.ranges import KafkaRange
from streambayes.runtime.records.sources import Record


class FakeAssigned:
    """An assigned source over fixed partitions that hands records out in a chosen interleaving."""

    def __init__(self, parts: dict[int, list[int]], style: str, seed: int = 0):
        self.topic = "t"
        self.parts = parts  # partition -> timestamps, in offset order
        self.assigned = sorted(parts)
        self.style, self.rng = style, random.Random(seed)
        self._next = {p: 0 for p in parts}

    def refresh(self):
        pass

    def beginning_offsets(self):
        return {p: 0 for p in self.parts}

    def end_offsets(self):
        return {p: len(ts) for p, ts in self.parts.items()}

    def offsets_for_time(self, ms):
        return {p: next((i for i, t in enumerate(ts) if t >= ms), None) for p, ts in self.parts.items()}

    def seek(self, positions):
        self._next = {int(p): int(o) for p, o in positions["t"].items()}

    def positions(self):
        return {"t": {str(p): o for p, o in self._next.items()}}

    def poll(self, max_records=500, timeout=0.0):
        ready = [p for p in self.parts if self._next[p] < len(self.parts[p])]
        if not ready:
            return []
        if self.style == "partition-at-a-time":
            chosen = [min(ready)]
        else:  # random bursts from random partitions, like fetches that interleave at will
            chosen = self.rng.sample(ready, self.rng.randint(1, len(ready)))
        out = []
        for p in chosen:
            n = min(self.rng.randint(1, 7), max_records - len(out))
            for _ in range(n):
                if self._next[p] >= len(self.parts[p]):
                    break
                o = self._next[p]
                out.append(Record(b"", None, "t", p, o, timestamp=self.parts[p][o]))
                self._next[p] += 1
        return out

    def close(self):
        pass


def drain(rng: KafkaRange, batch: int = 5) -> list[tuple[int, int]]:
    out = []
    while records := rng.poll(batch):
        out += [(r.partition, r.offset) for r in records]
    return out


PARTS = {0: [1, 4, 4, 9, 12, 20], 1: [2, 3, 4, 10, 11], 2: [], 3: [5, 5, 30]}


def expected(parts, start=0, stop=None):
    rows = [(t, p, o) for p, ts in parts.items() for o, t in enumerate(ts)
            if o >= start and (stop is None or o < stop)]
    return [(p, o) for _, p, o in sorted(rows)]


@pytest.mark.parametrize("style,seed", [("partition-at-a-time", 0), ("random", 1), ("random", 2)])
def test_every_interleaving_gives_the_timestamp_order(style, seed):
    got = drain(KafkaRange(FakeAssigned(PARTS, style, seed), None, None, idle_seconds=0.05))
    assert got == expected(PARTS)


@pytest.mark.parametrize("style", ["partition-at-a-time", "random"])
def test_offset_bounds_apply_per_partition(style):
    rng = KafkaRange(FakeAssigned(PARTS, style, 3), "1", "3", idle_seconds=0.05)
    assert drain(rng) == expected(PARTS, start=1, stop=3)
    assert rng.positions() == {"t": {"0": 3, "1": 3, "2": 1, "3": 3}}  # 2 is empty: as sought


def test_the_buffer_is_bounded_and_releases_the_earliest_past_it():
    parts = {0: list(range(100, 200)), 1: list(range(100))}
    source = FakeAssigned(parts, "partition-at-a-time")  # hands out partition 0 first, entirely
    rng = KafkaRange(source, None, None, idle_seconds=0.05, max_buffered=10)
    got = drain(rng)
    assert sorted(got) == sorted((p, o) for p, ts in parts.items() for o in range(len(ts)))
    assert got[0] == (0, 0)  # the bound forced a release before partition 1 was read
