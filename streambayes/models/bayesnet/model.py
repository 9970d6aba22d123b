"""``BayesNet``: a discrete Bayesian network learned from a stream, on the learner protocol.

Learning is "count, then derive" (STYLE habit 2). Complete rows add exact family counts
(:class:`~streambayes.models.bayesnet.counts.FamilyCounts`); the current CPTs are the posterior
mean under a Dirichlet prior, derived lazily and cached until the next update:

- ``parameters="file"``: the prior is the network's own CPTs, each parent configuration worth
  ``equivalent_sample_size`` observations (a variable without data keeps the file's CPT as is);
- ``parameters="prior"``: only the structure and state domains are kept; ``prior`` is ``"bdeu"``
  (ess / (q·r) per cell), ``"k2"`` (1 per cell) or ``"none"`` (maximum likelihood).

Rows with a missing value (``None`` or an absent key) go to stepwise online EM (Liang & Klein
2009; Cappé & Moulines 2009; :mod:`~streambayes.models.bayesnet.em`). How the two combine: the
complete-data counts stay exact (they merge and snapshot exactly); the EM learner is warm-started
from the CPTs of the counts when the first incomplete row arrives, and from then on every row,
complete or not, also goes to EM (the E-step of a complete row is its own count), so its
statistics *start from* the complete-data counts. The current CPTs are EM's while EM is active,
else those of the counts.

EM makes one step per ``em_batch_size`` rows of that EM stream (the rows from the first incomplete
one on), however the stream was cut into ``learn_many`` calls: the rows short of a full mini-batch
wait in the EM learner's state (its ``pending`` arrays, saved in snapshots) and join the next call's
rows. So a learner restarted from a snapshot on different poll batches reaches the same state
(exactly-once). Predictions, queries and ``cpt`` use the CPTs of the steps made so far: the (at most
``em_batch_size - 1``) waiting rows count in ``n_events`` and the exact counts but not yet in the
CPTs. ``merge`` refuses models with EM statistics (stepwise averages do not add up exactly).

With ``class_variable`` the network is a classifier: ``learn_many(xs, y, w)`` learns rows
``x ∪ {class_variable: y}``, and ``predict_log_proba_many`` is log P(class | x) by variable
elimination; ``classes`` are the class variable's states in network order. Events that do not fit
(unknown variable or state, the class variable given as a feature, evidence of probability zero)
raise :class:`~streambayes.errors.NetworkInputError`, which the runtime dead-letters.

``cpt(v)`` is readable: ``{parent states tuple: {state: p}}`` (``()`` for a root);
``cpt(v, as_array=True)`` gives the array ``[state, parent_1, …, parent_k]``.

>>> from streambayes.models.bayesnet.bif import parse_bif
>>> text = '''variable rain { type discrete [ 2 ] { yes, no }; }
... variable wet { type discrete [ 2 ] { yes, no }; }
... probability ( rain ) { table 0.2, 0.8; }
... probability ( wet | rain ) { (yes) 0.9, 0.1; (no) 0.1, 0.9; }'''
>>> bn = BayesNet(parse_bif(text), parameters="prior", prior="none")
>>> bn.learn_many([{"rain": "yes", "wet": "yes"}, {"rain": "no", "wet": "no"}, {"rain": "no", "wet": "yes"}])
>>> bn.cpt("wet")[("no",)]
{'yes': 0.5, 'no': 0.5}
>>> round(bn.query("rain", {"wet": "yes"})["yes"], 4)
0.5
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from streambayes.errors import ModelError, NetworkError, NetworkInputError
from streambayes.models.bayesnet.bif import read_bif, write_bif
from streambayes.models.bayesnet.counts import FamilyCounts, cpts_from_counts, dirichlet
from streambayes.models.bayesnet.inference import VariableElimination
from streambayes.models.bayesnet.network import Network
from streambayes.models.bayesnet.sampling import forward_sample
from streambayes.stats import event_weights

PARAMETERS = ("file", "prior")


class BayesNet:
    """A Bayesian network whose CPTs are learned from rows (see the module docstring)."""

    name = "bn"
    _supervised = True  # River reads this in progressive_val_score
    # conformance capabilities (tests/unit/test_conformance.py): the classes are the class
    # variable's states (not open), events must name network variables (no free text/fields)
    supports = frozenset({"decay", "river"})

    def __init__(self, network: str | Path | Mapping | Network | None = None, *,
                 class_variable: str | None = None, parameters: str = "file", prior: str = "bdeu",
                 equivalent_sample_size: float = 1.0, decay: float | None = None,
                 em_alpha: float = 0.7, em_batch_size: int = 256) -> None:
        if network is None:
            raise ModelError("model 'bn' needs a network: a BIF path (--network FILE.bif) or a Network")
        if parameters not in PARAMETERS:
            raise ModelError(f"parameters must be one of {PARAMETERS}, got {parameters!r}")
        if decay is not None and not 0 < decay <= 1:
            raise ModelError(f"decay must be in (0, 1], got {decay}")
        if not 0.5 < em_alpha <= 1 or int(em_batch_size) != em_batch_size or em_batch_size < 1:
            raise ModelError(f"need em_alpha in (0.5, 1] and an integer em_batch_size >= 1, got "
                             f"{em_alpha}, {em_batch_size}")
        self.network = str(network) if isinstance(network, str | Path) else \
            network.to_json() if isinstance(network, Network) else dict(network)
        self.class_variable = class_variable
        self.parameters = parameters
        self.prior = prior
        self.equivalent_sample_size = float(equivalent_sample_size)
        self.decay = decay
        self.em_alpha = em_alpha
        self.em_batch_size = em_batch_size
        self._setup(_load(network))

    def _setup(self, net: Network) -> None:
        if self.class_variable is not None and self.class_variable not in net.states:
            raise ModelError(f"class variable {self.class_variable!r} is not in the network {net.variables}")
        self._net = net
        self._struct = net.structure_copy()
        try:
            self._pseudo = dirichlet(net, "file" if self.parameters == "file" else self.prior,
                                     self.equivalent_sample_size)
        except NetworkError as exc:
            raise ModelError(str(exc)) from None
        self._counts = FamilyCounts(self._struct)
        self._em = None  # OnlineEM, started by the first row with a missing value
        self.n_events = 0
        self._version = 0
        self._cache: tuple | None = None
        self._class_col = None if self.class_variable is None else net.index[self.class_variable]
        self._lookup = [{**net.state_index[v], None: -1} for v in net.states]  # None = missing
        self._numeric = [{_number(st): c for c, st in enumerate(net.states[v]) if _number(st) is not None}
                         for v in net.states]  # states named like numbers, for numeric cells

    @classmethod
    def from_bif(cls, path: str | Path, parameters: str = "file", prior: str = "bdeu",
                 equivalent_sample_size: float = 1.0, **params) -> BayesNet:
        """The network of a BIF file: with its CPTs (``"file"``) or from a Dirichlet prior (``"prior"``)."""
        return cls(str(path), parameters=parameters, prior=prior,
                   equivalent_sample_size=equivalent_sample_size, **params)

    def to_bif(self, path: str | Path | None = None) -> str:
        """Write the current CPTs as BIF text (returned too)."""
        return write_bif(self.current_network(), path)

    # -- hyperparameters ----------------------------------------------------------------------
    def params(self) -> dict:
        return {"network": self.network, "class_variable": self.class_variable,
                "parameters": self.parameters, "prior": self.prior,
                "equivalent_sample_size": self.equivalent_sample_size, "decay": self.decay,
                "em_alpha": self.em_alpha, "em_batch_size": self.em_batch_size}

    def clone(self) -> BayesNet:
        return _restore(type(self), self.params(), self._net)

    @property
    def variables(self) -> list[str]:
        return self._net.variables

    @property
    def classes(self) -> list:
        return [] if self.class_variable is None else list(self._net.states[self.class_variable])

    # -- encoding -------------------------------------------------------------------------------
    def encode(self, rows: Sequence[Mapping]) -> np.ndarray:
        """State codes (n, V), -1 = missing; unknown variables/states raise NetworkInputError.

        Non-string values are looked up by ``str(value)`` (CSV cells such as ``7`` or ``0.5``).
        """
        index = self._net.index
        unknown = set().union(*rows) - index.keys()  # iterating a mapping gives its keys
        if unknown:
            v = next(k for row in rows for k in row if k in unknown)  # the first, in row order
            raise NetworkInputError(f"unknown variable {v!r}; the network has {self.variables}")
        codes = np.empty((len(rows), len(index)), np.int64)
        for v, i in index.items():  # column by column: one dict lookup per cell, -2 = not a state
            get = self._lookup[i].get
            col = [get(row.get(v), -2) for row in rows]
            if -2 in col:
                col = [self._code(v, row.get(v)) for row in rows]
            codes[:, i] = col
        return codes

    def _code(self, v: str, s) -> int:
        """The code of state ``s`` of ``v``; a number (a CSV cell) matches the state named like
        it (``0.50``, ``1e3``, ``007``), a bool the state ``true``/``false``."""
        i = self._net.index[v]
        if isinstance(s, bool):
            s = "true" if s else "false"
        elif isinstance(s, int | float) and float(s) in self._numeric[i]:
            return self._numeric[i][float(s)]
        code = self._lookup[i].get(s if isinstance(s, str) or s is None else str(s))
        if code is None:
            raise NetworkInputError(f"state {s!r} is not in the domain of {v!r}: {list(self._net.states[v])}")
        return code

    def featurize(self, xs: Sequence[Mapping], keep_words: bool = False) -> np.ndarray:
        """Evidence codes of the events; in classifier mode the class variable may not be given."""
        codes = self.encode(xs)
        if self._class_col is not None and (codes[:, self._class_col] >= 0).any():
            raise NetworkInputError(f"the event gives the class variable {self.class_variable!r}, "
                                    "which is the label")
        return codes

    def _rows(self, X, y, w) -> tuple[np.ndarray, np.ndarray | None]:
        codes = np.array(X, np.int64) if isinstance(X, np.ndarray) else \
            (self.featurize(X) if y is not None else self.encode(X))
        if codes.ndim != 2 or codes.shape[1] != len(self._net.states):
            raise ModelError(f"expected codes of shape (n, {len(self._net.states)}), got {codes.shape}")
        if codes.size and (codes.max(initial=-1) >= 0) and \
                (codes >= np.array([self._net.card(v) for v in self._net.states])).any():
            raise NetworkInputError("a state code is out of range for its variable")
        if self._class_col is not None:
            if y is None or len(y) != len(codes) or any(v is None for v in y):
                raise ModelError(f"classifier mode: every row needs its class {self.class_variable!r} "
                                 f"as the label y (got {'none' if y is None else len(y)} labels for "
                                 f"{len(codes)} rows)")
            codes[:, self._class_col] = self.encode([{self.class_variable: v} for v in y])[:, self._class_col]
        elif y is not None:
            raise ModelError("y is given but the network has no class_variable")
        return codes, event_weights(w, len(codes))

    # -- learning -------------------------------------------------------------------------------
    def learn_one(self, x: Mapping, y=None, w: float = 1.0) -> None:
        self.learn_many([x], None if y is None and self._class_col is None else [y], [w])

    def learn_many(self, X, y: Sequence | None = None, w: Sequence[float] | None = None) -> None:
        """Learn rows: dicts variable → state (None/absent = missing) or codes (n, V), -1 = missing.

        1. complete rows add their (decayed) weights to the family counts;
        2. rows with a missing value start online EM (warm-started from the counts' CPTs) and,
           once EM runs, every row goes to it as well (see the module docstring).
        """
        codes, w = self._rows(X, y, w)
        if not len(codes):
            return
        complete = (codes >= 0).all(axis=1)
        if self._em is None and not complete.all():
            first = int(np.argmin(complete))  # the first incomplete row: EM starts from the counts before it
            if first:
                self._learn_codes(codes[:first], w[:first], complete[:first])
            self._em = self._new_em()
            codes, w, complete = codes[first:], w[first:], complete[first:]
        self._learn_codes(codes, w, complete)

    def _learn_codes(self, codes: np.ndarray, w: np.ndarray, complete: np.ndarray) -> None:
        raw = w
        if self.decay is not None and self.decay < 1:  # event i of n is decay^(n-1-i) old at the end
            self._counts.scale(self.decay ** len(codes))
            w = w * self.decay ** np.arange(len(codes) - 1, -1, -1, dtype=np.float64)
        if complete.all():
            self._counts.add(codes, w)
        elif complete.any():
            self._counts.add(codes[complete], w[complete])
        if self._em is not None:
            self._em.partial_fit(codes, raw)  # EM forgets by its own step size; short chunks wait
        self.n_events += len(codes)
        self._version += 1

    def _new_em(self):
        """Online EM warm-started from the complete-data counts: its CPTs are the counts' CPTs, its
        averaged statistics s = counts / (complete rows), as if those rows had been its first
        ⌈rows / batch size⌉ mini-batches."""
        seen = float(self._counts.counts[self._struct.order[0]].sum())
        cold = seen == 0 and self.parameters == "prior"  # flat CPTs would never split a hidden state
        em = self._em_learner(self.current_network(), init="random" if cold else None)
        if seen > 0:
            em.stats = {v: c / seen for v, c in self._counts.counts.items()}
            em.n_rows, em.n_steps = seen, math.ceil(seen / self.em_batch_size)
        return em

    def _em_learner(self, net: Network, state: Mapping | None = None, init=None):
        from streambayes.models.bayesnet.em import OnlineEM

        params = {"prior": self._pseudo, "equivalent_sample_size": self.equivalent_sample_size,
                  "alpha": self.em_alpha, "batch_size": self.em_batch_size, "init": init or net.cpts,
                  "seed": 0}
        return OnlineEM(net, **params) if state is None else OnlineEM.from_state(net, state, **params)

    # -- derived CPTs and queries ---------------------------------------------------------------
    def current_network(self) -> Network:
        """The network with the current CPTs (cached until the next update)."""
        return self._current()[0]

    def __getstate__(self) -> dict:  # the current network and its engine are a cache: never pickled
        return {**self.__dict__, "_cache": None}

    def __setstate__(self, state: dict) -> None:  # (older pickles hold an older engine)
        self.__dict__.update({**state, "_cache": None})

    def _current(self) -> tuple[Network, VariableElimination]:
        if self._cache is None or self._cache[0] != self._version:
            net = self._struct.structure_copy()
            if self._em is not None:
                cpts = {v: np.asarray(t, np.float64) for v, t in self._em.cpts.items()}
            else:
                cpts = cpts_from_counts(self._struct, self._counts.counts, self._pseudo)
                if self.parameters == "file":
                    for v, table in self._counts.counts.items():
                        if not table.any():
                            cpts[v] = self._net.cpts[v]
            net.cpts = cpts
            self._cache = (self._version, net, VariableElimination(net))
        return self._cache[1], self._cache[2]

    def cpt(self, variable: str, as_array: bool = False):
        """P(variable | parents): ``{parent states: {state: p}}``, or the array when ``as_array``."""
        if variable not in self._net.states:
            raise NetworkError(f"unknown variable {variable!r}; the network has {self.variables}")
        table = self.current_network().cpts[variable]
        if as_array:
            return table.copy()
        states = self._net.states
        configs = itertools.product(*(range(len(states[p])) for p in self._net.parents[variable]))
        return {tuple(states[p][c] for p, c in zip(self._net.parents[variable], cfg, strict=True)):
                dict(zip(states[variable], table[(slice(None), *cfg)].tolist(), strict=True))
                for cfg in configs}

    def query(self, variables: str | Sequence[str], evidence: Mapping | None = None) -> dict:
        """P(variables | evidence): ``{state: p}`` for one variable, ``{(s1, s2, …): p}`` for several."""
        one = isinstance(variables, str)
        names = [variables] if one else list(variables)
        evidence = {k: v for k, v in (evidence or {}).items() if v is not None}
        for v in [*evidence, *names]:  # one lookup per name: no (1, V) row is encoded
            if v not in self._net.index:
                raise NetworkInputError(f"unknown variable {v!r}; the network has {self.variables}")
        codes = {v: self._code(v, s) for v, s in evidence.items()}
        if len(set(names)) != len(names) or not codes.keys().isdisjoint(names):
            both = sorted(set(names) & codes.keys())
            raise NetworkError(f"query variables must be distinct and not in the evidence: {both or names}")
        table = self._current()[1].query_codes(names, codes)
        domains = [self._net.states[v] for v in names]
        if one or len(names) == 1:
            return dict(zip(domains[0], table.tolist(), strict=True))
        return {combo: float(table[idx]) for idx, combo in zip(
            itertools.product(*(range(len(d)) for d in domains)), itertools.product(*domains), strict=True)}

    def log_likelihood(self, rows) -> float:
        """Σ log P(observed values of each row), missing values marginalised."""
        codes = rows if isinstance(rows, np.ndarray) else self.encode(rows)
        return float(self._current()[1].log_likelihood_many(codes).sum())

    def sample(self, n: int, seed=None) -> list[dict]:
        """``n`` rows drawn from the current network (forward sampling)."""
        return self._net.decode(forward_sample(self.current_network(), n, seed))

    # -- classifier -----------------------------------------------------------------------------
    def predict_log_proba_many(self, X) -> np.ndarray:
        if self._class_col is None:
            raise ModelError("predictions need a class_variable")
        codes = X if isinstance(X, np.ndarray) else self.featurize(X)
        if not len(codes):
            return np.zeros((0, len(self.classes)))
        try:
            proba = self._current()[1].posterior_many(self.class_variable, codes)
        except NetworkInputError:
            raise
        except NetworkError as exc:
            raise NetworkInputError(str(exc)) from None
        with np.errstate(divide="ignore"):
            return np.log(proba)

    def predict_proba_many(self, X) -> np.ndarray:
        return np.exp(self.predict_log_proba_many(X))

    def predict_proba_one(self, x: Mapping) -> dict:
        if self._class_col is None:
            return {}
        return dict(zip(self.classes, self.predict_proba_many([x])[0].tolist(), strict=True))

    def predict_one(self, x: Mapping):
        proba = self.predict_proba_one(x)
        return max(proba, key=proba.get) if proba else None

    def clues_one(self, x: Mapping, k: int = 5) -> list[tuple[str, float]]:
        """The ``k`` Markov-blanket terms that most favour the predicted class over the runner-up."""
        terms = [t for t in self.log_odds_terms(x) if t[0] != "prior"]
        terms.sort(key=lambda t: -abs(t[1]))
        return terms[:k]

    def log_odds_terms(self, x: Mapping) -> list[tuple[str, float]]:
        """Terms of log P(top | x) − log P(second | x).

        When every variable of the class's Markov-blanket families is observed, log P(c, x)
        differs across classes only by the log-CPT entries of those families: the class's own
        family (``"prior"``) and each child ``"child=state"``. Otherwise one ``"evidence"`` term.
        """
        if len(self.classes) < 2:
            return []
        codes = self.featurize([x])
        lp = self.predict_log_proba_many(codes)[0]
        a, b = np.argsort(-lp, kind="stable")[:2]
        c, net = self.class_variable, self._net
        fams = [c, *net.children(c)]
        needed = {u for v in fams for u in (v, *net.parents[v])} - {c}
        if not all(codes[0, net.index[u]] >= 0 for u in needed):
            return [("evidence", float(lp[a] - lp[b]))]
        cpts, terms = self.current_network().cpts, []
        for v in fams:
            row = codes[0].copy()
            pick = []
            for label in (a, b):
                row[self._class_col] = label
                pick.append(cpts[v][tuple(row[net.index[u]] for u in (v, *net.parents[v]))])
            with np.errstate(divide="ignore"):
                value = float(np.log(pick[0]) - np.log(pick[1]))
            name = "prior" if v == c else f"{v}={net.states[v][codes[0, net.index[v]]]}"
            terms.append((name, value))
        return terms

    # -- merge and state ------------------------------------------------------------------------
    def learn_structure(self, window, score: str = "bic", max_parents: int = 3) -> list[str]:
        """Re-learn the structure on a window of rows by hill climbing from the current one;
        unchanged families keep their counts (see ``adapt.py``). Returns the changed families."""
        from streambayes.models.bayesnet.adapt import learn_structure

        return learn_structure(self, window, score, max_parents)

    def structure(self) -> dict:
        """``{variable: parents}`` of the current structure."""
        return {v: list(ps) for v, ps in self._struct.parents.items()}

    def merge(self, other: BayesNet) -> None:
        """Add ``other``'s counts (a disjoint stream, same structure and parameters)."""
        if type(other) is not type(self) or other.params() != self.params():
            raise ModelError(f"cannot merge BayesNet{other.params()} into BayesNet{self.params()}: "
                             "parameters must match")
        if self._em is not None or other._em is not None:
            raise ModelError("cannot merge networks that have online EM statistics (rows with missing "
                             "values); merge is exact for complete-data counts only")
        self._counts.merge(other._counts)
        self.n_events += other.n_events
        self._version += 1

    def to_state(self) -> dict:
        return {"model": self.name, "params": self.params(), "network": self._net.to_json(),
                "counts": self._counts.to_state(), "n_events": self.n_events,
                "em": None if self._em is None else self._em.to_state()}

    @classmethod
    def from_state(cls, state: Mapping) -> BayesNet:
        if state.get("model") != cls.name:
            raise ModelError(f"state is for model {state.get('model')!r}, not {cls.name!r}")
        model = _restore(cls, state["params"], Network.from_json(state["network"]))
        model._counts = FamilyCounts.from_state(model._struct, state["counts"])
        model.n_events = int(state["n_events"])
        if state.get("em") is not None:
            model._em = model._em_learner(model.current_network(), state["em"])
            model._cache = None  # the CPTs are EM's from now on
        return model

    def memory_bytes(self) -> int:
        tables = sum(a.nbytes for a in self._pseudo.values()) + sum(a.nbytes for a in self._net.cpts.values())
        em = 0 if self._em is None else sum(a.nbytes for a in self._em.to_state().values())
        return int(self._counts.nbytes() + tables + (0 if self._cache is None else tables) + em)

    def __repr__(self) -> str:
        return (f"BayesNet({self._net.name!r}, class_variable={self.class_variable!r}, "
                f"n_events={self.n_events})")


def _number(state: str) -> float | None:
    try:
        return float(state)
    except ValueError:
        return None


def _load(network) -> Network:
    if isinstance(network, Network):
        return network
    if isinstance(network, Mapping):
        return Network.from_json(network)
    return read_bif(network)


def _restore(cls, params: Mapping, net: Network) -> BayesNet:
    """A fresh model with ``params`` on an already-loaded network (no file read)."""
    model = cls.__new__(cls)
    kept = dict(params)
    kept["network"] = net
    model.__init__(**kept)
    model.network = params["network"]
    return model


