"""Per-key learners spilled to disk, versioned so that snapshots stay exactly-once.

``learn --per-key`` and ``predict --per-key`` keep at most ``--max-resident`` learners (and
``--max-resident-mb`` of them) in memory; the others live in ``DIR/spill/`` next to the
snapshots of ``DIR``, one file per key and generation, written with the snapshot codec (a
snapshot file of its own: JSON header, npz arrays, checksum; never pickle).

The design, step by step:

1. A spill file is ``spill/<h>-<g>.sbs``: ``h`` the first 32 hex digits of the sha256 of the key
   (stable across processes and machines), ``g`` a generation number, 10 digits. Generations
   come from one counter per directory, started past the largest one on disk, so a file is
   never overwritten once flushed (step 3): a spill of a key writes a *new* file (``O_EXCL``),
   except that a file written since the last flush is rewritten in place (no snapshot can name
   it yet, and this saves a create and an unlink per spill). The file's header names its key
   (a hash collision is detected, not served).
2. The store keeps the *current manifest* in memory: key -> generation of its newest copy.
3. A checkpoint (``PerKeyModel.to_state``) spills every live learner changed since its last
   spill, then :meth:`DiskSpillStore.flush` fsyncs the files written since the last checkpoint
   (one ``os.sync()`` when there are more than :data:`SYNC_ALL_AT`) and the directory. Only
   then is the snapshot written (atomic, by the snapshot store); it holds the global learner,
   each key's label count and the manifest, not the learners.
4. After the snapshot is written, :class:`SpillCollector` deletes the spill files that neither
   the current manifest nor any *kept* snapshot's manifest names (older generations, files of a
   crashed run). A file a kept snapshot names is never deleted.
5. A crash at any point (during a spill, between spills, between the flush and the snapshot)
   leaves the last snapshot and every file its manifest names intact: the files written since
   carry newer generations and are ignored, then collected.
6. Restoring loads the snapshot, gives its manifest to the store (:meth:`load_manifest`) and
   nothing else: a learner is read back from its file on first use.
7. ``predict`` opens the store read-only (``writable=False``): it reads the files its snapshot
   names and never writes or deletes; a learner it must spill is dropped when unchanged (it is
   on disk), else kept compactly in memory. A predictor still serving a snapshot older than the
   ``--keep`` kept ones may find a file collected: that event is a dead letter until it reloads.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from streambayes.errors import ModelError, SnapshotError
from streambayes.models.perkey_spill import MemorySpillStore
from streambayes.snapshot.fileformat import pack, unpack
from streambayes.snapshot.store import BaseSnapshotStore, Snapshot, SnapshotInfo, fsync_directory

logger = logging.getLogger(__name__)
SPILL_DIR = "spill"
SYNC_ALL_AT = 256  # files to make durable at a checkpoint past which one os.sync() does it
_FILE = re.compile(r"([0-9a-f]{32})-(\d{10})\.sbs")


def key_digest(key: str) -> str:
    """The stable file-name part of ``key``: 32 hex digits of its sha256."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


class DiskSpillStore:
    """Per-key learner states as versioned snapshot files in ``directory`` (see the module doc)."""

    def __init__(self, directory: str | os.PathLike[str], *, writable: bool = True,
                 key: bytes | None = None, limits: Any = None) -> None:
        self.directory = Path(directory)
        self.writable = writable
        self.key, self.limits = key, limits  # as the snapshot store's: signed, size-checked files
        self.durable = writable
        self._current: dict[str, int] = {}
        self._overlay = MemorySpillStore()  # read-only mode: changed learners, compactly
        self._pending: dict[str, tuple[Path, int]] = {}  # key -> file, generation since the flush
        self._next = max((gen for _, gen in self._files()), default=0) + 1 if writable else 0

    def __repr__(self) -> str:
        return f"DiskSpillStore({str(self.directory)!r}, writable={self.writable})"

    def path(self, key: str, generation: int) -> Path:
        return self.directory / f"{key_digest(key)}-{generation:010d}.sbs"

    def put(self, key: str, state: Mapping) -> None:
        if not self.writable:
            self._overlay.put(key, state)
            self._current.pop(key, None)
            return
        path, generation = self._pending.get(key) or (None, self._next)
        if path is None:
            path, self._next = self.path(key, generation), self._next + 1
        data, _ = pack(state, snapshot_id=f"{generation:010d}", model="perkey-user",
                       config={"key": key}, positions={}, events=0, created_at="", compress=False,
                       key=self.key)
        fresh = os.O_EXCL if key not in self._pending else os.O_TRUNC
        try:
            if not self._pending:
                self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | fresh, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise SnapshotError(f"cannot spill the learner of key {key!r} to {path}: {exc}") from exc
        self._pending[key] = (path, generation)
        self._current[key] = generation

    def get(self, key: str) -> Mapping | None:
        changed = self._overlay.get(key)
        if changed is not None:
            return changed
        generation = self._current.get(key)
        if generation is None:
            return None
        path = self.path(key, generation)
        try:
            header, state = unpack(path.read_bytes(), limits=self.limits, key=self.key)
        except (OSError, SnapshotError) as exc:
            raise ModelError(f"cannot read the spilled learner of key {key!r} ({path}): {exc}"
                             ) from exc
        if header["config"].get("key") != key:
            raise ModelError(f"{path} holds key {header['config'].get('key')!r}, not {key!r}")
        return state

    def delete(self, key: str) -> None:
        """Forget ``key``'s copy (its files stay until :class:`SpillCollector`)."""
        self._current.pop(key, None)
        self._overlay.delete(key)

    def keys(self) -> list[str]:
        return list(dict.fromkeys([*self._current, *self._overlay.keys()]))

    def memory_bytes(self) -> int:
        return self._overlay.memory_bytes()

    def flush(self) -> None:
        """Make every spill so far durable: fsync the new files (past :data:`SYNC_ALL_AT` of them,
        one ``os.sync()`` instead: thousands of fsyncs cost minutes), then the directory."""
        if len(self._pending) > SYNC_ALL_AT and hasattr(os, "sync"):
            os.sync()
        else:
            for path, _ in self._pending.values():
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        if self._pending:
            fsync_directory(self.directory)
        self._pending.clear()

    def manifest(self) -> dict[str, int]:
        """key -> generation of its current file."""
        return dict(self._current)

    def load_manifest(self, manifest: Mapping[str, int]) -> None:
        self._current = {str(k): int(g) for k, g in manifest.items()}
        self._overlay = MemorySpillStore()

    def files(self) -> list[tuple[str, int]]:
        """(key digest, generation) of every spill file on disk."""
        return self._files()

    def _files(self) -> list[tuple[str, int]]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return [(m.group(1), int(m.group(2))) for m in map(_FILE.fullmatch, names) if m]


def manifest_names(state: Any) -> set[str] | None:
    """The spill file names a per-key snapshot state refers to; None for any other state."""
    if not isinstance(state, Mapping) or state.get("model") != "perkey" or "spill" not in state:
        return None
    return {f"{key_digest(str(k))}-{int(g):010d}.sbs"
            for k, g in zip(state["keys"], state["spill"].tolist(), strict=True)}


class SpillCollector:
    """Deletes the spill files of ``directory`` that no kept snapshot of ``store`` names (step 4).

    Call :meth:`collect` right after a snapshot write: the current manifest then equals the
    new snapshot's, so every file written since the previous checkpoint and still current is
    named by a kept snapshot."""

    def __init__(self, directory: Path, store: BaseSnapshotStore) -> None:
        self.directory = Path(directory)
        self.store = store
        self._names: dict[str, set[str]] = {}  # snapshot id -> the spill files it names

    def remember(self, snapshot_id: str, state: Any) -> None:
        self._names[snapshot_id] = manifest_names(state) or set()

    def collect(self) -> int:
        """Delete unreferenced spill files; returns how many."""
        keep: set[str] = set()
        ids = self.store.ids()
        for snapshot_id in ids:
            if snapshot_id not in self._names:
                try:
                    self.remember(snapshot_id, self.store.load(snapshot_id).state)
                except SnapshotError:
                    self._names[snapshot_id] = set()  # unreadable: it can never be restored
            keep |= self._names[snapshot_id]
        self._names = {i: names for i, names in self._names.items() if i in ids}
        removed = 0
        for digest, generation in DiskSpillStore(self.directory, writable=False).files():
            name = f"{digest}-{generation:010d}.sbs"
            if name not in keep:
                with contextlib.suppress(FileNotFoundError):
                    (self.directory / name).unlink()
                    removed += 1
        return removed


def spill_hooks(store: BaseSnapshotStore, spill_dir: Path, bounds: Mapping[str, int | None]
                ) -> tuple[Callable[[Snapshot], Any], Callable[[SnapshotInfo, Mapping], None]]:
    """The learn loop's ``restore_model`` and ``on_checkpoint`` for per-key spill files."""
    collector = SpillCollector(spill_dir, store)

    def restore(snapshot: Snapshot) -> Any:
        return restore_model(snapshot, bounds, spill_dir=spill_dir, writable=True,
                             key=getattr(store, "key", None), limits=getattr(store, "limits", None))

    def on_checkpoint(info: SnapshotInfo, state: Mapping) -> None:
        if manifest_names(state) is None:
            return
        collector.remember(info.id, state)
        removed = collector.collect()
        if removed:
            logger.info("removed %d spill files no kept snapshot names", removed)

    return restore, on_checkpoint


def spill_directory(snapshot: Snapshot | None, snapshots_dir: Path | None = None) -> Path:
    """``DIR/spill`` of the snapshot directory (given, or the snapshot file's)."""
    if snapshots_dir is None:
        if snapshot is None or snapshot.info.path is None:
            raise SnapshotError("a per-key snapshot with spilled learners needs its directory")
        snapshots_dir = snapshot.info.path.parent
    return Path(snapshots_dir) / SPILL_DIR


def check_build(state: Any) -> Any:
    """What a snapshot store rebuilds to check a snapshot: the learner, except for a per-key
    state, which needs its spill store and bounds (None here: :func:`restore_model` builds it)."""
    from streambayes.models import model_from_state
    from streambayes.models.perkey import PerKeyModel

    if isinstance(state, Mapping) and state.get("model") == PerKeyModel.name:
        if not isinstance(state.get("params"), Mapping) or "global" not in state:
            raise SnapshotError("per-key state without params or global model")
        model_from_state(state["global"])  # the global learner must rebuild (else: fall back)
        return None
    return model_from_state(state)


def restore_model(snapshot: Snapshot, bounds: Mapping[str, int | None] | None = None, *,
                  spill_dir: Path | None = None, writable: bool = False, key: bytes | None = None,
                  limits: Any = None) -> Any:
    """The learner of ``snapshot``; a per-key one gets its spill store and ``bounds``."""
    from streambayes.models import model_from_state
    from streambayes.models.perkey import PerKeyModel

    state = snapshot.state
    if not isinstance(state, Mapping) or state.get("model") != PerKeyModel.name:
        return model_from_state(state)
    directory = spill_dir or spill_directory(snapshot)
    spill = DiskSpillStore(directory, writable=writable, key=key, limits=limits)
    model = PerKeyModel.from_state(state, spill=spill)
    if bounds:
        given = {name: value for name, value in bounds.items() if value is not None}
        current = {name: getattr(model, name) for name in ("max_resident", "max_resident_bytes",
                                                           "max_keys")}
        model.set_bounds(**{**current, **given})
    return model


def new_per_key(base: str, bounds: Mapping[str, int | None], spill_dir: Path,
                base_params: Mapping[str, int] | None = None, key: bytes | None = None,
                limits: Any = None) -> Any:
    """A fresh per-key learner over ``base`` with a writable disk spill store in ``spill_dir``
    (its files signed with ``key`` and read within ``limits``, as the snapshots are)."""
    from streambayes.models.perkey import PerKeyModel

    spill = DiskSpillStore(spill_dir, key=key, limits=limits)
    return PerKeyModel(base=base, base_params=base_params, spill=spill, **bounds)
