"""The model a predictor serves: the newest snapshot of each store (a group learner's store:
of each partition shard), merged, and reloaded when one changes."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from streambayes.errors import SnapshotError, UsageError
from streambayes.runtime.loops.learn import is_per_key
from streambayes.runtime.loops.shards import Merged, expand_shards, latest_all, merge_snapshots
from streambayes.snapshot.store import BaseSnapshotStore

logger = logging.getLogger("streambayes.runtime.loops.predict")


class ModelWatcher:
    """The served learner: the newest snapshot of each store, merged; reloaded when one changes."""

    def __init__(self, stores: Sequence[BaseSnapshotStore],
                 restore: Callable[[Any], Any] | None = None, per_key: bool = False) -> None:
        self.stores = list(stores)
        self.restore = restore  # snapshot -> learner (None: merge_snapshots' default)
        self.per_key = per_key  # refuse a model that is not per-key
        self.shards = self.stores  # the stores, each group learner's replaced by its shards
        self.current: Merged | None = None
        self._seen: tuple[str | None, ...] = ()

    def _newest_ids(self) -> tuple[str | None, ...]:
        self.shards = expand_shards(self.stores)  # partition shards: found again at each check
        return tuple((store.ids() or [None])[-1] for store in self.shards)

    def check(self) -> bool:
        """Load the newest snapshots if any store has a new one; True when the model changed.
        A remote store (Kafka topic, S3) that does not answer keeps the served model."""
        try:
            newest = self._newest_ids()
        except SnapshotError as exc:
            if self.current is None:
                raise
            logger.warning("cannot look for new snapshots (%s); still serving %s", exc,
                           self.current.label)
            return False
        if newest == self._seen:
            return False
        try:
            snaps = latest_all(self.shards)
            if snaps is None:
                return False  # a shard has no snapshot yet: keep what we serve
            self._seen = newest
            ids = tuple(s.id for s in snaps)
            if self.current is not None and ids == self.current.ids:
                return False  # the newer file was corrupt; its predecessor is already served
            merged = merge_snapshots(snaps, self.restore)
            if self.per_key and not is_per_key(merged.model):
                raise UsageError(f"--per-key: snapshot {merged.label} holds model {merged.name!r}, "
                                 "not a per-key model (learn it with 'learn --per-key')")
        except SnapshotError as exc:
            if self.current is None:
                raise
            self._seen = newest
            logger.error("cannot load the new snapshots (%s); still serving %s", exc,
                         self.current.label)
            return False
        self.current = merged
        logger.info("serving snapshot %s (%s, %d events)", self.current.label, self.current.name,
                    self.current.events)
        return True
