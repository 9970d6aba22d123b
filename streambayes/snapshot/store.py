"""Snapshot stores: numbered snapshots in a directory, or in memory, the last K kept.

Ids are zero-padded sequence numbers (``"000042"``); the next id is the largest present + 1, corrupt
files included, so an id is never reused. A write is atomic and durable (temporary name, fsync,
rename, fsync of the directory) and then prunes all but the newest ``keep`` snapshots, good or
bad. :meth:`latest` returns the newest snapshot that verifies: a corrupt or truncated one is
skipped, with a warning, for the one before it. When snapshots exist but none verifies,
:meth:`latest` raises SnapshotError instead of returning None, so a damaged store never looks like
a fresh start. Given ``build`` (e.g. ``model_from_state``), :meth:`latest` returns the newest
snapshot whose state also rebuilds into a learner: any exception while rebuilding (``KeyError``,
``ValueError``, ``MemoryError``, a ModelError...) marks that snapshot corrupt, like a bad checksum.

Reading is bounded by :class:`~.payload.ReadLimits` (a file or arrays total over ``max_bytes`` is
refused before it is read). With a ``key``, snapshots are written signed and unsigned or wrongly
signed ones are refused as corrupt.

One writer per store; any number of readers. Temporary files left by a crash
(``.snapshot-*.tmp``) are invisible to readers and removed by a later write once they are
``stale_after`` seconds old (default 600): a younger one may be another writer's file in the middle
of its write, as when a learner that has just lost a state shard in a rebalance checkpoints it once
more while its new owner writes there. (Two such writers may also take the same next number:
each publishes with a hard link, which never replaces a file, so the later one takes the number
after: both are kept. On a file system without hard links the later rename wins, each snapshot
whole.)

>>> import tempfile, numpy as np
>>> with tempfile.TemporaryDirectory() as directory:
...     store = SnapshotStore(directory, keep=2)
...     for n in (1, 2, 3):
...         info = store.write({"counts": np.arange(n)}, model="mnb", config={"alpha": 1.0},
...                            positions={"events": {"0": n}}, events=n)
...     snap = store.latest()
...     ([i.id for i in store.list()], snap.id, snap.positions, snap.state["counts"].tolist())
(['000002', '000003'], '000003', {'events': {'0': 3}}, [0, 1, 2])
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from streambayes.errors import CorruptSnapshot, SnapshotError
from streambayes.snapshot.fileformat import pack, read_header, unpack
from streambayes.snapshot.payload import ReadLimits

logger = logging.getLogger(__name__)
_T = TypeVar("_T")
_NAME = re.compile(r"snapshot-(\d{6,})\.sbs")
_TEMP = re.compile(r"\.snapshot-\d{6,}\.sbs\.[^/]*\.tmp")
# A temporary this old is a crash's leftover, never a live write's (its mtime moves with each write).
STALE_TEMPORARY_SECONDS = 600.0
_NUMBER_ATTEMPTS = 100  # next numbers tried when other writers keep taking them (then an error)
_CHILD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,199}")


class _NumberTaken(Exception):
    """Another writer published this snapshot number first: take the next one."""


@dataclass(frozen=True)
class SnapshotInfo:
    """One stored snapshot as listed; ``ok`` means it verifies (checksum and array manifest)."""

    id: str
    path: Path | None
    ok: bool
    error: str | None = None
    created_at: str | None = None
    events: int | None = None
    model: str | None = None
    size: int = 0


@dataclass(frozen=True)
class Snapshot:
    """A verified, decoded snapshot: its header and the learner state, self-contained."""

    info: SnapshotInfo
    header: Mapping[str, Any]
    state: Any
    learner: Any = None  # what ``build`` made of ``state``, when a build was asked for

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def model(self) -> str:
        return self.header["model"]

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.header["config"])

    @property
    def positions(self) -> dict[str, dict[str, int]]:
        """topic -> {partition: NEXT offset to read}; a fresh copy."""
        return {topic: dict(parts) for topic, parts in self.header["positions"].items()}

    @property
    def events(self) -> int:
        return self.header["events"]

    def summary(self) -> dict[str, Any]:
        """The header without the state skeleton: what ``snapshot show`` prints."""
        return summarize(self.header)


def summarize(header: Mapping[str, Any]) -> dict[str, Any]:
    """A header without its ``skeleton`` and per-array ``items`` (they only describe the layout)."""
    out = {key: value for key, value in header.items() if key != "skeleton"}
    if isinstance(out.get("arrays"), Mapping):
        out["arrays"] = {key: value for key, value in out["arrays"].items() if key != "items"}
    return out


def format_id(number: int) -> str:
    """``42 -> "000042"``."""
    return f"{number:06d}"


def parse_id(snapshot_id: str | int) -> int:
    """``"000042"`` or ``42`` -> 42; anything else raises SnapshotError."""
    if isinstance(snapshot_id, int) and not isinstance(snapshot_id, bool) and snapshot_id > 0:
        return snapshot_id
    if isinstance(snapshot_id, str) and snapshot_id.isascii() and snapshot_id.isdigit():
        if int(snapshot_id) > 0:
            return int(snapshot_id)
    raise SnapshotError(f"snapshot id must be a positive number like '000042', got {snapshot_id!r}")


class BaseSnapshotStore(ABC):
    """Everything but the storage primitives, shared by the file and memory stores."""

    def __init__(self, keep: int = 5, *, limits: ReadLimits | None = None, key: bytes | None = None) -> None:
        if type(keep) is not int or keep < 1:
            raise ValueError(f"keep must be an int >= 1, got {keep!r}")
        self.keep = keep
        self.limits = limits or ReadLimits()
        self.key = key

    def write(
        self,
        state: Mapping[str, Any],
        *,
        model: str,
        positions: Mapping[str, Mapping[str | int, int]],
        events: int,
        config: Mapping[str, Any] | None = None,
    ) -> SnapshotInfo:
        """Store ``state`` durably as the next snapshot, then prune to the newest ``keep``."""
        if not isinstance(state, Mapping) or not state:
            raise SnapshotError(f"refusing to write an empty snapshot: state is {state!r}")
        for _ in range(_NUMBER_ATTEMPTS):  # another writer may take a number first (_NumberTaken)
            numbers = self._numbers()
            number = (numbers[-1] if numbers else 0) + 1
            snapshot_id = format_id(number)
            data, header = pack(
                state, snapshot_id=snapshot_id, model=model, config=config or {},
                positions=positions, events=events, created_at=_utc_now(), key=self.key,
            )  # fmt: skip
            self._clean_temporaries()
            try:
                self._put(number, data)
                break
            except _NumberTaken:
                continue
        else:
            raise SnapshotError(f"cannot write a snapshot to {self}: other writers took the next "
                                f"number {_NUMBER_ATTEMPTS} times")
        for old in self._numbers()[: -self.keep]:
            if old != number:
                self._remove(old)
        return _info(snapshot_id, self._path(number), header, len(data))

    def ids(self) -> list[str]:
        """Ids present, oldest first, without reading them (cheap; for polling)."""
        return [format_id(number) for number in self._numbers()]

    def list(self, build: Callable[[Any], Any] | None = None) -> list[SnapshotInfo]:
        """All snapshots, oldest first, verified; corrupt ones have ``ok=False`` and ``error``.

        With ``build``, each is also decoded and rebuilt (a state that does not rebuild is corrupt).
        """
        infos = []
        for number in self._numbers():
            snapshot_id, path = format_id(number), self._path(number)
            try:
                if build is not None:
                    infos.append(self.load(number, build).info)
                    continue
                data = self._read(number)
                infos.append(_info(snapshot_id, path, self._checked_header(number, data), len(data)))
            except SnapshotError as exc:
                infos.append(SnapshotInfo(snapshot_id, path, ok=False, error=str(exc)))
        return infos

    def load(self, snapshot_id: str | int, build: Callable[[Any], Any] | None = None) -> Snapshot:
        """Verify, then decode one snapshot (and rebuild its learner with ``build``, if given).

        Raises SnapshotError (CorruptSnapshot if damaged, or if ``build`` fails in any way).
        """
        number = parse_id(snapshot_id)
        data = self._read(number)
        header, state = unpack(data, limits=self.limits, key=self.key)
        self._checked_header(number, data, header)
        info = _info(format_id(number), self._path(number), header, len(data))
        return Snapshot(info, header, state, _rebuild(build, state) if build is not None else None)

    def header(self, snapshot_id: str | int) -> dict[str, Any]:
        """The verified header of one snapshot, without decoding its arrays."""
        number = parse_id(snapshot_id)
        return self._checked_header(number, self._read(number))

    def latest(self, build: Callable[[Any], Any] | None = None) -> Snapshot | None:
        """The newest snapshot that verifies (and whose state ``build`` rebuilds, as its
        ``learner``); None when the store is empty."""
        return self._newest_good(lambda number: self.load(number, build))

    def latest_header(self, build: Callable[[Any], Any] | None = None) -> dict[str, Any] | None:
        """The newest verifying snapshot's header; None when empty. Without ``build`` the arrays
        are checked but not decoded; with it, the header of :meth:`latest` ``(build)``."""
        if build is not None:
            snap = self.latest(build)
            return None if snap is None else dict(snap.header)
        return self._newest_good(self.header)

    def _newest_good(self, read: Callable[[int], _T]) -> _T | None:
        numbers = self._numbers()
        problems = []
        for number in reversed(numbers):
            try:
                return read(number)
            except SnapshotError as exc:
                logger.warning("skipping snapshot %s in %s: %s", format_id(number), self, exc)
                problems.append(f"{format_id(number)}: {exc}")
        if problems:
            raise SnapshotError(f"no good snapshot in {self}: " + "; ".join(problems))
        return None

    def _checked_header(self, number: int, data: bytes, header: dict | None = None) -> dict:
        header = read_header(data, limits=self.limits, key=self.key) if header is None else header
        if header["id"] != format_id(number):
            raise CorruptSnapshot(f"stored as {format_id(number)} but its header says {header['id']!r}")
        return header

    def child(self, name: str) -> BaseSnapshotStore:
        """A store of the same kind and settings for one namespace inside this one (a state
        shard, for example ``partition-events-3``); :meth:`children` lists them."""
        if not _CHILD.fullmatch(name):
            raise ValueError(f"a child store name is letters, digits, '.', '_' and '-', got {name!r}")
        return self._child(name)

    def children(self) -> list[str]:
        """Names of the child stores present, sorted."""
        return sorted(self._children())

    @abstractmethod
    def _child(self, name: str) -> BaseSnapshotStore:
        """A new store object for the namespace ``name`` (created lazily on first write)."""

    @abstractmethod
    def _children(self) -> list[str]:
        """Names of the child namespaces that hold or held snapshots."""

    def _clean_temporaries(self) -> None:  # noqa: B027 (optional hook, not abstract)
        """Remove what an interrupted write left behind (nothing, for most backends)."""

    @abstractmethod
    def _numbers(self) -> list[int]:
        """Snapshot numbers present, ascending."""

    @abstractmethod
    def _read(self, number: int) -> bytes:
        """The bytes of one snapshot; SnapshotError when missing or unreadable."""

    @abstractmethod
    def _put(self, number: int, data: bytes) -> None:
        """Store atomically and durably: readers see all of it or nothing."""

    @abstractmethod
    def _remove(self, number: int) -> None:
        """Delete one snapshot; missing is fine."""

    def _path(self, number: int) -> Path | None:
        return None


class SnapshotStore(BaseSnapshotStore):
    """Snapshots as files ``DIR/snapshot-000042.sbs`` (DIR is created on first write)."""

    def __init__(self, directory: str | os.PathLike[str], keep: int = 5, *,
                 limits: ReadLimits | None = None, key: bytes | None = None,
                 stale_after: float = STALE_TEMPORARY_SECONDS):
        super().__init__(keep, limits=limits, key=key)
        if isinstance(stale_after, bool) or not isinstance(stale_after, (int, float)) or \
                not stale_after >= 0:
            raise ValueError(f"stale_after must be a number of seconds >= 0 (inf: never), "
                             f"got {stale_after!r}")
        self.directory = Path(directory)
        self.stale_after = stale_after

    def __repr__(self) -> str:
        return f"SnapshotStore({str(self.directory)!r}, keep={self.keep})"

    def _path(self, number: int) -> Path:
        return self.directory / f"snapshot-{format_id(number)}.sbs"

    def _numbers(self) -> list[int]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        found = (_NAME.fullmatch(name) for name in names)
        numbers = {int(m.group(1)) for m in found if m and self._path(int(m.group(1))).name == m.group(0)}
        return sorted(numbers - {0})

    def _read(self, number: int) -> bytes:
        path = self._path(number)
        try:
            _check_size(path, self.limits)
            return path.read_bytes()
        except FileNotFoundError:
            raise SnapshotError(f"no snapshot {format_id(number)} in {self.directory}") from None
        except OSError as exc:
            raise SnapshotError(f"cannot read {path}: {exc}") from exc

    def _put(self, number: int, data: bytes) -> None:
        final = self._path(number)
        temp = self.directory / f".{final.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            _publish(temp, final)
        except _NumberTaken:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            if isinstance(exc, OSError):
                raise SnapshotError(f"cannot write snapshot {final}: {exc}") from exc
            raise
        fsync_directory(self.directory)

    def _remove(self, number: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(number).unlink()

    def _child(self, name: str) -> SnapshotStore:
        return SnapshotStore(self.directory / name, self.keep, limits=self.limits, key=self.key,
                             stale_after=self.stale_after)

    def _children(self) -> list[str]:
        try:
            return [e.name for e in os.scandir(self.directory) if e.is_dir() and _CHILD.fullmatch(e.name)]
        except FileNotFoundError:
            return []

    def _clean_temporaries(self) -> None:
        cutoff = time.time() - self.stale_after
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(self.directory):
                if _TEMP.fullmatch(name):
                    path = self.directory / name
                    with contextlib.suppress(FileNotFoundError):
                        if path.stat().st_mtime <= cutoff:
                            path.unlink()


def _publish(temp: Path, final: Path) -> None:
    """``temp`` becomes ``final`` atomically, unless ``final`` exists (another writer's snapshot of
    that number: :class:`_NumberTaken`): a hard link, then the temporary name removed. Where the
    link fails otherwise (a file system without hard links), a rename, which replaces (and raises
    what is really wrong, a full disk say)."""
    try:
        os.link(temp, final)
    except FileExistsError:
        try:  # ours after all (NFS: a link whose reply was lost, sent again)?
            ours = os.path.samefile(temp, final)
        except OSError:
            ours = False
        if not ours:
            raise _NumberTaken(final.name) from None
    except OSError:
        os.replace(temp, final)
        return
    with contextlib.suppress(OSError):  # published: a name left over is removed once stale
        os.unlink(temp)


class MemorySnapshotStore(BaseSnapshotStore):
    """Snapshots as bytes in a dict: a first-class backend for tests without a disk.

    ``blobs`` maps id -> the exact bytes a file would hold, so tests can damage one.
    """

    def __init__(self, keep: int = 5, *, limits: ReadLimits | None = None, key: bytes | None = None):
        super().__init__(keep, limits=limits, key=key)
        self.blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._kids: dict[str, MemorySnapshotStore] = {}

    def _child(self, name: str) -> MemorySnapshotStore:
        with self._lock:
            if name not in self._kids:
                self._kids[name] = MemorySnapshotStore(self.keep, limits=self.limits, key=self.key)
            return self._kids[name]

    def _children(self) -> list[str]:
        with self._lock:
            return [name for name, kid in self._kids.items() if kid.blobs]

    def __repr__(self) -> str:
        return f"MemorySnapshotStore(keep={self.keep})"

    def _numbers(self) -> list[int]:
        with self._lock:
            return sorted(int(key) for key in self.blobs)

    def _read(self, number: int) -> bytes:
        with self._lock:
            data = self.blobs.get(format_id(number))
        if data is None:
            raise SnapshotError(f"no snapshot {format_id(number)} in {self}")
        return data

    def _put(self, number: int, data: bytes) -> None:
        with self._lock:
            self.blobs[format_id(number)] = bytes(data)

    def _remove(self, number: int) -> None:
        with self._lock:
            self.blobs.pop(format_id(number), None)


def load_snapshot_file(
    path: str | os.PathLike[str], *, limits: ReadLimits | None = None, key: bytes | None = None
) -> Snapshot:
    """Verify and decode one snapshot file wherever it lies (its name is not checked)."""
    limits = limits or ReadLimits()
    data = _read_path(Path(path), limits)
    header, state = unpack(data, limits=limits, key=key)
    return Snapshot(_info(header["id"], Path(path), header, len(data)), header, state)


def read_snapshot_header(
    path: str | os.PathLike[str], *, limits: ReadLimits | None = None, key: bytes | None = None
) -> dict[str, Any]:
    """The verified header of one snapshot file, without decoding its arrays."""
    limits = limits or ReadLimits()
    return read_header(_read_path(Path(path), limits), limits=limits, key=key)


def _read_path(path: Path, limits: ReadLimits) -> bytes:
    try:
        _check_size(path, limits)
        return path.read_bytes()
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot file {path}: {exc}") from exc


def _check_size(path: Path, limits: ReadLimits) -> None:
    """Refuse a file over ``max_bytes`` before reading it (OSError if it cannot be stat'ed)."""
    size = path.stat().st_size
    if size > limits.max_bytes:
        raise CorruptSnapshot(f"{path.name} is {size} bytes, over the limit of {limits.max_bytes} "
                              "(STREAMBAYES_SNAPSHOT_MAX_BYTES)")


def _rebuild(build: Callable[[Any], Any], state: Any) -> Any:
    """``build(state)``; any failure (a bad state is still a bad snapshot) is a CorruptSnapshot."""
    try:
        return build(state)
    except Exception as exc:  # KeyError, ValueError, TypeError, MemoryError, ModelError...
        raise CorruptSnapshot(f"its state does not rebuild a model: {type(exc).__name__}: {exc}") from exc


def _info(snapshot_id: str, path: Path | None, header: Mapping[str, Any], size: int) -> SnapshotInfo:
    return SnapshotInfo(
        snapshot_id, path, ok=True, created_at=header["created_at"], events=header["events"],
        model=header["model"], size=size,
    )  # fmt: skip


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fsync_directory(directory: Path) -> None:
    """Make the rename itself durable; not possible on every platform, so best effort."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
