"""Snapshot shards (DESIGN §4, scale-out): learners on disjoint partitions, merged by adding statistics.

Each learner process owns a set of partitions and writes its own snapshot directory (a shard).
:func:`merge_shards` loads the newest good snapshot of each, checks that no topic-partition is
covered twice (that would count its events twice), and merges the learners with ``merge``: for
count-based models the result equals one learner trained on all partitions, exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streambayes.errors import ModelError, SnapshotError
from streambayes.snapshot.payload import ReadLimits
from streambayes.snapshot.store import BaseSnapshotStore, Snapshot, SnapshotStore


@dataclass
class Merged:
    """A learner built from one or more shards, with what it reflects."""

    model: Any
    name: str
    positions: dict[str, dict[str, int]]
    events: int
    ids: tuple[str, ...]  # the snapshot id of each shard, in the order given
    calibration: Any = None  # the shards' OnlineCalibrator, added; None: serve uncalibrated

    @property
    def label(self) -> str:
        """The snapshot id(s) reported in posteriors: ``000042`` or ``000042+000017``."""
        return "+".join(self.ids)

    @property
    def id(self) -> str:
        """:attr:`label`, so a merge reads like a snapshot (``.id``, ``.state``, ``.events``)."""
        return self.label

    @property
    def state(self) -> dict[str, Any]:
        return self.model.to_state()


def open_stores(directories: Sequence[Path | str], settings: Any = None) -> list[BaseSnapshotStore]:
    """A store per directory or store URI (``kafka://``, ``s3://``: :mod:`streambayes.runtime.stores`),
    with the read limits and signing key of ``settings`` (if given)."""
    from streambayes.runtime.stores import location, open_store

    stores = []
    for directory in directories:
        where = location(directory)
        if isinstance(where, Path) and where.exists() and not where.is_dir():
            raise SnapshotError(f"{where} is not a snapshot directory")
        stores.append(open_store(where, settings))
    return stores


def store_options(settings: Any) -> dict[str, Any]:
    """``limits`` and ``key`` of a snapshot store from the settings (defaults when None)."""
    if settings is None:
        return {}
    key = settings.snapshot_key.get_secret_value().encode() if settings.snapshot_key else None
    return {"limits": ReadLimits(settings.snapshot_max_bytes, settings.snapshot_max_ratio), "key": key}


def partition_shards(store: BaseSnapshotStore) -> dict[str, BaseSnapshotStore]:
    """``{shard name: its store}`` (``partition-<topic>-<p>``, sorted) when ``store`` holds
    partition shards and no snapshot of its own (the state of group-managed learners,
    :mod:`~streambayes.runtime.loops.group`); ``{}`` otherwise. The names are the children's, the
    same for a directory, a Kafka state topic and an S3 prefix."""
    from streambayes.runtime.loops.group import SHARD_PREFIX

    names = sorted(name for name in store.children() if name.startswith(SHARD_PREFIX))
    if not names or store.ids():
        return {}
    return {name: store.child(name) for name in names}


def expand_shards(stores: Sequence[BaseSnapshotStore]) -> list[BaseSnapshotStore]:
    """Each store, or in its place its partition shards (:func:`partition_shards`). Called at
    every reload, so shards of partitions added later are found."""
    out: list[BaseSnapshotStore] = []
    for store in stores:
        out.extend(partition_shards(store).values() or [store])
    return out


def latest_all(stores: Sequence[BaseSnapshotStore]) -> list[Snapshot] | None:
    """The newest snapshot of every store whose state rebuilds a learner (as ``snap.learner``;
    per-key learners are built later, with their spill store); None while any store has none yet.
    Snapshots that do not rebuild are skipped (a warning)."""
    from streambayes.runtime.loops.spill import check_build

    snaps = []
    for store in stores:
        snap = store.latest(check_build)
        if snap is None:
            return None
        snaps.append(snap)
    return snaps


def merge_snapshots(snaps: Sequence[Snapshot],
                    restore: Callable[[Snapshot], Any] | None = None) -> Merged:
    """One learner from shard snapshots; refuses different models or overlapping partitions.

    ``restore`` builds each snapshot's learner (default: per-key learners read their spill files
    from the snapshot's directory, read-only)."""
    from streambayes.runtime.loops.spill import restore_model

    restore = restore or restore_model

    if not snaps:
        raise SnapshotError("no snapshots to merge")
    names = {snap.model for snap in snaps}
    if len(names) > 1:
        raise SnapshotError(f"cannot merge snapshots of different models: {', '.join(sorted(names))}")
    positions: dict[str, dict[str, int]] = {}
    owner: dict[tuple[str, str], str] = {}
    for snap in snaps:
        for topic, parts in snap.positions.items():
            for partition, offset in parts.items():
                where = (topic, partition)
                if where in owner:
                    raise SnapshotError(
                        f"shards overlap: {topic}[{partition}] is in snapshot {owner[where]} and "
                        f"{snap.id}; merging would count its events twice")
                owner[where] = snap.id
                positions.setdefault(topic, {})[partition] = offset
    model = _learner(snaps[0], restore)
    for snap in snaps[1:]:
        try:
            model.merge(_learner(snap, restore))
        except ModelError as exc:
            raise SnapshotError(f"cannot merge snapshot {snap.id}: {exc}") from None
    from streambayes.runtime.loops.calibrate import merged

    return Merged(model, snaps[0].model, positions, sum(s.events for s in snaps),
                  tuple(s.id for s in snaps), merged([s.header.get("config") for s in snaps]))


def _learner(snap: Snapshot, restore: Callable[[Snapshot], Any]) -> Any:
    """The learner :func:`latest_all` rebuilt, else ``restore`` (a per-key learner with its spill
    store) builds it now; any failure is a SnapshotError."""
    if snap.learner is not None:
        return snap.learner
    try:
        return restore(snap)
    except Exception as exc:  # any failure to rebuild: the snapshot is bad, not the process
        raise SnapshotError(f"snapshot {snap.id} does not rebuild a model: "
                            f"{type(exc).__name__}: {exc}") from exc


def newest_summary(directory: Path | str | BaseSnapshotStore) -> dict[str, Any] | None:
    """``{"id", "events", "positions"}`` of the state a directory serves, from headers only: its
    newest snapshot, or its partition shards' newest ones summed (None: nothing yet)."""
    store = directory if isinstance(directory, BaseSnapshotStore) else SnapshotStore(directory)
    headers = [s.latest_header() for s in expand_shards([store])]
    if not headers or any(h is None for h in headers):
        return None
    positions: dict[str, dict[str, int]] = {}
    for h in headers:
        for topic, parts in h["positions"].items():
            positions.setdefault(topic, {}).update({str(p): int(o) for p, o in parts.items()})
    return {"id": "+".join(h["id"] for h in headers), "positions": positions,
            "events": sum(int(h["events"]) for h in headers)}


def newest_state(directory: Path | str | BaseSnapshotStore) -> Merged | None:
    """The learner a directory serves: its newest good snapshot, or the merge of its partition
    shards' newest good ones (None: nothing yet)."""
    store = directory if isinstance(directory, BaseSnapshotStore) else SnapshotStore(directory)
    snaps = latest_all(expand_shards([store]))
    return None if snaps is None else merge_snapshots(snaps)
