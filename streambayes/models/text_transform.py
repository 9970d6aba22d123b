"""Text transforms of Rennie, Shih, Teevan & Karger (2003, "Tackling the poor assumptions of
naive Bayes text classifiers", §4), as streaming options of the token components:

- ``tf="log"``: sublinear term frequency ``log(1 + tf)`` (``tf`` = occurrences in the document)
- ``tf="sublinear"``: scikit-learn's ``sublinear_tf``, ``1 + log(tf)`` (``tf`` itself below 1, where
  the logarithm would fall under it: continuous and increasing, never negative)
- ``idf=True``: ``log(N / df)`` (Rennie's), ``idf="smooth"``: ``log((1 + N) / (1 + df)) + 1``
  (scikit-learn's default), where ``df`` are **streaming** (weighted) document frequencies over
  the same token ids and ``N`` the (weighted) number of documents. :class:`DocFreq` keeps them:
  mergeable (add), decayable (scale), in snapshots. A batch being learned counts in its own
  ``df`` first, so one ``learn_many`` over a corpus is exactly the batch transform; prediction uses
  the current ``df``; an id no document has carried weighs 0
- ``length_norm="l2"``: each document's weights divided by their Euclidean norm

The component adds the transformed weights where it would add counts: the per-class sums stay the
persisted statistic, next to ``df``.

>>> import numpy as np
>>> from streambayes.features import SparseRows
>>> rows = SparseRows(np.array([0, 3, 4]), np.array([7, 9, 7, 9]), np.ones(4))
>>> df = DocFreq()
>>> df.learn(collapse(rows, 16), np.ones(2))
>>> df.n_docs, df.table.gather(np.array([7, 9])).tolist()
(2.0, [[1.0, 2.0]])
>>> transform(collapse(rows, 16), "log", df, True, "l2").values.round(6).tolist()
[1.0, 0.0, 0.0]
"""

from __future__ import annotations

import numpy as np

from streambayes.errors import ModelError
from streambayes.features import SparseRows
from streambayes.stats import SparseCounts

TF_OPTIONS = (None, "log", "sublinear")
IDF_OPTIONS = (False, True, "smooth")
NORM_OPTIONS = (None, "l2")


def check_transform(tf, idf, length_norm) -> tuple:
    """Validated ``(tf, idf, length_norm)``."""
    if tf not in TF_OPTIONS:
        raise ModelError(f"tf must be one of {TF_OPTIONS}, got {tf!r}")
    if not any(idf is o or (isinstance(o, str) and idf == o) for o in IDF_OPTIONS):
        raise ModelError(f"idf must be one of {IDF_OPTIONS}, got {idf!r}")
    if length_norm not in NORM_OPTIONS:
        raise ModelError(f"length_norm must be one of {NORM_OPTIONS}, got {length_norm!r}")
    return tf, idf, length_norm


def collapse(rows: SparseRows, n_features: int) -> SparseRows:
    """One entry per (row, id) with the values summed (ids ascending within a row)."""
    r = rows.row_ids()
    keys, inverse = np.unique(r * np.int64(n_features) + rows.indices, return_inverse=True)
    vals = np.bincount(inverse.reshape(-1), rows.values, minlength=len(keys))
    out_rows = keys // n_features
    indptr = np.zeros(rows.n + 1, np.int64)
    np.cumsum(np.bincount(out_rows, minlength=rows.n), out=indptr[1:])
    return SparseRows(indptr, keys % n_features, vals)


class DocFreq:
    """Weighted document frequency per token id (ids seen so far) and the weighted document count."""

    def __init__(self) -> None:
        self.table = SparseCounts(n_classes=1)
        self.n_docs = 0.0

    def learn(self, rows: SparseRows, w: np.ndarray) -> None:
        """Count each document of collapsed ``rows`` (weights ``w``) in the ``df`` of its ids."""
        r = rows.row_ids()
        pos = rows.values > 0
        self.table.add(np.zeros(int(pos.sum()), np.int64), rows.indices[pos], w[r[pos]])
        self.n_docs += float(np.sum(w))

    def idf(self, ids: np.ndarray, kind) -> np.ndarray:
        df = self.table.gather(ids)[0] if len(self.table) else np.zeros(len(ids))
        n = self.n_docs
        with np.errstate(divide="ignore", invalid="ignore"):
            if kind == "smooth":
                out = np.log((1.0 + n) / (1.0 + df)) + 1.0
            else:
                out = np.log(n / df)
        out[df <= 0] = 0.0
        return out

    def scale(self, factor: float) -> None:
        self.table.scale(factor)
        self.n_docs *= factor

    def merge(self, other: DocFreq, factor: float) -> None:
        self.table.merge(other.table, np.zeros(1, np.int64), factor)
        self.n_docs += other.n_docs * factor

    def to_state(self) -> dict:
        return {"ids": self.table.index.ids.astype(np.int64), "df": self.table.sorted_counts()[0],
                "n_docs": self.n_docs}

    @classmethod
    def from_state(cls, state: dict) -> DocFreq:
        d = cls()
        ids = np.asarray(state["ids"], np.int64).reshape(-1)
        df = np.asarray(state["df"], np.float64).reshape(1, -1)
        try:
            d.table = SparseCounts.from_sorted(ids, df)
        except ValueError as exc:
            raise ModelError(f"document frequencies: {exc}") from None
        d.n_docs = float(state["n_docs"])
        return d

    @property
    def nbytes(self) -> int:
        return self.table.nbytes


def transform(rows: SparseRows, tf, df: DocFreq | None, idf, length_norm) -> SparseRows:
    """The weights of collapsed ``rows``: TF, then IDF (from ``df``), then length normalisation."""
    vals = rows.values
    if tf == "log":
        vals = np.log1p(np.maximum(vals, 0.0))
    elif tf == "sublinear":
        vals = np.maximum(vals, 0.0)
        big = vals > 1.0
        vals = np.where(big, 1.0 + np.log(np.where(big, vals, 1.0)), vals)
    if idf:
        vals = vals * df.idf(rows.indices, idf)
    if length_norm == "l2":
        norms = np.sqrt(np.bincount(rows.row_ids(), vals * vals, minlength=rows.n))
        vals = vals / np.repeat(np.where(norms > 0, norms, 1.0), np.diff(rows.indptr))
    return SparseRows(rows.indptr, rows.indices, np.asarray(vals, np.float64))
