"""The Kafka topic store's manifests, without a broker: damage is a corrupt snapshot (or no write
id), never an exception that stops the store."""

import json

import pytest

from streambayes.errors import CorruptSnapshot
from streambayes.runtime.stores.kafka_topic import (
    MANIFEST_FORMAT,
    _chunk_key,
    _manifest_write,
    _parse_manifest,
    _write_id,
)
from streambayes.snapshot.payload import ReadLimits

GOOD = {"format": MANIFEST_FORMAT, "size": 10, "chunks": 1, "sha256": "0" * 64, "write": "a" * 20}


@pytest.mark.parametrize("damage", [b"[" * 50_000, b"{" * 50_000, b"[" * 100_000, b"\xff\xfe", b"[]", b"7",
                                    b'{"write": 7}', b" " * 70_000])
def test_a_damaged_manifest_is_corrupt_and_names_no_write(damage):
    with pytest.raises(CorruptSnapshot):
        _parse_manifest(damage, ReadLimits())
    assert _manifest_write(damage) is None


@pytest.mark.parametrize("write", ["A" * 20, "a" * 19, "a" * 21, "../x", 7])
def test_a_manifest_whose_write_is_not_20_hex_digits_is_corrupt(write):
    with pytest.raises(CorruptSnapshot, match="write"):
        _parse_manifest(json.dumps({**GOOD, "write": write}).encode(), ReadLimits())


def test_manifests_with_and_without_a_write_id():
    assert _parse_manifest(json.dumps(GOOD).encode(), ReadLimits()) == (10, 1, "0" * 64, "a" * 20)
    older = {k: v for k, v in GOOD.items() if k != "write"}
    assert _parse_manifest(json.dumps(older).encode(), ReadLimits())[3] is None
    assert _chunk_key("snapshot-000001.sbs", None, 3) == "snapshot-000001.sbs:000003"
    assert _chunk_key("snapshot-000001.sbs", "a" * 20, 3) == f"snapshot-000001.sbs:{'a' * 20}:000003"


def test_write_ids_are_distinct_and_start_with_the_time_in_ms():
    import time

    ids = {_write_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(len(i) == 20 for i in ids)
    assert abs(int(next(iter(ids))[:12], 16) / 1000 - time.time()) < 60
