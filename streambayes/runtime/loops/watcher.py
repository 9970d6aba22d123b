"""The model a predictor serves: the newest snapshot of each store (a group learner's store:
of each partition shard), merged, and reloaded when one changes.

:meth:`ModelWatcher.check` loads and swaps at once; a serving loop uses a :class:`Reloader`
instead, which loads (reads, decodes, merges, and warms the model with one throwaway prediction)
on a thread of its own while the loop serves with the model it has, and hands the new model over
to be swapped in between two micro-batches: a hot reload no longer holds a batch behind the load
(35-60 ms for a model of the SMS collection here, and the first prediction of a new AODE 16 ms).
"""

from __future__ import annotations

import logging
import threading
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
        merged = self.prepare()
        return merged is not None and self.adopt(merged)

    def prepare(self) -> Merged | None:
        """The newest snapshots loaded, merged and warmed, when any store has a new one (None: no
        change, or the new ones cannot be loaded: logged); :attr:`current` is left as it is
        (:meth:`adopt` swaps). One call at a time (the :class:`Reloader`'s thread, or the caller)."""
        try:
            newest = self._newest_ids()
        except SnapshotError as exc:
            if self.current is None:
                raise
            logger.warning("cannot look for new snapshots (%s); still serving %s", exc,
                           self.current.label)
            return None
        if newest == self._seen:
            return None
        try:
            snaps = latest_all(self.shards)
            if snaps is None:
                return None  # a shard has no snapshot yet: keep what we serve
            self._seen = newest
            ids = tuple(s.id for s in snaps)
            if self.current is not None and ids == self.current.ids:
                return None  # the newer file was corrupt; its predecessor is already served
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
            return None
        warm(merged.model)
        return merged

    def adopt(self, merged: Merged) -> bool:
        """Serve ``merged`` (from :meth:`prepare`) from now on."""
        self.current = merged
        logger.info("serving snapshot %s (%s, %d events)", self.current.label, self.current.name,
                    self.current.events)
        return True


def warm(model: Any) -> None:
    """One throwaway prediction of an event with no values, so that what a model makes at its
    first prediction (the semi-naive learners' derived estimates, a Bayes net's engine) is made
    now, where the model is loaded, not in the first batch it serves. Best effort: a model that
    cannot predict such an event is served as it is (its first batch makes them)."""
    try:
        model.predict_log_proba_many(model.featurize([{}]))
    except Exception as exc:  # noqa: BLE001 (only a head start: the first batch does it anyway)
        logger.debug("no warm-up prediction for %s: %s: %s", type(model).__name__,
                     type(exc).__name__, exc)


class Reloader:
    """Loads newer snapshots for a serving loop on a thread of its own (:meth:`ModelWatcher.prepare`)
    and hands the result over (:meth:`take`), so that the loop swaps models between two batches
    and never waits for a load. One load at a time; an error of the load (a ``--per-key`` model
    that is not one) is raised by :meth:`take`, in the loop."""

    def __init__(self, watcher: ModelWatcher) -> None:
        self.watcher = watcher
        self._thread: threading.Thread | None = None
        self._result: Merged | None = None
        self._error: BaseException | None = None

    def start(self) -> None:
        """Look for newer snapshots (and load them) on the loader thread, unless a load runs."""
        if self._thread is not None:
            return
        self._result, self._error = None, None
        self._thread = threading.Thread(target=self._load, name="snapshot-reloader", daemon=True)
        self._thread.start()

    def _load(self) -> None:
        try:
            self._result = self.watcher.prepare()
        except BaseException as exc:  # noqa: BLE001 (raised in the loop by take)
            self._error = exc

    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def take(self) -> Merged | None:
        """The model the finished load made (None: none, or no load finished yet)."""
        if self._thread is None or self._thread.is_alive():
            return None
        self._thread.join()
        self._thread = None
        result, error, self._result, self._error = self._result, self._error, None, None
        if error is not None:
            raise error
        return result

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for a load in flight (at the end of a run)."""
        if self._thread is not None:
            self._thread.join(timeout)
