"""Snapshots: learner state + source positions + model config; versioned, checksummed, no pickle.

- :mod:`.codec`: state <-> (JSON skeleton, named numpy arrays);
- :mod:`.fileformat`: the bytes of one snapshot (preamble, JSON header, arrays) and their verification;
- :mod:`.payload`: the arrays section (safetensors; npz for format 1) and the read limits;
- :mod:`.store`: numbered snapshots in a directory (:class:`SnapshotStore`) or in memory
  (:class:`MemorySnapshotStore`), written atomically, the last K kept, corrupt ones skipped.

The stores that do I/O with clients (a compacted Kafka topic, S3) implement the same
:class:`BaseSnapshotStore` in :mod:`streambayes.runtime.stores`, chosen by URI with ``open_store``.
"""

from streambayes.errors import CorruptSnapshot, SnapshotError
from streambayes.snapshot.codec import decode_state, encode_state
from streambayes.snapshot.fileformat import FORMAT_VERSION, pack, read_header, unpack
from streambayes.snapshot.payload import ReadLimits
from streambayes.snapshot.store import (
    BaseSnapshotStore,
    MemorySnapshotStore,
    Snapshot,
    SnapshotInfo,
    SnapshotStore,
    format_id,
    load_snapshot_file,
    parse_id,
    read_snapshot_header,
    summarize,
)

__all__ = [
    "FORMAT_VERSION",
    "BaseSnapshotStore",
    "CorruptSnapshot",
    "MemorySnapshotStore",
    "ReadLimits",
    "Snapshot",
    "SnapshotError",
    "SnapshotInfo",
    "SnapshotStore",
    "decode_state",
    "encode_state",
    "format_id",
    "load_snapshot_file",
    "pack",
    "parse_id",
    "read_header",
    "read_snapshot_header",
    "summarize",
    "unpack",
]
