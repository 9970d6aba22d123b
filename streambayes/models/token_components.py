"""Likelihood components over hashed tokens: multinomial, Bernoulli, complement.

Each keeps weighted counts per (class, token id) for the ids seen so far only (a
:class:`~streambayes.stats.SparseCounts`: memory grows with the vocabulary, not with the
2^k hash space) and the per-class totals. The vocabulary ``V`` in the smoothing denominator
is the number of ids seen so far (learned with a positive value), as in Mitchell's Table 6.2
((n_k + 1) / (n + |Vocabulary|)) and River; tokens never seen in training are ignored at
prediction. Give ``vocab_size`` to smooth over a fixed feature space instead (scikit-learn's
convention).
"""

from __future__ import annotations

import numpy as np

from streambayes.errors import ModelError
from streambayes.features import Batch, FeatureHasher, SparseRows, fold_fields
from streambayes.models.text_transform import DocFreq, check_transform, collapse, transform
from streambayes.stats import SparseCounts, lidstone_log, m_estimate_log
from streambayes.stats.evidence import evidence_alpha

_SHARED_SCORES_MIN = 4096  # entries from which a batch's scores are made per distinct id


class TokenTable:
    """Counts per (class, seen token id), class totals; the seen ids are the vocabulary."""

    kind = "token"

    def __init__(self, n_features: int, alpha: float | str = 1.0, fold: bool = True,
                 vocab_size: int | None = None, m: float | None = None, *, tf: str | None = None,
                 idf: bool | str = False, length_norm: str | None = None) -> None:
        if alpha != "auto" and (isinstance(alpha, str) or not alpha >= 0):
            raise ModelError(f"alpha must be a number >= 0 or 'auto', got {alpha!r}")
        self.n_features, self.alpha, self.fold = n_features, alpha, fold
        self.vocab_size, self.m = vocab_size, m
        self.tf, self.idf, self.length_norm = check_transform(tf, idf, length_norm)
        self.plain = tf is None and not idf and length_norm is None  # counts as they come
        self.df = DocFreq() if idf else None
        self.hasher = FeatureHasher(n_features)
        self.table = SparseCounts()  # (classes, ids seen so far), grows with the data
        self.totals = np.zeros(0)
        self._cache: dict = {}
        self._last_lookup: tuple | None = None
        self._batch_cols: tuple | None = None  # (a predicted batch's ids, their columns then)
        # a batch scored for clues keeps its entry scores for them (:meth:`scores_kept_for`)
        self._keep_scores = False
        self._kept_scores: tuple | None = None
        self._auto = [1.0, -1.0]  # alpha="auto": (fitted alpha, counted mass at the fit; -1: none)

    def params(self) -> dict:
        out = {"n_features": self.n_features, "alpha": self.alpha, "fold": self.fold,
               "vocab_size": self.vocab_size, "m": self.m}
        if not self.plain:
            out |= {"tf": self.tf, "idf": self.idf, "length_norm": self.length_norm}
        return out

    @property
    def auto(self) -> bool:
        return self.alpha == "auto" and self.m is None  # the m-estimate does not use alpha

    def _alpha(self, scale: float = 1.0) -> float:
        """The Lidstone alpha in use: the parameter, or with ``"auto"`` the last fit of
        :meth:`refit` (1 before the first). The model refits at points fixed by its event count
        (:func:`~streambayes.stats.evidence.is_refit_point`) and after a merge, never when it
        predicts; the fit is kept in the state, so a restored model uses the same alpha."""
        return self.alpha if self.alpha != "auto" else self._auto[0]

    def refit(self, scale: float = 1.0) -> None:
        """Fit ``alpha="auto"`` to the counts now: the ``α`` that maximises their Dirichlet evidence
        (:func:`~streambayes.stats.evidence.evidence_alpha`)."""
        counts, totals = self._evidence_counts(self.table.sorted_counts() * scale, self.totals * scale)
        self._auto = [evidence_alpha(counts, totals, self.vocabulary), float(self.totals.sum())]
        self._cache.clear()

    def _evidence_counts(self, counts: np.ndarray, totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return counts, totals

    def _learn_entries(self, batch: Batch, w: np.ndarray) -> SparseRows:
        """The entries to add for a batch being learned (``w``: stored event weights)."""
        sr = self.entries(batch)
        if self.plain:
            return sr
        sr = collapse(sr, self.n_features)
        if self.df is not None:
            self.df.learn(sr, w)
        return transform(sr, self.tf, self.df, self.idf, self.length_norm)

    def _scored_entries(self, batch: Batch) -> SparseRows:
        """The entries a prediction weighs (transformed with the current ``df``)."""
        sr = self.entries(batch)
        if self.plain:
            return sr
        return transform(collapse(sr, self.n_features), self.tf, self.df, self.idf, self.length_norm)

    @property
    def n_seen(self) -> int:
        """Ids ever learned with a positive value (zero-weight events included), as before."""
        return len(self.table)

    @property
    def vocabulary(self) -> int:
        return self.vocab_size if self.vocab_size is not None else self.n_seen

    def entries(self, batch: Batch) -> SparseRows:
        return fold_fields(batch, self.hasher) if self.fold else batch.tokens

    def check(self, batch: Batch, n_classes: int | None = None) -> None:
        """Raise FeatureError for a batch this table cannot learn (negative counts)."""
        if self.fold and (batch.numeric or batch.categorical):
            self.entries(batch)

    def _counts_of(self, ids: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        """(which ids count at prediction — None for all —, their counts (classes, kept))."""
        found = self._find(ids)
        if self.vocab_size is None:  # tokens never seen in training are ignored
            keep = None if found[2] else found[1]
            return keep, self.table.gather_columns(self.table.index.known(found))
        cols = self.table.index.lookup(ids)
        counts = self.table.gather_columns(np.maximum(cols, 0)) if len(self.table) else \
            np.zeros((len(self.totals), len(cols)))
        counts[:, cols < 0] = 0.0
        return None, counts

    def grow_classes(self, k: int) -> None:
        self.table.grow_classes(k)
        self.totals = np.pad(self.totals, (0, k - len(self.totals)))
        self._cache.clear()

    def _add(self, cls: np.ndarray, buckets: np.ndarray, vals: np.ndarray, positive) -> None:
        """Add ``vals`` at (class, id) in stream order; ids with a positive value become seen
        (the others add 0: nothing to store)."""
        if np.count_nonzero(positive) == len(positive):
            cols = self._learned_columns(buckets)
        else:
            self._batch_cols = None  # (a predicted batch's columns are not used here: let go)
            cls, buckets, vals = cls[positive], buckets[positive], vals[positive]
            cols = self.table.columns(buckets)
        self.table.add_columns(cls, cols, vals)
        self._cache.clear()
        self._last_lookup = None  # learned: do not hold on to the batch's ids

    def learn(self, batch: Batch, rows: np.ndarray, w: np.ndarray, raw: np.ndarray | None = None) -> None:
        sr = self._learn_entries(batch, w)
        r = sr.row_ids()
        vals = sr.values * w[r]
        self._add(rows[r], sr.indices, vals, sr.values > 0)
        np.add.at(self.totals, rows[r], vals)

    def learn_buckets(self, c: int, buckets: np.ndarray, w: float) -> None:
        """One event of plain tokens (value 1 each) for class ``c``: the same additions, in the
        same order, as :meth:`learn` makes for it, without building a batch."""
        self.table.add_row(c, self.table.columns(buckets, self._find(buckets)), w)
        total = float(self.totals[c])
        for _ in range(len(buckets)):
            total += w  # one addition per occurrence, as np.add.at does in learn()
        self.totals[c] = total
        self._cache.clear()

    def _learned_columns(self, buckets: np.ndarray) -> np.ndarray:
        """Columns of ids being learned, unseen ones added (:meth:`SparseCounts.columns`).

        The ids of a batch just predicted (prequential calibration) were found then (:meth:`_find`);
        ``alpha="auto"`` learns a batch that crosses refit points in parts (27 of the first 58
        batches of 100,000 SMS), each part a slice of those ids. A part takes the columns its ids
        had at the prediction (columns never change once given) and looks up only the ids unseen
        then, instead of searching all its ids again. The columns are the same: the ids unseen
        now are all among those, and are given new columns in the same (ascending) order.
        """
        last = self._last_lookup
        if last is not None and last[1] == len(self.table):
            if last[0] is buckets:
                return self.table.columns(buckets, last[2])
            if _offset_in(buckets, last[0]) is not None:  # the first part of a predicted batch
                self._batch_cols = (last[0], self.table.index.columns_found(last[2]))
        held = getattr(self, "_batch_cols", None)
        at = None if held is None else _offset_in(buckets, held[0])
        if at is None:
            self._batch_cols = None
            return self.table.columns(buckets, self._find(buckets))
        whole, known = held
        cols = known[at:at + len(buckets)].copy()
        miss = cols < 0
        if np.count_nonzero(miss):
            cols[miss] = self.table.columns(buckets[miss])
        if at + len(buckets) == len(whole):  # the last part: let the batch go
            self._batch_cols = None
        return cols

    def _find(self, buckets: np.ndarray) -> tuple:
        """:meth:`IdIndex.find` of a batch's (or one event's) ids; a prequential learn right after
        predicting the same ids (the same array, no id added since) reuses it."""
        last = self._last_lookup
        if last is not None and last[0] is buckets and last[1] == len(self.table):
            return last[2]
        found = self.table.index.find(buckets)
        self._last_lookup = (buckets, len(self.table), found)
        return found

    def score_buckets(self, buckets: np.ndarray, scale: float) -> np.ndarray:
        """Per-class log-likelihood of one event of plain tokens."""
        _, counts = self._counts_of(buckets)
        if not counts.shape[1] or self.vocabulary == 0:
            return np.zeros(len(self.totals))
        return self.entry_scores(counts, scale).sum(axis=1) + self._const(scale)

    def _const(self, scale: float):
        const = self.row_constant(scale)
        return 0.0 if const is None else const

    def scale(self, factor: float) -> None:
        self.table.scale(factor)
        self.totals *= factor
        if self.df is not None:
            self.df.scale(factor)
        self._cache.clear()

    def merge(self, other: TokenTable, class_map: np.ndarray, factor: float) -> None:
        self.table.merge(other.table, class_map, factor)
        np.add.at(self.totals, class_map, other.totals * factor)
        if self.df is not None:
            self.df.merge(other.df, factor)
        self._cache.clear()  # alpha="auto": the model refits on the sum

    def _smoothed_log(self, counts: np.ndarray, totals: np.ndarray, n_values: int,
                      scale: float = 1.0) -> np.ndarray:
        if self.m is not None:
            return m_estimate_log(counts, totals, self.m, 1.0 / max(n_values, 1))
        return lidstone_log(counts, totals, n_values, self._alpha(scale))

    def entry_scores(self, counts: np.ndarray, scale: float) -> np.ndarray:
        """Per-class score of one occurrence of each id whose counts are ``counts``
        (classes, m), shape (classes, m)."""
        raise NotImplementedError

    def row_constant(self, scale: float) -> np.ndarray | None:
        """A per-class term added to every row (e.g. Bernoulli's absent features)."""
        return None

    def log_likelihood(self, batch: Batch, scale: float) -> np.ndarray:
        k = len(self.totals)
        out = np.zeros((batch.n, k))
        if self.vocabulary == 0:
            return out
        sr = self._presence(batch)
        r, vals = sr.row_ids(), sr.values
        keep, scores = self._entry_scores_of(sr.indices, scale)
        if self._keep_scores:
            self._kept_scores = (sr.indices, scale, len(self.table), keep, scores)
        if keep is not None:
            r, vals = r[keep], vals[keep]
        contrib = scores * vals
        for j in range(k):
            out[:, j] = np.bincount(r, contrib[j], minlength=batch.n)
        const = self.row_constant(scale)
        return out if const is None else out + const

    def scores_kept_for(self, ids: np.ndarray, scale: float) -> tuple[np.ndarray | None, np.ndarray]:
        """:meth:`_entry_scores_of` ``(ids, scale)``: the ones the prediction of these same ids
        kept (a clue batch: ``_keep_scores``; nothing learned since), else made again. The kept
        ones are let go either way."""
        kept, self._kept_scores = self._kept_scores, None
        if kept is not None and kept[0] is ids and kept[1] == scale and kept[2] == len(self.table):
            return kept[3], kept[4]
        return self._entry_scores_of(ids, scale)

    def _entry_scores_of(self, ids: np.ndarray, scale: float) -> tuple[np.ndarray | None, np.ndarray]:
        """(which ids count at prediction — None for all —, :meth:`entry_scores` of each).

        A batch's entries repeat their ids (256 news posts: 100k entries, some 15k distinct):
        the scores are made once per distinct column and gathered, the same numbers as scoring
        every entry (a column's scores depend on that column's counts only), with a log per
        (class, distinct id) instead of per (class, entry): 20 Newsgroups' 20 classes made
        prediction half of a mini-batch's time."""
        if self.vocab_size is not None or len(ids) < _SHARED_SCORES_MIN:
            keep, counts = self._counts_of(ids)
            return keep, self.entry_scores(counts, scale)
        found = self._find(ids)
        keep = None if found[2] else found[1]
        cols = self.table.index.known(found)
        seen = len(self.table)
        if seen > 4 * len(cols):  # a mark per seen id would cost more than it saves
            return keep, self.entry_scores(self.table.gather_columns(cols), scale)
        mark = np.zeros(seen, bool)
        mark[cols] = True
        distinct = np.flatnonzero(mark)
        if 2 * len(distinct) > len(cols) or len(distinct) < 2:  # few repeats: score the entries
            # as they are (and one column would be summed over classes pairwise, not row by row)
            return keep, self.entry_scores(self.table.gather_columns(cols), scale)
        slot = np.empty(seen, np.int64)
        slot[distinct] = np.arange(len(distinct))
        return keep, self.entry_scores(self.table.gather_columns(distinct), scale)[:, slot[cols]]

    def _presence(self, batch: Batch) -> SparseRows:
        return self._scored_entries(batch)

    def contributions(self, batch: Batch, scale: float) -> list[tuple[str, np.ndarray]]:
        """Per-class contribution of each distinct feature of a one-event batch."""
        if self.vocabulary == 0:
            return []
        by_bucket = dict(zip(self.entries(batch).indices.tolist(), _entry_names(batch, self.fold),
                             strict=True))
        sr = self._presence(batch)  # Bernoulli's reorders and collapses entries: name by bucket
        names = [by_bucket[b] for b in sr.indices.tolist()]
        keep, counts = self._counts_of(sr.indices)
        keep = np.ones(len(names), bool) if keep is None else keep
        scores = self.entry_scores(counts, scale) * sr.values[keep]
        totals: dict[str, np.ndarray] = {}
        for name, col in zip(np.array(names, dtype=object)[keep], scores.T, strict=True):
            totals[name] = totals[name] + col if name in totals else col
        out = list(totals.items())
        const = self.row_constant(scale)
        if const is not None:
            out.append(("(absent words)", const))
        return out

    def to_state(self) -> dict:
        """Only the seen ids (ascending) and their counts: ``cols`` (n,), ``counts`` (classes, n)."""
        out = {"params": self.params(), "cols": self.table.index.ids.astype(np.int64),
               "counts": self.table.sorted_counts(), "totals": self.totals.copy()}
        if self.df is not None:
            out["df"] = self.df.to_state()
        if self.alpha == "auto":
            out["auto_alpha"] = list(self._auto)
        return out

    @classmethod
    def from_state(cls, state: dict) -> TokenTable:
        t = cls(**state["params"])
        t.totals = np.array(state["totals"], np.float64)
        t.table = sparse_from_state(state, len(t.totals), t.n_features)
        if t.df is not None:
            t.df = DocFreq.from_state(state["df"])
        if t.alpha == "auto":
            t._auto = [float(v) for v in state["auto_alpha"]]
        return t

    def memory_bytes(self) -> int:
        return self.table.nbytes + self.totals.nbytes + (0 if self.df is None else self.df.nbytes)


class Multinomial(TokenTable):
    """``log P(w | c) = log((n_cw + α) / (n_c + α·V))`` per occurrence (McCallum & Nigam 1998)."""

    kind = "multinomial"

    def score_buckets(self, buckets: np.ndarray, scale: float) -> np.ndarray:
        if self.m is not None or scale != 1.0 or not self.plain or self._alpha() <= 0:
            return super().score_buckets(buckets, scale)
        if self.vocab_size is None:
            logs = self.table.gather_columns(self.table.index.known(self._find(buckets)))
        else:
            _, logs = self._counts_of(buckets)
        n = logs.shape[1]
        if not n:
            return np.zeros(len(self.totals))
        a = self._alpha()
        logs += a
        np.log(logs, out=logs)
        return np.add.reduce(logs, axis=1) - n * np.log(self.totals + a * self.vocabulary)

    def entry_scores(self, counts: np.ndarray, scale: float) -> np.ndarray:
        return self._smoothed_log(counts * scale, (self.totals * scale)[:, None], self.vocabulary, scale)


class Bernoulli(TokenTable):
    """Presence/absence of every vocabulary word: ``P(w | c) = (df_cw + α) / (N_c + 2α)``.

    ``totals`` holds the (weighted) number of documents per class; absent words contribute
    ``Σ_w log(1 - P(w | c))``, cached until the counts change.
    """

    kind = "bernoulli"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.alpha == "auto" or not self.plain:
            raise ModelError("Bernoulli naive Bayes counts presence: it takes neither alpha='auto' "
                             "nor the tf/idf/length_norm transforms")

    def _presence(self, batch: Batch) -> SparseRows:
        sr = self.entries(batch)
        r = sr.row_ids()
        pos = sr.values > 0
        keys = np.unique(r[pos] * self.n_features + sr.indices[pos])
        rows, buckets = keys // self.n_features, keys % self.n_features
        indptr = np.zeros(batch.n + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=batch.n), out=indptr[1:])
        return SparseRows(indptr, buckets, np.ones(len(keys)))

    def learn(self, batch: Batch, rows: np.ndarray, w: np.ndarray, raw: np.ndarray | None = None) -> None:
        sr = self._presence(batch)
        r = sr.row_ids()
        self._add(rows[r], sr.indices, w[r], np.ones(len(r), bool))
        np.add.at(self.totals, rows, w)  # documents per class, empty ones included

    def _probs(self, df: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a = self.alpha
        with np.errstate(divide="ignore"):
            log_den = np.log(docs + 2 * a)
            return np.log(df + a) - log_den, np.log(docs + a - df) - log_den

    def entry_scores(self, counts: np.ndarray, scale: float) -> np.ndarray:
        log_p, log_q = self._probs(counts * scale, (self.totals * scale)[:, None])
        return log_p - log_q

    def row_constant(self, scale: float) -> np.ndarray:
        """``Σ_w log(1 - P(w | c))`` over the seen ids, in ascending id order: O(seen ids)."""
        key = ("absent", scale)
        if key not in self._cache:
            docs = self.totals * scale
            _, log_q = self._probs(self.table.sorted_counts() * scale, docs[:, None])
            const = log_q.sum(axis=1)
            if self.vocab_size is not None:  # never-seen words of a fixed vocabulary
                const += (self.vocab_size - self.n_seen) * self._probs(0.0, docs)[1]
            self._cache[key] = const
        return self._cache[key]


class Complement(TokenTable):
    """Complement naive Bayes (Rennie, Shih, Teevan & Karger 2003).

    ``θ_ci = (n_~c,i + α) / (n_~c + α·V)`` from the counts of every *other* class; the
    weight of a word is ``-log θ_ci``, or with ``norm`` ``log θ_ci / Σ_i log θ_ci`` (the
    weight normalisation of the paper, §3.2). No class prior, as in the paper.
    """

    kind = "complement"

    def __init__(self, n_features: int, alpha: float | str = 1.0, fold: bool = True,
                 vocab_size: int | None = None, m: float | None = None, norm: bool = False,
                 **transform) -> None:
        super().__init__(n_features, alpha, fold, vocab_size, m, **transform)
        self.norm = norm

    def params(self) -> dict:
        return {**super().params(), "norm": self.norm}

    def _log_theta(self, counts: np.ndarray, scale: float) -> np.ndarray:
        comp = (counts.sum(axis=0, keepdims=True) - counts) * scale
        comp_tot = ((self.totals.sum() - self.totals) * scale)[:, None]
        return self._smoothed_log(comp, comp_tot, self.vocabulary, scale)

    def _evidence_counts(self, counts: np.ndarray, totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The complement counts, which ``alpha`` smooths here."""
        return counts.sum(axis=0, keepdims=True) - counts, totals.sum() - totals

    def _normaliser(self, scale: float) -> np.ndarray:
        key = ("norm", scale)
        if key not in self._cache:
            total = self._log_theta(self.table.sorted_counts(), scale).sum(axis=1)
            if self.vocab_size is not None:
                zero = np.zeros((len(self.totals), 1))
                total += (self.vocab_size - self.n_seen) * self._log_theta(zero, scale)[:, 0]
            self._cache[key] = total
        return self._cache[key]

    def entry_scores(self, counts: np.ndarray, scale: float) -> np.ndarray:
        log_theta = self._log_theta(counts, scale)
        if self.norm:
            return log_theta / self._normaliser(scale)[:, None]
        return -log_theta


def sparse_from_state(state: dict, n_classes: int, n_features: int) -> SparseCounts:
    """The seen-id counts of a token state: ``cols`` (ids) and ``counts`` (classes, len(cols)) as
    written by every release, or a dense ``counts`` (classes, n_features) without ``cols``,
    converted to its nonzero columns."""
    counts = np.asarray(state["counts"], np.float64)
    if "cols" in state:
        ids = np.asarray(state["cols"], np.int64).reshape(-1)
    elif counts.ndim == 2 and counts.shape[1] == n_features:
        ids = np.flatnonzero(counts.any(axis=0))
        counts = counts[:, ids]
    else:
        raise ModelError(f"token state: counts of shape {counts.shape} without 'cols'")
    if counts.size != n_classes * len(ids):
        raise ModelError(f"token state: counts of shape {counts.shape} for {n_classes} classes "
                         f"and {len(ids)} ids")
    counts = counts.reshape(n_classes, len(ids))
    if len(ids) and (ids.min() < 0 or ids.max() >= n_features):
        raise ModelError(f"token state: ids outside [0, {n_features})")
    order = np.argsort(ids, kind="stable")  # ascending already when written by us
    if np.any(np.diff(ids[order]) == 0):
        raise ModelError("token state: repeated ids")
    return SparseCounts.from_sorted(ids[order], counts[:, order])


def _offset_in(part: np.ndarray, whole: np.ndarray) -> int | None:
    """Where ``part`` starts in ``whole`` when it is a contiguous slice of it (a view of the same
    memory), else None.

    >>> a = np.arange(10); _offset_in(a[3:7], a), _offset_in(a[3:7].copy(), a), _offset_in(a[::2], a)
    (3, None, None)
    """
    owner = whole if whole.base is None else whole.base
    if part.base is not owner or part.dtype != whole.dtype or part.ndim != 1 or whole.ndim != 1 \
            or not (part.flags.c_contiguous and whole.flags.c_contiguous):
        return None
    at, rest = divmod(part.ctypes.data - whole.ctypes.data, whole.itemsize)
    return at if not rest and 0 <= at and at + len(part) <= len(whole) else None


def _entry_names(batch: Batch, fold: bool) -> list[str]:
    """Readable names of a one-event batch's entries, in ``fold_fields`` order."""
    names = ["tok:" + w for w in (batch.words[0] if batch.words else [])]
    if fold:
        for field, column in batch.categorical.items():
            if column[0] is not None:
                names.append(f"{field}={column[0]}")
        for field, column in batch.numeric.items():
            if not np.isnan(column[0]):
                names.append(str(field))
    return names
