"""Per-key models: one learner per event key (a reader's interest profile), backed off to a
global learner trained on every key's events.

NewsWeeder (Lang 1995) keeps one naive Bayes interest profile per reader. A new reader has
no labels, so :class:`PerKeyModel` also keeps a *global* learner that every event updates,
and predicts with the reader's own learner backed off to the global one:

1. ``λ_u = n_u / (n_u + backoff)``, ``n_u`` the number of events learned for key ``u``
   (``backoff`` is the strength of the global prior, in events; default 20).
2. The user's posterior over the global classes: on the classes ``S_u`` that ``u`` has
   labelled, ``p'_u(c | x) = p_g(S_u | x) · p_u(c | x)``; elsewhere ``p_g(c | x)``. A profile
   that has seen one class only therefore says nothing of its own (``p'_u = p_g``).
3. Log-linear interpolation, renormalised:
   ``log p(c | x, u) = λ_u log p'_u(c | x) + (1 - λ_u) log p_g(c | x) - log Z``.

A key with no labels gets exactly the global posterior (``λ_u = 0``). For two classes step 3
is ``logit p = λ_u logit p'_u + (1 - λ_u) logit p_g``: the interpolation of the two log-odds.

Why not blend counts (``n_user + β·n_global``, the global counts as a Dirichlet prior)? It needs
a statistic-scaling operation that only the naive Bayes family has (and privately), a dense copy
of the global tables per key per prediction, and with Lidstone smoothing over hashed tokens the
scaled-down global counts are swamped by ``α·V`` unless ``β`` is set in tokens rather than
events. Interpolating posteriors works for every learner and is cheap; it is the Jelinek-Mercer
form of back-off, applied to log-posteriors.

Bounds (each with its behaviour at the bound):

- ``max_resident``: live per-key learners; past it the least recently used one *spills* (its
  ``to_state()`` goes to the spill store) and comes back on demand, unchanged.
- ``max_resident_bytes``: bytes of the live learners (each learner's ``memory_bytes()``, the
  sum of its arrays' ``nbytes``, plus :data:`MODEL_OVERHEAD` for its Python objects) plus the
  bytes the spill store holds in memory; past it least
  recently used learners spill. The learner in use always stays live, so the bound holds within
  one learner (a single learner larger than the bound is the most ever held). New keys are
  refused (:class:`~streambayes.errors.LimitError`) when the spilled states held in memory
  leave no room for two learners (a new one and the one it displaces) of the largest size seen.
  A disk spill store holds nothing in memory: then only the live learners count.
- ``max_keys`` (default 1,000,000): keys ever learned; an event of a new key past it is refused
  with :class:`~streambayes.errors.LimitError` before anything changes (the stream runtime makes
  it a dead letter with reason ``limit``).

The spill store (:mod:`.perkey_spill`) is in memory and compact by default; the runtime gives a
versioned disk store (:mod:`streambayes.runtime.loops.spill`) whose snapshot holds a manifest only.
Spilling and restoring never change a prediction: a learner comes back from its exact state.

>>> m = PerKeyModel("mnb")
>>> sport, money = {"text": "goal striker league"}, {"text": "stocks market rates"}
>>> m.learn_many([sport, money, sport, money], ["interesting", "not", "not", "interesting"],
...              keys=["ann", "ann", "bob", "bob"])
>>> m.rank([{"text": "market stocks"}, {"text": "league goal"}], "ann")
[1, 0]
>>> m.rank([{"text": "market stocks"}, {"text": "league goal"}], "bob")
[0, 1]
>>> m.rank([{"text": "market stocks"}, {"text": "league goal"}], "newcomer")  # global: a tie
[0, 1]
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np

from streambayes.errors import LimitError, ModelError
from streambayes.features import Batch
from streambayes.models.perkey_rows import _check_keys, _groups, _take, positive_log_odds
from streambayes.models.perkey_spill import MemorySpillStore, SpillStore
from streambayes.stats import log_normalize

DEFAULT_MAX_KEYS = 1_000_000
#: Bytes counted per live learner besides its arrays (its Python objects; ~3 KB for catnb).
MODEL_OVERHEAD = 4096


class PerKeyModel:
    """One ``base`` learner per key plus a global one; see the module docstring for the back-off."""

    name = "perkey"

    def __init__(self, base: str = "mnb", base_params: Mapping | None = None, backoff: float = 20.0,
                 max_resident: int | None = None, positive: str = "interesting",
                 max_resident_bytes: int | None = None, max_keys: int | None = DEFAULT_MAX_KEYS,
                 spill: SpillStore | None = None) -> None:
        if not backoff >= 0:
            raise ModelError(f"backoff must be >= 0 (events of global prior), got {backoff}")
        self.base = base
        self.base_params = dict(base_params) if base_params is not None else {}
        self.backoff = backoff
        self.positive = positive
        self.set_bounds(max_resident, max_resident_bytes, max_keys)
        self._global = self._new_model()
        self._spill: SpillStore = spill if spill is not None else MemorySpillStore()
        self._resident: OrderedDict[str, object] = OrderedDict()  # least recently used first
        self._sizes: dict[str, int] = {}  # resident key -> memory_bytes() of its learner
        self._resident_bytes = 0
        self._clean: set[str] = set()  # resident keys whose spilled copy is up to date
        self._n_labels: dict[str, int] = {}
        self._largest = 0  # bytes of the largest learner seen (fresh ones included)

    def set_bounds(self, max_resident: int | None, max_resident_bytes: int | None,
                   max_keys: int | None) -> None:
        """Change the memory bounds (they shape no prediction); applied at the next access."""
        for name, value in (("max_resident", max_resident), ("max_resident_bytes", max_resident_bytes),
                            ("max_keys", max_keys)):
            if value is not None and (isinstance(value, bool) or int(value) != value or value < 1):
                raise ModelError(f"{name} must be an integer >= 1 or None (unbounded), got {value!r}")
        self.max_resident = None if max_resident is None else int(max_resident)
        self.max_resident_bytes = None if max_resident_bytes is None else int(max_resident_bytes)
        self.max_keys = None if max_keys is None else int(max_keys)

    # -- hyperparameters ------------------------------------------------------------------
    def params(self) -> dict:
        return {"base": self.base, "base_params": dict(self.base_params), "backoff": self.backoff,
                "max_resident": self.max_resident, "positive": self.positive,
                "max_resident_bytes": self.max_resident_bytes, "max_keys": self.max_keys}

    def clone(self) -> PerKeyModel:
        return type(self)(**self.params())

    def _new_model(self):
        from streambayes.models import make_model  # late: the registry imports this module

        return make_model(self.base, **self.base_params)

    # -- the keys' learners ---------------------------------------------------------------
    @property
    def global_model(self):
        """The learner of every key's events (read it, do not train it directly)."""
        return self._global

    @property
    def spill_store(self) -> SpillStore:
        return self._spill

    @property
    def classes(self) -> list:
        return self._global.classes

    @property
    def n_events(self) -> int:
        return sum(self._n_labels.values())

    @property
    def keys(self) -> list[str]:
        """Every key with a learner, resident or not, in first-seen order."""
        return list(self._n_labels)

    @property
    def resident_keys(self) -> list[str]:
        """The live learners' keys, least recently used first."""
        return list(self._resident)

    @property
    def resident_bytes(self) -> int:
        """Bytes of the live per-key learners (not the global one)."""
        return self._resident_bytes

    def n_labels(self, key: str) -> int:
        """Events learned for ``key`` (0 for an unknown key)."""
        return self._n_labels.get(key, 0)

    def user_model(self, key: str):
        """The learner of ``key`` (brought back if it was spilled), or None for an unknown key."""
        return self._model(key, create=False)

    def _model(self, key: str, create: bool):
        model = self._resident.get(key)
        if model is not None:
            self._resident.move_to_end(key)
            return model
        if key in self._n_labels:
            model = self._load(key, self._spill)
            self._clean.add(key)
        elif create:
            model = self._new_model()
            self._n_labels[key] = 0
        else:
            return None
        self._resident[key] = model
        self._measure(key)
        self._enforce()
        return model

    def _load(self, key: str, spill: SpillStore):
        state = spill.get(key)
        if state is None:
            raise ModelError(f"the learner of key {key!r} is neither live nor in {spill!r}")
        return type(self._global).from_state(state)

    def _peek(self, key: str):
        """The learner of a known ``key`` without touching the LRU order or the spill store."""
        model = self._resident.get(key)
        return model if model is not None else self._load(key, self._spill)

    def _measure(self, key: str) -> None:
        size = self._resident[key].memory_bytes() + MODEL_OVERHEAD
        self._resident_bytes += size - self._sizes.get(key, 0)
        self._sizes[key] = size
        self._largest = max(self._largest, size)

    def _dirty(self, key: str) -> None:
        """``key``'s live learner changed: its spilled copy (if any) is stale."""
        if key in self._clean:
            self._clean.discard(key)
            if not self._spill.durable:
                self._spill.delete(key)  # free it now; a durable copy may be in a snapshot
        self._measure(key)

    def _over(self) -> bool:
        if self.max_resident is not None and len(self._resident) > self.max_resident:
            return True
        return self.max_resident_bytes is not None and \
            self._resident_bytes + self._spill.memory_bytes() > self.max_resident_bytes

    def _enforce(self) -> None:
        """Spill least recently used learners until within the bounds (the last one stays)."""
        while len(self._resident) > 1 and self._over():
            key, model = self._resident.popitem(last=False)
            if key not in self._clean:
                self._spill.put(key, model.to_state())
            self._clean.discard(key)
            self._resident_bytes -= self._sizes.pop(key)

    def _admit(self, keys) -> None:
        """LimitError, before anything changes, when the new ones among ``keys`` do not fit."""
        new = [key for key in dict.fromkeys(keys) if key not in self._n_labels]
        if not new:
            return
        if self.max_keys is not None and len(self._n_labels) + len(new) > self.max_keys:
            raise LimitError("max_keys", self.max_keys, new[0],
                             f"per-key limit: {len(self._n_labels)} keys learned, max_keys is "
                             f"{self.max_keys}; new key {new[0]!r} refused")
        if self.max_resident_bytes is not None:
            if not self._largest:
                self._largest = self._new_model().memory_bytes() + MODEL_OVERHEAD
            held, need = self._spill.memory_bytes(), 2 * self._largest
            if held + need > self.max_resident_bytes:
                raise LimitError("max_resident_bytes", self.max_resident_bytes, new[0],
                                 f"per-key limit: spilled states hold {held} bytes in memory, a new "
                                 f"learner needs {need} with room for the one it displaces, "
                                 f"max_resident_bytes is {self.max_resident_bytes}; new key "
                                 f"{new[0]!r} refused")

    # -- learning -------------------------------------------------------------------------
    def featurize(self, xs: Sequence[Mapping]) -> Batch:
        return self._global.featurize(xs)

    def _batch(self, X) -> Batch:
        return X if isinstance(X, Batch) else self.featurize(X)

    def learn_many(self, X, y: Sequence, w: Sequence[float] | None = None,
                   keys: Sequence[str | None] | None = None) -> None:
        """Learn each event in its key's learner and in the global learner (keys required)."""
        batch = self._batch(X)
        keys = _check_keys(keys, batch.n, "learning")
        self._admit(keys)
        y = y if isinstance(y, list) else list(y)
        self._global.learn_many(batch, y, w)  # validates labels and weights before any key learns
        weights = None if w is None else np.asarray(w, np.float64)
        for key, rows in _groups(keys):
            part = batch if len(rows) == batch.n else _take(batch, rows)
            self._model(key, create=True).learn_many(
                part, [y[i] for i in rows], None if weights is None else weights[rows])
            self._n_labels[key] += len(rows)
            self._dirty(key)
            self._enforce()

    def learn_one(self, x: Mapping, y, w: float = 1.0, key: str | None = None) -> None:
        self.learn_many([x], [y], [w], keys=[key])

    # -- prediction -----------------------------------------------------------------------
    def predict_log_proba_many(self, X, keys: Sequence[str | None] | str) -> np.ndarray:
        """Backed-off ``log P(c | x, key)``, shape (n, classes) in :attr:`classes` order.

        ``keys`` holds one key per event, or is a single key for every event."""
        batch = self._batch(X)
        keys = _check_keys([keys] * batch.n if isinstance(keys, str) else keys, batch.n, "prediction")
        lp_global = self._global.predict_log_proba_many(batch)
        out = lp_global.copy()
        for key, rows in _groups(keys):
            n_u = self._n_labels.get(key, 0)
            if n_u == 0:
                continue  # λ = 0: exactly the global posterior
            lam = n_u / (n_u + self.backoff)
            part = batch if len(rows) == batch.n else _take(batch, rows)
            mine = self._user_log_proba(self._model(key, create=False), part, lp_global[rows])
            out[rows] = mine if lam == 1.0 else log_normalize(lam * mine + (1.0 - lam) * lp_global[rows])
        return out

    def _user_log_proba(self, user, batch: Batch, lp_global: np.ndarray) -> np.ndarray:
        """Step 2: ``p_g(S_u | x) · p_u(c | x)`` on the user's classes ``S_u``, ``p_g`` elsewhere."""
        where = {c: j for j, c in enumerate(self.classes)}
        try:
            cols = np.array([where[c] for c in user.classes], np.int64)
        except KeyError as e:
            raise ModelError(f"a per-key learner knows class {e.args[0]!r} that the global one does not"
                             ) from None
        out = lp_global.copy()
        if len(cols):
            mass = np.logaddexp.reduce(lp_global[:, cols], axis=1)
            out[:, cols] = user.predict_log_proba_many(batch) + mass[:, None]
        return out

    def predict_proba_many(self, X, keys: Sequence[str | None] | str) -> np.ndarray:
        return np.exp(self.predict_log_proba_many(X, keys))

    def predict_proba_one(self, x: Mapping, key: str | None = None) -> dict:
        if not self.classes:
            return {}
        proba = self.predict_proba_many([x], [key])[0]
        return dict(zip(self.classes, proba.tolist(), strict=True))

    def predict_one(self, x: Mapping, key: str | None = None):
        proba = self.predict_proba_one(x, key)
        return max(proba, key=proba.get) if proba else None

    def rank(self, window_xs, key: str) -> list[int]:
        """Indices of ``window_xs`` by decreasing ``P(positive | x, key)`` (ties keep window order).

        Sorted by the log-odds of :attr:`positive`, which orders like the posterior without its
        saturation at 1.0 in floating point; before ``positive`` is known: the window order."""
        lp = self.predict_log_proba_many(window_xs, key)
        return np.argsort(-positive_log_odds(lp, self.classes, self.positive), kind="stable").tolist()

    def clues_many(self, X: Sequence[Mapping], keys: Sequence[str | None] | str,
                   k: int = 5) -> list[list[tuple[str, float]]]:
        """The top ``k`` clues of each event for its key: from the key's own learner once it has
        learned two classes (why *this reader* would care), else from the global learner, the
        same clues :meth:`clues_one` of that learner gives; none for a learner without clues."""
        keys = _check_keys([keys] * len(X) if isinstance(keys, str) else keys, len(X), "clues")
        out: list[list[tuple[str, float]]] = [[] for _ in X]
        for key, rows in _groups(keys):
            own = self._model(key, create=False) if self._n_labels.get(key, 0) else None
            model = own if own is not None and len(own.classes) >= 2 else self._global
            if hasattr(model, "clues_many"):
                for row, clues in zip(rows, model.clues_many([X[i] for i in rows], k), strict=True):
                    out[row] = clues
        return out

    def clues_one(self, x: Mapping, key: str, k: int = 5) -> list[tuple[str, float]]:
        return self.clues_many([x], [key], k)[0]

    # -- merge and state ------------------------------------------------------------------
    def merge(self, other: PerKeyModel) -> None:
        """Add ``other``'s statistics (a disjoint stream) key by key, and globally; ``other`` is
        only read (its spilled learners are brought back as copies). LimitError, before anything
        changes, when ``other``'s new keys pass ``max_keys``."""
        mine, theirs = self.params(), other.params() if isinstance(other, PerKeyModel) else None
        if type(other) is not type(self) or _statistical(theirs) != _statistical(mine):
            raise ModelError(f"cannot merge {type(other).__name__} {theirs} into {mine}: type and "
                             "parameters must match (the memory bounds may differ)")
        self._admit(other._n_labels)
        self._global.merge(other._global)
        for key, n in other._n_labels.items():
            self._model(key, create=True).merge(other._peek(key))
            self._n_labels[key] += n
            self._dirty(key)
            self._enforce()

    def to_state(self) -> dict:
        """Every key's learner, the global learner, and the LRU order.

        With a durable spill store every changed live learner is spilled first (it stays live)
        and the state holds the store's manifest instead of the learners' states."""
        head = {"model": self.name, "params": self.params(), "global": self._global.to_state()}
        if not self._spill.durable:
            users = [{"key": key, "n_labels": n, "state": self._peek(key).to_state()}
                     if key in self._resident and key not in self._clean else
                     {"key": key, "n_labels": n, "state": self._spill.get(key)}
                     for key, n in self._n_labels.items()]
            return {**head, "users": users, "resident": list(self._resident)}
        for key, model in self._resident.items():
            if key not in self._clean:
                self._spill.put(key, model.to_state())
                self._clean.add(key)
        self._spill.flush()
        manifest = self._spill.manifest()
        keys = list(self._n_labels)
        return {**head, "keys": keys, "n_labels": np.array(list(self._n_labels.values()), np.int64),
                "spill": np.array([manifest[k] for k in keys], np.int64),
                "resident": list(self._resident)}

    @classmethod
    def from_state(cls, state: Mapping, spill: SpillStore | None = None) -> PerKeyModel:
        """The model of ``state``; a state holding a spill manifest needs its durable ``spill``
        store (only the manifest is loaded: the learners come back on demand)."""
        if state.get("model") != cls.name:
            raise ModelError(f"state is for model {state.get('model')!r}, not {cls.name!r}")
        model = cls(**state["params"], spill=spill)
        model._global = type(model._global).from_state(state["global"])
        if "spill" in state:
            load = getattr(spill, "load_manifest", None)
            if load is None:
                raise ModelError("this per-key state keeps its learners in a spill store's files "
                                 "(a manifest); restore it with that store")
            keys = [str(k) for k in state["keys"]]
            counts, gens = np.asarray(state["n_labels"]), np.asarray(state["spill"])
            if not len(keys) == len(counts) == len(gens):
                raise ModelError("per-key state: keys, n_labels and spill manifest differ in length")
            model._n_labels = dict(zip(keys, counts.tolist(), strict=True))
            load(dict(zip(keys, gens.tolist(), strict=True)))
            return model
        resident, live = set(state["resident"]), {}
        for user in state["users"]:
            model._n_labels[user["key"]] = int(user["n_labels"])
            if user["key"] in resident:
                live[user["key"]] = user["state"]
            else:
                model._spill.put(user["key"], user["state"])
        for key in state["resident"]:
            model._resident[key] = type(model._global).from_state(live[key])
            model._measure(key)
            model._enforce()
        return model

    def memory_bytes(self) -> int:
        return self._global.memory_bytes() + self._resident_bytes + self._spill.memory_bytes()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(base={self.base!r}, keys={len(self._n_labels)}, "
                f"resident={len(self._resident)}, classes={self.classes})")


def _statistical(params: dict | None) -> dict | None:
    """The parameters that shape predictions (the bounds only bound memory)."""
    return None if params is None else {k: v for k, v in params.items() if k not in _BOUNDS}


_BOUNDS = frozenset({"max_resident", "max_resident_bytes", "max_keys"})
