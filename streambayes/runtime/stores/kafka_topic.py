"""Snapshots in a compacted Kafka topic (``kafka://HOST:PORT/TOPIC``): no shared disk needed.

Layout (one partition, partition 0; a namespace ``NS`` is ``""`` or ``"child/"...``):

- ``NS snapshot-000042.sbs:WRITE:000000`` ... ``:000006``: the snapshot's bytes in chunks that fit
  the topic's ``max.message.bytes`` (read from the broker). ``WRITE`` names the write: 20 hex
  digits, the writer's clock in milliseconds since 1970 (12) and 8 random ones, so that two
  writers of one number never write to each other's keys. (Chunks of snapshots written before
  there were write ids, ``NS snapshot-000042.sbs:000000``, are still read.)
- ``NS snapshot-000042.sbs``: the manifest, written last, once every chunk is acknowledged
  (``acks=all``): ``{"size", "chunks", "sha256", "write"}``. A snapshot exists when its manifest
  does, so a writer that dies between chunks leaves no snapshot, only orphan chunks, which a later
  write deletes once they are ``stale_after`` seconds old (default 600; a younger one may be
  another writer's write under way). Their age is read from the write id, that is from the
  writer's clock: hosts whose clocks differ by more than ``stale_after`` could delete a write
  under way (its snapshot is then corrupt, and the one before is used). A reader joins the
  chunks of the manifest's write and checks size and SHA-256 end to end (and then the snapshot's
  own checksum): a missing or damaged chunk makes the snapshot corrupt, and :meth:`latest` falls
  back to the one before.
- Two writers of one store (a learner that has just lost a state shard in a rebalance checkpoints
  it once more while its new owner writes there) may take the same next number. A writer looks
  again just before its manifest: if the number's manifest has come meanwhile, it deletes its
  chunks and takes the next number, so both snapshots are kept. If both manifests still cross,
  the later one is the snapshot, whole (each names its own chunks); the other's chunks are orphans.
- pruning (keep K) and deletion are tombstones (manifest first, then chunks); compaction
  (``cleanup.policy=compact``, set when the store creates the topic, checked when it exists)
  reclaims the space.

A reader has its own consumer that assigns partition 0 (no group) and reads it from the beginning,
then follows it: each look at the store reads what was appended since. It keeps in memory the
chunks of the newest snapshot of each namespace (and of a write still under way); older chunks
are dropped once a newer manifest arrives and only their offsets kept, so memory follows one
copy of the state. Loading an older snapshot (the newest is corrupt) fetches its chunks again
by offset, with a second consumer. Records whose keys are not this layout's are ignored. Reads
and writes give up after ``STREAMBAYES_KAFKA_DELIVERY_DEADLINE`` seconds with a SnapshotError.

Readers read committed records only (``read_committed``): the records of an open or aborted
transaction are never seen. A look ends at the last stable offset, so a transaction still open
also hides what was committed after it began; an exactly-once learner that takes a shard over
reads strictly, to the high watermark (:meth:`TopicLog.refresh`). ``learn --exactly-once``
(:mod:`~streambayes.runtime.loops.learn_exactly_once`) writes each snapshot in a transaction with
its dead letters, through ``TopicLog.writer``.

The store, its children and every look share one :class:`TopicLog`. Its reader is the configured
client's (``STREAMBAYES_KAFKA_CLIENT``, :mod:`.kafka_readers`; librdkafka by default, which loads
a fresh topic several times faster than kafka-python), with the security settings and that
client's ``STREAMBAYES_KAFKA_*OPTIONS``. The writer (producer and admin client) is kafka-python's,
with the security settings and, when ``STREAMBAYES_KAFKA_CLIENT`` is ``kafka-python``, the
``STREAMBAYES_KAFKA_*OPTIONS``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Mapping
from typing import Any

from streambayes.config import Settings
from streambayes.errors import CorruptSnapshot, SnapshotError
from streambayes.snapshot.payload import ReadLimits
from streambayes.snapshot.store import (
    _CHILD,
    STALE_TEMPORARY_SECONDS,
    BaseSnapshotStore,
    _NumberTaken,
    format_id,
)

logger = logging.getLogger(__name__)
_MANIFEST = re.compile(r"snapshot-(\d{6,})\.sbs")
_CHUNK = re.compile(r"snapshot-(\d{6,})\.sbs:(?:([0-9a-f]{20}):)?(\d{6})")  # number, write, index
_WRITE = re.compile(r"[0-9a-f]{20}")
_MAX_MANIFEST = 65_536  # bytes: a longer manifest is damage, not parsed
_OVERHEAD = 1024  # bytes of record and batch framing kept free below max.message.bytes
_DEFAULT_MAX_MESSAGE = 1_048_588  # Apache Kafka's default max.message.bytes
MANIFEST_FORMAT = "streambayes-kafka-snapshot/1"
DEFAULT_CLIENT: str = Settings.model_fields["kafka_client"].default  # the reader's, unless given


class TopicLog:
    """The live records (key -> value) of partition 0 of a compacted topic, read from the
    beginning and followed; the producer that appends to it. Shared by a store and its children.
    ``options`` are kafka-python's per role (``consumer``, ``producer``, ``admin``) and the
    reader's (``reader``, in ``client``'s names; ``client`` defaults to :data:`DEFAULT_CLIENT`)."""

    def __init__(self, bootstrap: str, topic: str, options: Mapping[str, Any] | None = None, *,
                 timeout: float = 30.0, client: str | None = None) -> None:
        self.bootstrap, self.topic, self.timeout = bootstrap, topic, timeout
        self.client = client or DEFAULT_CLIENT
        self.options = dict(options or {})
        self.records: dict[str, bytes | int] = {}  # live key -> value, or its offset when dropped
        self._offsets: dict[str, int] = {}
        self._chunks: dict[tuple[str, int], set[str]] = {}  # (namespace, number) -> chunk keys
        self.lock = threading.RLock()
        self._reader: Any = None  # kafka_readers.ConfluentReader or KafkaPythonReader
        self._producer: Any = None
        self._max_message: int | None = None
        # learn --exactly-once (loops/learn_exactly_once.py): ``send`` goes to ``writer`` in a
        # transaction, its records in ``pending``, then in ``overlay`` until read back (live())
        self.writer: Any = None
        self.pending: dict[str, bytes | None] = {}
        self.overlay: dict[str, bytes | None] = {}

    def __repr__(self) -> str:
        return f"kafka://{self.bootstrap}/{self.topic}"

    @property
    def chunk_bytes(self) -> int:
        """Bytes of snapshot per record: the topic's ``max.message.bytes`` less framing (a batch
        never holds more than one chunk, so it always fits)."""
        self._open_producer()
        assert self._max_message is not None
        return max(self._max_message - _OVERHEAD, 1024)

    def refresh(self, strict: bool = False) -> None:
        """Read what was appended since the last look (everything, the first time). A topic
        that does not exist yet is an empty store (readers never create it).

        A plain look ends at the last stable offset, before any transaction still open (and so
        before whatever was committed after it began); ``strict`` reads on to the high
        watermark, waiting up to ``timeout`` s for the transactions open below it to end
        (:mod:`.kafka_readers`). An exactly-once learner reads strictly when it takes a shard
        over; never inside its own transaction (it would wait for itself)."""
        with self.lock:
            if strict and self.writer is not None:
                raise RuntimeError(f"{self}: a strict read inside this process's own open "
                                   "transaction would wait for itself")
            reader = self._open_reader()
            if reader.exists():
                started = time.monotonic()
                reader.read(self._apply, self.timeout, strict)
                if strict and time.monotonic() - started > 1.0:
                    logger.info("%s: a strict read waited %.1f s for transactions open below "
                                "the topic's end", self, time.monotonic() - started)

    def live(self) -> dict[str, bytes | int]:
        """``records`` with this process's transactional writes not yet read back on top (those
        committed, ``overlay``, then those of the open transaction, ``pending``); the plain
        ``records`` when there are none."""
        if not self.overlay and not self.pending:
            return self.records
        out = dict(self.records)
        for key, value in (*self.overlay.items(), *self.pending.items()):
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
        return out

    def _apply(self, key: str, value: bytes | None, offset: int) -> None:
        if key in self.overlay and self.overlay[key] == value:
            del self.overlay[key]  # our own transactional write, read back
        namespace, _, name = key.rpartition("/")
        if not (_MANIFEST.fullmatch(name) or _CHUNK.fullmatch(name)) or not all(
                _CHILD.fullmatch(part) for part in namespace.split("/") if namespace):
            return  # not a snapshot record (another program's, or damage): not kept
        chunk = _CHUNK.fullmatch(name)
        if chunk:
            keys = self._chunks.setdefault((namespace, int(chunk.group(1))), set())
            if value is None:
                keys.discard(key)
            else:
                keys.add(key)
        if value is None:
            self.records.pop(key, None)
            self._offsets.pop(key, None)
            return
        self.records[key], self._offsets[key] = value, offset
        manifest = _MANIFEST.fullmatch(name)
        if manifest:  # drop the values of the namespace's older snapshots' chunks
            newest = int(manifest.group(1))
            for (ns, number), keys in list(self._chunks.items()):
                if ns == namespace and number < newest:
                    for cold in keys:
                        self.records[cold] = self._offsets[cold]
                    if not keys:
                        del self._chunks[ns, number]

    def values(self, keys: list[str]) -> list[bytes | None]:
        """The values of ``keys`` (None: not in the topic), fetched again by offset if dropped."""
        with self.lock:
            live = self.live()
            found = [live.get(key) for key in keys]
            cold = {value: key for key, value in zip(keys, found, strict=True) if isinstance(value, int)}
            fetched = self._fetch(cold) if cold else {}
            return [fetched.get(key) if isinstance(value, int) else value
                    for key, value in zip(keys, found, strict=True)]

    def _fetch(self, wanted: dict[int, str]) -> dict[str, bytes]:
        """Records at the ``wanted`` offsets (offset -> key), read again from the topic."""
        return self._open_reader().fetch(wanted, self.timeout)

    def send(self, items: list[tuple[str, bytes | None]]) -> None:
        """Append ``(key, value)`` records (None: a tombstone) and wait until all are acknowledged."""
        from kafka.errors import KafkaError

        with self.lock:
            if self.writer is not None:  # learn --exactly-once: into the open transaction
                for key, value in items:
                    self.writer.send_raw(self.topic, key.encode(), value, 0)  # partition 0, as read
                    self.pending[key] = value
                return
            try:
                self._open_producer()
                futures = [self._producer.send(self.topic, key=key.encode(), value=value, partition=0)
                           for key, value in items]
                self._producer.flush(timeout=self.timeout)
                for future in futures:
                    future.get(timeout=self.timeout)
            except KafkaError as exc:
                raise SnapshotError(f"cannot write to the state topic {self}: {exc}") from exc

    def _open_reader(self) -> Any:
        """The reader of partition 0 (:mod:`.kafka_readers`), made at the first look."""
        if self._reader is None:
            from streambayes.runtime.stores.kafka_readers import open_reader

            options = self.options.get("reader", self._role("consumer")
                                       if self.client == "kafka-python" else {})
            self._reader = open_reader(self.client, self.bootstrap, self.topic, options, str(self))
        return self._reader

    def _open_producer(self) -> None:
        """The writer's producer, after making sure the topic exists and is compacted."""
        if self._producer is not None:
            return
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        try:
            self._max_message = ensure_topic(self.bootstrap, self.topic, self.options)
            self._producer = KafkaProducer(
                bootstrap_servers=self.bootstrap, acks="all", linger_ms=0,
                max_request_size=self._max_message, batch_size=self._max_message - _OVERHEAD // 2,
                **self._role("producer"))
        except KafkaError as exc:
            raise SnapshotError(f"cannot open the state topic {self} for writing: {exc}") from exc

    def _role(self, role: str) -> dict[str, Any]:
        return dict(self.options.get(role, {}))

    def close(self) -> None:
        with self.lock:
            for client in (self._reader, self._producer):
                if client is not None:
                    client.close()
            self._reader = self._producer = None


def ensure_topic(bootstrap: str, topic: str, options: Mapping[str, Any]) -> int:
    """Create ``topic`` compacted with one partition unless it exists; check that it is compacted;
    return its ``max.message.bytes``. A state topic with ``cleanup.policy=delete`` would lose
    snapshots to retention: it is refused."""
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **dict(options.get("admin", {})))
    try:
        try:
            admin.create_topics([NewTopic(topic, 1, -1, topic_configs={"cleanup.policy": "compact"})])
            logger.info("created the compacted state topic %s", topic)
        except TopicAlreadyExistsError:
            pass
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
    finally:
        admin.close()
    configs = _topic_configs(described, topic)
    policy = str(configs.get("cleanup.policy", "compact"))
    if "compact" not in policy:
        raise SnapshotError(f"state topic {topic!r} has cleanup.policy={policy}: snapshots need a "
                            "compacted topic (cleanup.policy=compact)")
    return int(configs.get("max.message.bytes") or _DEFAULT_MAX_MESSAGE)


def _topic_configs(described: Any, topic: str) -> dict[str, Any]:
    """``{name: value}`` from kafka-python's describe_configs answer (a nested dict)."""
    if isinstance(described, Mapping):
        for by_name in described.values():
            entries = by_name.get(topic) if isinstance(by_name, Mapping) else None
            if isinstance(entries, Mapping):
                return {name: (data.get("value") if isinstance(data, Mapping) else data)
                        for name, data in entries.items()}
    return {}


class KafkaSnapshotStore(BaseSnapshotStore):
    """Snapshots in a compacted topic (module docstring); ``namespace`` is a child's key prefix."""

    def __init__(self, log: TopicLog, keep: int = 5, *, limits: ReadLimits | None = None,
                 key: bytes | None = None, namespace: str = "",
                 stale_after: float = STALE_TEMPORARY_SECONDS) -> None:
        super().__init__(keep, limits=limits, key=key)
        if isinstance(stale_after, bool) or not isinstance(stale_after, (int, float)) or \
                not stale_after >= 0:
            raise ValueError(f"stale_after must be a number of seconds >= 0 (inf: never), "
                             f"got {stale_after!r}")
        self.log, self.namespace, self.stale_after = log, namespace, stale_after

    def __repr__(self) -> str:
        return f"KafkaSnapshotStore({str(self.log) + ('/' + self.namespace if self.namespace else '')!r})"

    def _own(self) -> dict[str, bytes]:
        """This namespace's records (not its children's), keyed without the prefix."""
        n = len(self.namespace)
        with self.log.lock:
            return {k[n:]: v for k, v in self.log.live().items()
                    if k.startswith(self.namespace) and "/" not in k[n:]}

    def _numbers(self) -> list[int]:
        self.log.refresh()
        found = (_MANIFEST.fullmatch(name) for name in self._own())
        return sorted({int(m.group(1)) for m in found if m} - {0})

    def _name(self, number: int) -> str:
        return f"{self.namespace}snapshot-{format_id(number)}.sbs"

    def _read(self, number: int) -> bytes:
        name = self._name(number)
        with self.log.lock:
            manifest = self.log.live().get(name)
            if manifest is None:
                raise SnapshotError(f"no snapshot {format_id(number)} in {self}")
            size, chunks, digest, write = _parse_manifest(manifest, self.limits)
            parts = self.log.values([_chunk_key(name, write, i) for i in range(chunks)])
        missing = [i for i, part in enumerate(parts) if part is None]
        if missing:
            raise CorruptSnapshot(f"{format_id(number)} misses chunk(s) {missing[:5]} of {chunks}")
        data = b"".join(parts)  # type: ignore[arg-type]
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            raise CorruptSnapshot(f"{format_id(number)}: its chunks do not match the manifest "
                                  f"({len(data)} bytes for {size}, or another SHA-256)")
        return data

    def _put(self, number: int, data: bytes) -> None:
        name, step, write = self._name(number), self.log.chunk_bytes, _write_id()
        chunks = [data[i:i + step] for i in range(0, len(data), step)] or [b""]
        keys = [_chunk_key(name, write, i) for i in range(len(chunks))]
        self.log.send(list(zip(keys, chunks, strict=True)))
        self.log.refresh()
        with self.log.lock:
            taken = name in self.log.live()
        if taken:  # another writer's manifest came meanwhile: ours would replace its snapshot
            self.log.send([(key, None) for key in keys])
            raise _NumberTaken(name)
        manifest = {"format": MANIFEST_FORMAT, "size": len(data), "chunks": len(chunks),
                    "sha256": hashlib.sha256(data).hexdigest(), "write": write}
        self.log.send([(name, json.dumps(manifest).encode())])

    def _remove(self, number: int) -> None:
        name = self._name(number)
        prefix = f"snapshot-{format_id(number)}.sbs:"
        chunks = sorted(self.namespace + k for k in self._own() if k.startswith(prefix))
        self.log.send([(name, None)] + [(chunk, None) for chunk in chunks])

    def _clean_temporaries(self) -> None:
        """Tombstone the chunks no manifest names (a write that died before its manifest, or
        lost its number to another writer's) once ``stale_after`` seconds old: a younger one may
        be another writer's write under way. (Chunks without a write id, of an older version,
        go at once when their snapshot has no manifest, as they always did.)"""
        own = self._own()
        cutoff_ms = (time.time() - self.stale_after) * 1000
        writes: dict[str, str | None] = {}  # manifest -> the write it names
        orphans = []
        for name in own:
            m = _CHUNK.fullmatch(name)
            if not m:
                continue
            manifest, write = f"snapshot-{m.group(1)}.sbs", m.group(2)
            if manifest in own:
                if manifest not in writes:
                    writes[manifest] = _manifest_write(own[manifest])
                if writes[manifest] == write:
                    continue  # a chunk of the snapshot
            if write is None or int(write[:12], 16) < cutoff_ms:
                orphans.append(self.namespace + name)
        if orphans:
            logger.info("%s: deleting %d chunks of an unfinished write", self, len(orphans))
            self.log.send([(name, None) for name in sorted(orphans)])

    def _child(self, name: str) -> KafkaSnapshotStore:
        return KafkaSnapshotStore(self.log, self.keep, limits=self.limits, key=self.key,
                                  stale_after=self.stale_after,
                                  namespace=f"{self.namespace}{name}/")

    def _children(self) -> list[str]:
        self.log.refresh()
        n = len(self.namespace)
        with self.log.lock:
            heads = {k[n:].split("/", 1)[0] for k in self.log.live()
                     if k.startswith(self.namespace) and "/" in k[n:]}
        return [name for name in heads if _CHILD.fullmatch(name)]


def _write_id() -> str:
    """A new write's id: the clock in ms (12 hex digits) and 8 random hex digits."""
    return f"{time.time_ns() // 1_000_000:012x}{secrets.token_hex(4)}"


def _chunk_key(name: str, write: str | None, index: int) -> str:
    return f"{name}:{index:06d}" if write is None else f"{name}:{write}:{index:06d}"


def _manifest_write(value: bytes | int) -> str | None:
    """The write a manifest names (None: none, or unreadable)."""
    try:
        write = json.loads(value).get("write") if isinstance(value, bytes) and \
            len(value) <= _MAX_MANIFEST else None
    except (ValueError, AttributeError, RecursionError):
        return None
    return write if isinstance(write, str) else None


def _parse_manifest(value: bytes, limits: ReadLimits) -> tuple[int, int, str, str | None]:
    if len(value) > _MAX_MANIFEST:
        raise CorruptSnapshot(f"a manifest of {len(value):,} bytes (a manifest takes about 200)")
    try:
        manifest = json.loads(value)
        size, chunks, digest = int(manifest["size"]), int(manifest["chunks"]), str(manifest["sha256"])
        write = manifest.get("write")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise CorruptSnapshot(f"unreadable manifest: {exc}") from None
    if write is not None and not (isinstance(write, str) and _WRITE.fullmatch(write)):
        raise CorruptSnapshot(f"manifest names the write {write!r}, not 20 hex digits")
    if manifest.get("format") != MANIFEST_FORMAT:
        raise CorruptSnapshot(f"manifest format {manifest.get('format')!r}, expected {MANIFEST_FORMAT!r}")
    if size > limits.max_bytes:
        raise CorruptSnapshot(f"{size} bytes, over the limit of {limits.max_bytes} "
                              "(STREAMBAYES_SNAPSHOT_MAX_BYTES)")
    if not 0 < chunks <= size + 1:
        raise CorruptSnapshot(f"manifest names {chunks} chunks for {size} bytes")
    return size, chunks, digest, write
