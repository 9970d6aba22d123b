"""Hostile records for tests and benchmarks: every kind of bad input an adversarial run found.

Deep nesting, integers of 400 and 5,000 digits, 1e308 numbers, NaN and Infinity literals, weights
of 1e12 and 1e308, a new label or field name per record, 5,000 features in one event, wrong types,
duplicate keys, lone surrogates, non-object JSON, broken JSON, missing labels, empty events, random
bytes, a 100 KB label, nested feature values, and (every 500th record, at most ``big_max`` of each)
a 2 MB record over a broker's default message size and an 800 KB record that is not UTF-8.

>>> records = hostile_records(30)
>>> len(records), all(10 not in r for r in records)  # one line each
(30, True)
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable


def _deep(depth: int) -> bytes:
    return b'{"label": "spam", "text": "x", "features": {"a": ' + b"[" * depth + b"]" * depth + b"}}"


def hostile_records(n: int, seed: int = 0, big_max: int = 40) -> list[bytes]:
    """``n`` hostile records (one JSONL line each), every kind in turn; the big kinds (a megabyte
    or so) every 500th record, at most ``big_max`` times each."""
    rng = random.Random(seed)
    small: list[Callable[[int], bytes]] = [
        lambda i: _deep(100_000),
        lambda i: b'{"label": "spam", "text": "x", "features": {"n": ' + b"9" * 5000 + b"}}",
        lambda i: b'{"label": "spam", "text": "x", "features": {"n": ' + b"7" * 400 + b"}}",
        lambda i: b'{"label": "ham", "text": "x", "features": {"v": 1e308, "w": -1e308}}',
        lambda i: b'{"label": "ham", "text": "x", "features": {"v": NaN}}',
        lambda i: b'{"label": "ham", "text": "x", "features": {"v": Infinity}}',
        lambda i: b'{"label": "spam", "text": "heavy", "weight": 1e12}',
        lambda i: b'{"label": "spam", "text": "heavy", "weight": 1e308}',
        lambda i: json.dumps({"label": f"junk-{i}", "text": "new label"}).encode(),
        lambda i: json.dumps({"label": "ham", "features": {f"field-{i}": "v"}}).encode(),
        lambda i: json.dumps({"label": "ham", "features": {f"f{j}": j for j in range(5000)}}).encode(),
        lambda i: b'{"label": "ham", "text": ["not", "a", "string"]}',
        lambda i: b'{"label": "ham", "text": "dup", "text": 5}',
        lambda i: b'{"label": "ham", "text": "\\ud800 lone surrogate"}',
        lambda i: b"[1, 2, 3]",
        lambda i: b'"just a string"',
        lambda i: b"{not json",
        lambda i: b'{"text": "no label"}',
        lambda i: b'{"label": "ham"}',
        lambda i: bytes(rng.randrange(256) for _ in range(200)),
        lambda i: b'{"label": "' + b"L" * 100_000 + b'", "text": "x"}',
        lambda i: json.dumps({"label": "ham", "text": "x", "features": {"t": {"nested": [1]}}}).encode(),
    ]
    big = [
        lambda i: b'{"label": "ham", "text": "' + b"word " * 400_000 + b'"}',  # 2 MB
        lambda i: b"\xff\xfe" + bytes(rng.randrange(256) for _ in range(800_000)),  # 800 KB not UTF-8
    ]
    out: list[bytes] = []
    big_count = 0
    for i in range(n):
        if i % 500 == 499 and big_count < big_max * len(big):
            out.append(big[big_count % len(big)](i))
            big_count += 1
        else:
            out.append(small[i % len(small)](i))
    return [r.replace(b"\n", b" ") for r in out]
