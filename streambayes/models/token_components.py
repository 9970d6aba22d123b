"""Likelihood components over hashed tokens: multinomial, Bernoulli, complement.

Each keeps a dense (classes × 2^k) table of weighted counts, the per-class totals and
the set of buckets ever seen. The vocabulary ``V`` in the smoothing denominator is the
number of buckets seen so far, as in Mitchell's Table 6.2 ((n_k + 1) / (n + |Vocabulary|))
and River; tokens never seen in training are ignored at prediction. Give ``vocab_size``
to smooth over a fixed feature space instead (scikit-learn's convention).
"""

from __future__ import annotations

import numpy as np

from streambayes.features import Batch, FeatureHasher, SparseRows, fold_fields
from streambayes.stats import lidstone_log, m_estimate_log


class TokenTable:
    """Counts per (class, bucket), class totals, and which buckets were ever seen."""

    kind = "token"

    def __init__(self, n_features: int, alpha: float = 1.0, fold: bool = True,
                 vocab_size: int | None = None, m: float | None = None) -> None:
        self.n_features, self.alpha, self.fold = n_features, alpha, fold
        self.vocab_size, self.m = vocab_size, m
        self.hasher = FeatureHasher(n_features)
        self.counts = np.zeros((0, 0))  # (classes, n_features) once the first token arrives
        self.totals = np.zeros(0)
        self.seen = np.zeros(n_features, bool)
        self.n_seen = 0
        self._cache: dict = {}

    def params(self) -> dict:
        return {"n_features": self.n_features, "alpha": self.alpha, "fold": self.fold,
                "vocab_size": self.vocab_size, "m": self.m}

    @property
    def vocabulary(self) -> int:
        return self.vocab_size if self.vocab_size is not None else self.n_seen

    def entries(self, batch: Batch) -> SparseRows:
        return fold_fields(batch, self.hasher) if self.fold else batch.tokens

    def check(self, batch: Batch, n_classes: int | None = None) -> None:
        """Raise FeatureError for a batch this table cannot learn (negative counts)."""
        if self.fold and (batch.numeric or batch.categorical):
            self.entries(batch)

    def _allocate(self) -> None:
        """The dense (classes, n_features) table, made when the first token arrives (a model that
        never sees text — e.g. ``nb`` on categorical data — never pays for it)."""
        if not self.counts.shape[1]:
            self.counts = np.zeros((len(self.totals), self.n_features))

    def _gather(self, idx: np.ndarray) -> np.ndarray:
        """Counts of the buckets ``idx`` for every class (a new array)."""
        if not self.counts.shape[1]:
            return np.zeros((len(self.totals), len(idx)))
        return self.counts.take(idx, axis=1)

    def grow_classes(self, k: int) -> None:
        extra = k - len(self.totals)
        self.counts = np.vstack([self.counts, np.zeros((extra, self.counts.shape[1]))])
        self.totals = np.pad(self.totals, (0, extra))
        self._cache.clear()

    def _add(self, cls: np.ndarray, buckets: np.ndarray, vals: np.ndarray, positive) -> None:
        """Add ``vals`` at (class, bucket) in stream order and mark the buckets seen."""
        if len(buckets):
            self._allocate()
            np.add.at(self.counts.reshape(-1), cls * self.n_features + buckets, vals)
        fresh = np.unique(buckets[positive & ~self.seen[buckets]])
        self.seen[fresh] = True
        self.n_seen += len(fresh)
        self._cache.clear()

    def learn(self, batch: Batch, rows: np.ndarray, w: np.ndarray, raw: np.ndarray | None = None) -> None:
        sr = self.entries(batch)
        r = sr.row_ids()
        vals = sr.values * w[r]
        self._add(rows[r], sr.indices, vals, sr.values > 0)
        np.add.at(self.totals, rows[r], vals)

    def learn_buckets(self, c: int, buckets: np.ndarray, w: float) -> None:
        """One event of plain tokens (value 1 each) for class ``c``: the same additions, in the
        same order, as :meth:`learn` makes for it, without building a batch."""
        if len(buckets):
            self._allocate()
            np.add.at(self.counts[c], buckets, w)
        total = float(self.totals[c])
        for _ in range(len(buckets)):
            total += w  # one addition per occurrence, as np.add.at does in learn()
        self.totals[c] = total
        fresh = buckets[~self.seen[buckets]]
        if len(fresh):
            fresh = np.unique(fresh)
            self.seen[fresh] = True
            self.n_seen += len(fresh)
        self._cache.clear()

    def score_buckets(self, buckets: np.ndarray, scale: float) -> np.ndarray:
        """Per-class log-likelihood of one event of plain tokens."""
        if self.vocab_size is None:
            buckets = buckets[self.seen[buckets]]
        if not len(buckets) or self.vocabulary == 0:
            return np.zeros(len(self.totals))
        return self.entry_scores(buckets, scale).sum(axis=1) + self._const(scale)

    def _const(self, scale: float):
        const = self.row_constant(scale)
        return 0.0 if const is None else const

    def scale(self, factor: float) -> None:
        self.counts *= factor
        self.totals *= factor
        self._cache.clear()

    def merge(self, other: TokenTable, class_map: np.ndarray, factor: float) -> None:
        if other.counts.shape[1]:
            self._allocate()
            np.add.at(self.counts, class_map, other.counts * factor)
        np.add.at(self.totals, class_map, other.totals * factor)
        self.seen |= other.seen
        self.n_seen = int(np.count_nonzero(self.seen))
        self._cache.clear()

    def _smoothed_log(self, counts: np.ndarray, totals: np.ndarray, n_values: int) -> np.ndarray:
        if self.m is not None:
            return m_estimate_log(counts, totals, self.m, 1.0 / max(n_values, 1))
        return lidstone_log(counts, totals, n_values, self.alpha)

    def _known(self, sr: SparseRows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, buckets, values) of the entries that count at prediction."""
        r, idx, vals = sr.row_ids(), sr.indices, sr.values
        if self.vocab_size is None:
            keep = self.seen[idx]
            r, idx, vals = r[keep], idx[keep], vals[keep]
        return r, idx, vals

    def entry_scores(self, idx: np.ndarray, scale: float) -> np.ndarray:
        """Per-class score of one occurrence of each bucket, shape (classes, len(idx))."""
        raise NotImplementedError

    def row_constant(self, scale: float) -> np.ndarray | None:
        """A per-class term added to every row (e.g. Bernoulli's absent features)."""
        return None

    def log_likelihood(self, batch: Batch, scale: float) -> np.ndarray:
        k = len(self.totals)
        out = np.zeros((batch.n, k))
        if self.vocabulary == 0:
            return out
        r, idx, vals = self._known(self._presence(batch))
        contrib = self.entry_scores(idx, scale) * vals
        for j in range(k):
            out[:, j] = np.bincount(r, contrib[j], minlength=batch.n)
        const = self.row_constant(scale)
        return out if const is None else out + const

    def _presence(self, batch: Batch) -> SparseRows:
        return self.entries(batch)

    def contributions(self, batch: Batch, scale: float) -> list[tuple[str, np.ndarray]]:
        """Per-class contribution of each distinct feature of a one-event batch."""
        if self.vocabulary == 0:
            return []
        by_bucket = dict(zip(self.entries(batch).indices.tolist(), _entry_names(batch, self.fold),
                             strict=True))
        sr = self._presence(batch)  # Bernoulli's reorders and collapses entries: name by bucket
        names = [by_bucket[b] for b in sr.indices.tolist()]
        keep = self.seen[sr.indices] if self.vocab_size is None else np.ones(len(names), bool)
        scores = self.entry_scores(sr.indices[keep], scale) * sr.values[keep]
        totals: dict[str, np.ndarray] = {}
        for name, col in zip(np.array(names, dtype=object)[keep], scores.T, strict=True):
            totals[name] = totals[name] + col if name in totals else col
        out = list(totals.items())
        const = self.row_constant(scale)
        if const is not None:
            out.append(("(absent words)", const))
        return out

    def to_state(self) -> dict:
        cols = np.flatnonzero(self.seen)
        return {"params": self.params(), "cols": cols, "counts": self.counts[:, cols].copy(),
                "totals": self.totals.copy()}

    @classmethod
    def from_state(cls, state: dict) -> TokenTable:
        t = cls(**state["params"])
        totals = np.array(state["totals"], np.float64)
        cols = np.asarray(state["cols"], np.int64)
        t.counts = np.zeros((len(totals), t.n_features if len(cols) else 0))
        t.counts[:, cols] = state["counts"]
        t.totals = totals
        t.seen[cols] = True
        t.n_seen = len(cols)
        return t

    def memory_bytes(self) -> int:
        return self.counts.nbytes + self.totals.nbytes + self.seen.nbytes


class Multinomial(TokenTable):
    """``log P(w | c) = log((n_cw + α) / (n_c + α·V))`` per occurrence (McCallum & Nigam 1998)."""

    kind = "multinomial"

    def score_buckets(self, buckets: np.ndarray, scale: float) -> np.ndarray:
        if self.m is not None or scale != 1.0 or self.alpha <= 0:
            return super().score_buckets(buckets, scale)
        if self.vocab_size is None:
            buckets = buckets[self.seen[buckets]]
        if not len(buckets):
            return np.zeros(len(self.totals))
        a = self.alpha
        logs = self._gather(buckets)
        logs += a
        np.log(logs, out=logs)
        return np.add.reduce(logs, axis=1) - len(buckets) * np.log(self.totals + a * self.vocabulary)

    def entry_scores(self, idx: np.ndarray, scale: float) -> np.ndarray:
        num = self._smoothed_log(self._gather(idx) * scale, (self.totals * scale)[:, None],
                                 self.vocabulary)
        return num


class Bernoulli(TokenTable):
    """Presence/absence of every vocabulary word: ``P(w | c) = (df_cw + α) / (N_c + 2α)``.

    ``totals`` holds the (weighted) number of documents per class; absent words contribute
    ``Σ_w log(1 - P(w | c))``, cached until the counts change.
    """

    kind = "bernoulli"

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

    def entry_scores(self, idx: np.ndarray, scale: float) -> np.ndarray:
        log_p, log_q = self._probs(self._gather(idx) * scale, (self.totals * scale)[:, None])
        return log_p - log_q

    def row_constant(self, scale: float) -> np.ndarray:
        key = ("absent", scale)
        if key not in self._cache:
            docs = self.totals * scale
            cols = np.flatnonzero(self.seen)
            _, log_q = self._probs(self._gather(cols) * scale, docs[:, None])
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

    def __init__(self, n_features: int, alpha: float = 1.0, fold: bool = True,
                 vocab_size: int | None = None, m: float | None = None, norm: bool = False):
        super().__init__(n_features, alpha, fold, vocab_size, m)
        self.norm = norm

    def params(self) -> dict:
        return {**super().params(), "norm": self.norm}

    def _log_theta(self, counts: np.ndarray, scale: float) -> np.ndarray:
        comp = (counts.sum(axis=0, keepdims=True) - counts) * scale
        comp_tot = ((self.totals.sum() - self.totals) * scale)[:, None]
        return self._smoothed_log(comp, comp_tot, self.vocabulary)

    def _normaliser(self, scale: float) -> np.ndarray:
        key = ("norm", scale)
        if key not in self._cache:
            cols = np.flatnonzero(self.seen)
            total = self._log_theta(self._gather(cols), scale).sum(axis=1)
            if self.vocab_size is not None:
                zero = np.zeros((len(self.totals), 1))
                total += (self.vocab_size - self.n_seen) * self._log_theta(zero, scale)[:, 0]
            self._cache[key] = total
        return self._cache[key]

    def entry_scores(self, idx: np.ndarray, scale: float) -> np.ndarray:
        log_theta = self._log_theta(self._gather(idx), scale)
        if self.norm:
            return log_theta / self._normaliser(scale)[:, None]
        return -log_theta


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
