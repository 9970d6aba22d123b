"""The component that owns the semi-naive statistics: attribute codes, class counts and the
class × value × value table, learned online and merged exactly.

Numeric attributes are binned once their first values, of total weight ``warmup`` (stream order;
a weight-w event counts as w events), fix the edges.
Until then each event carrying such an attribute is kept in that attribute's buffer; when the
edges are fixed the buffer is replayed, adding every pair of the attribute with the values
coded by then. So each pair of an event is counted exactly once, as soon as both of its values
have codes, whatever the batch boundaries: learn_many == learn_one, and merging two shards gives
the counts of the sequential stream (the edges too, while neither shard had fixed them).
"""

from __future__ import annotations

from collections import Counter
from operator import itemgetter

import numpy as np

from streambayes.errors import FeatureError, ModelError
from streambayes.features import Batch
from streambayes.features.discretize import equal_frequency_edges
from streambayes.models.seminaive.attributes import NUM, Attributes, _present
from streambayes.stats import PairCounts

DENSE_CACHE = 8 * 2**20  # bytes of a dense table derived from the counts for prediction
PENDING = 1024  # events learned one at a time that wait, at most, to be added to the pair counts


class AttributeTable:
    """Learned statistics shared by SPODE, AODE, TAN and kDB; subclasses add the likelihood."""

    kind = "pairs"

    def __init__(self, alpha: float = 1.0, bins: int = 5, warmup: int = 100, max_values: int = 1000,
                 schema: list | None = None, edges: dict | None = None,
                 max_bytes: int = 512 * 2**20, missing: str = "skip") -> None:
        if warmup < 1 or bins < 2:
            raise ModelError(f"need warmup >= 1 and bins >= 2, got warmup={warmup}, bins={bins}")
        self.alpha, self.bins, self.warmup = alpha, bins, warmup
        self.max_values, self.schema, self.edges, self.max_bytes = max_values, schema, edges, max_bytes
        self.missing = missing
        self.attrs = Attributes(schema, max_values, edges, missing)
        self._pending: list = []  # events learned one at a time, not yet in the pair counts
        self.pairs = PairCounts(max_bytes)
        self.class_counts = np.zeros(0)
        self.buffers: dict[int, list] = {}  # numeric attribute without edges → [class, w, raw]
        self._totals: dict[int, list] = {}  # derived from buffers, see _buffer_totals
        self.version = 0  # changes whenever the statistics do (keys derived caches)

    def __getstate__(self) -> dict:  # the running totals are derived: never pickled
        return {**self.__dict__, "_totals": {}}

    def __setstate__(self, state: dict) -> None:  # (older pickles have none)
        self.__dict__.update({"_totals": {}, **state})

    @property
    def pairs(self) -> PairCounts:
        """The pair counts, with every event learned by :meth:`learn_event` added."""
        if self._pending:
            self._flush()
        return self._pairs

    @pairs.setter
    def pairs(self, value: PairCounts) -> None:
        self._pairs = value

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        d = len(self.attrs.names)
        codes = np.full((len(pending), d), -1, np.int64)
        for i, (_, row, _) in enumerate(pending):
            codes[i, :len(row)] = row
        rows = np.array([p[0] for p in pending], np.int64)
        self.add_events(rows, codes, np.array([p[2] for p in pending], np.float64))

    def learn_event(self, c: int, codes: list, w: float) -> bool:
        """Count one event of known class ``c`` whose values all have codes (``codes`` by
        attribute, -1 missing), without the batch machinery: its pairs wait in a buffer that
        any reader of :attr:`pairs` adds first (so the counts are those of ``learn``), and the
        dense estimates of the last prediction are updated in place. False (nothing changed)
        when this table cannot (its warm-up buffers, or the bound): the caller takes ``learn``."""
        if self.buffers or not self.per_event or self._pairs.n_codes < self.attrs.n_codes:
            return False  # (codes the counts do not cover yet: learn() grows them first)
        present = len(codes) - codes.count(-1)  # (codes are -1 or >= 0)
        new = (len(self._pending) + 1) * self._pairs.entries_per_event(present)
        if self._pairs.bytes_after(len(self.class_counts), self.attrs.n_codes, new) > self.max_bytes:
            return False
        self._pending.append((c, codes, w))
        if len(self._pending) >= PENDING:
            self._flush()
        self.class_counts[c] += w
        self.version += 1
        self.after_event(c, codes, w)
        return True

    per_event = True  # hook: False where more than the pairs are counted per event

    def after_event(self, c: int, codes: list, w: float) -> None:
        """Hook: keep derived estimates in step with one learned event."""

    def params(self) -> dict:
        return {"alpha": self.alpha, "bins": self.bins, "warmup": self.warmup,
                "max_values": self.max_values, "schema": self.schema, "edges": self.edges,
                "max_bytes": self.max_bytes, "missing": self.missing}

    # -- learning ---------------------------------------------------------------------------
    def check(self, batch: Batch, n_classes: int | None = None) -> None:
        """Refuse (before any change) a batch with unknown attributes, or whose new classes,
        values and value combinations could make the stored counts outgrow ``max_bytes``: the
        bound assumes every combination of the batch (and of the warm-up events its new bins
        replay) is new, so what is stored never passes ``max_bytes``."""
        self.attrs.check(batch)
        self.attrs.check_values(batch)
        k = max(n_classes or 0, len(self.class_counts), 1)
        n = self._codes_after(batch)
        if n >= 2**self.code_bits or k >= 2**self.class_bits:
            raise FeatureError(f"{k} classes and {n} attribute values do not fit the count keys "
                               f"(at most {2**self.code_bits - 1:,} values, {2**self.class_bits - 1:,} "
                               f"classes); lower max_values or bins")
        sizes = [(batch.n, len(self.attrs.columns(batch))), *self._buffered_sizes()]
        need = self.bytes_needed(k, n, sizes)
        if need > self.max_bytes:
            raise FeatureError(f"the batch's new classes, values and value combinations could need "
                               f"{need:,} bytes of counts ({k} classes, {n} attribute values), over "
                               f"max_bytes={self.max_bytes:,}; send smaller batches, lower max_values "
                               f"or bins, or raise max_bytes")

    code_bits, class_bits = 20, 23  # the key layout of the pair counts (stats/pairs.py)

    def bytes_needed(self, n_classes: int, n_codes: int, sizes: list[tuple[int, int]]) -> int:
        """Bytes of the counts at most, after events of ``sizes`` ((events, fields) each) with
        ``n_classes`` classes and ``n_codes`` codes (hook: more tables)."""
        new = sum(n * self.pairs.entries_per_event(d) for n, d in sizes)
        buffered = sum(n * (64 + 48 * d) for n, d in self._buffered_sizes())
        return self.pairs.bytes_after(n_classes, n_codes, new) + buffered

    def _take_buffer(self, a: int) -> list:
        """Remove attribute ``a``'s buffer (its running totals too) and return it."""
        self._totals.pop(a, None)
        return self.buffers.pop(a, [])

    def _buffered_sizes(self) -> list[tuple[int, int]]:
        """(events, fields) of the buffered events, those of one size together: each may be
        replayed once per attribute that buffers it."""
        for a in [a for a in self._totals if a not in self.buffers]:
            del self._totals[a]
        fields: Counter = Counter()
        for a in self.buffers:
            fields.update(self._buffer_totals(a)[1])
        return [(n, d) for d, n in sorted(fields.items())]

    def _buffer_totals(self, a: int) -> tuple[float, Counter]:
        """(raw weight, how many events of each number of fields) of attribute ``a``'s buffer,
        kept up to date as it grows rather than summed again at every event: a warm-up of N
        one-event batches would cost N² otherwise. A buffer only grows at its end, and only its
        last event changes in place (``_append``), so the events before it are added once. The
        weight is summed left to right, as ``np.cumsum`` does where a batch completes a warm-up
        (Python 3.12's ``sum`` of floats is compensated, which could differ in the last bit)."""
        records = self.buffers.get(a)
        if not records:
            return 0.0, Counter()
        t = self._totals.get(a)
        if t is None or t[0] is not records or t[1] > len(records) - 1:
            t = self._totals[a] = [records, 0, 0, Counter()]  # list, events added, weight, sizes
        upto = len(records) - 1
        if upto > t[1]:
            part = records[t[1]:upto]
            for r in part:
                t[2] += r[2]
            t[3].update(map(len, map(_RAW, part)))
            t[1] = upto
        last = records[-1]
        sizes = t[3].copy()
        sizes[len(last[3])] += 1
        return t[2] + last[2], sizes

    def _codes_after(self, batch: Batch) -> int:
        """An upper bound on the number of codes once ``batch`` is learned: its new categories
        (as far as ``max_values`` allows), and the bins of its attributes still in warm-up."""
        a, n = self.attrs, self.attrs.n_codes
        for name, kind, col in a.columns(batch):
            i = a.names.get(name)
            if kind == NUM:
                if i < 0 or a.edges[i] is None:
                    n += max(self.bins, len(a.given_edges.get(name, ())) + 1)
                continue
            distinct = set(col[_present(kind, col)].tolist())
            new = [v for v in distinct if i < 0 or a.values[i].get(v) < 0]
            n += min(len(new), a.max_values - (len(a.values[i]) if i >= 0 else 0))
        return n

    def dense_fits(self, power: int) -> bool:
        """Whether a dense classes × codes^power float table is small enough to derive for
        prediction (at most ``DENSE_CACHE`` bytes); else the counts are looked up sparsely."""
        return max(len(self.class_counts), 1) * self.attrs.n_codes**power * 8 <= DENSE_CACHE

    def grow_classes(self, k: int) -> None:
        self.class_counts = np.pad(self.class_counts, (0, k - len(self.class_counts)))
        self.pairs.grow(k, self.attrs.n_codes)
        self.version += 1

    def learn(self, batch: Batch, rows: np.ndarray, w: np.ndarray, raw: np.ndarray | None = None) -> None:
        """Count a batch; ``w`` are the stored (possibly decayed) weights, ``raw`` the events' own
        weights, which measure the warm-up (so decay does not move it)."""
        raw = w if raw is None else raw
        codes = self.attrs.encode(batch, learn=True)
        self.pairs.grow(len(self.class_counts), self.attrs.n_codes)
        self.version += 1  # new codes: derived caches must cover them
        self.before_learning(codes, rows, w)
        np.add.at(self.class_counts, rows, w)
        warm = {self.attrs.names.get(name): col for name, col in batch.numeric.items()
                if (~np.isnan(col)).any() and self.attrs.edges[self.attrs.names.get(name)] is None}
        if warm:
            self._learn_through_warmup(batch, rows, w, raw, codes, warm)
        else:
            self.add_events(rows, codes, w)
        self.version += 1

    def before_learning(self, codes: np.ndarray, rows: np.ndarray, w: np.ndarray) -> None:
        """Hook: called with the batch's codes before its counts are added (prequential scores)."""

    def add_events(self, rows: np.ndarray, codes: np.ndarray, w: np.ndarray) -> None:
        """Count the events' coded values (hook: a subclass counts more than the pairs)."""
        self.pairs.add(rows, codes, w)

    def add_replayed(self, events: list[tuple[int, int, np.ndarray, float]]) -> None:
        """Count replayed events ``(class, code, others, weight)``: each newly coded value ``code``
        with its ``others`` (hook: a subclass counts more than the pairs)."""
        self.pairs.add_pairs(events)

    def _learn_through_warmup(self, batch, rows, w, raw, codes, warm: dict) -> None:
        """Add the batch in segments that end where an attribute's warm-up completes."""
        start, n = 0, batch.n
        while start < n:
            cut, fixing = n - 1, []
            for a, col in warm.items():
                present = np.flatnonzero(~np.isnan(col[start:])) + start
                need = self.warmup - self._buffer_totals(a)[0]
                reach = np.searchsorted(np.cumsum(raw[present]), need, side="left")
                if reach < len(present):  # the event whose weight completes the warm-up
                    t = int(present[reach])
                    cut, fixing = (t, [a]) if t < cut else (cut, fixing + [a] * (t == cut))
            seg = slice(start, cut + 1)
            self.add_events(rows[seg], codes[seg], w[seg])
            self._buffer(batch, rows, w, raw, seg, warm)
            for a in sorted(fixing):
                self._fix(a)
                binned = self.attrs.encode_column(a, NUM, warm.pop(a)[cut + 1:], learn=True)
                codes[cut + 1:, a] = np.where(binned >= 0, binned, codes[cut + 1:, a])
            start = cut + 1

    def _buffer(self, batch: Batch, rows, w, raw_w, seg: slice, warm: dict) -> None:
        cols = [(name, col, _present(kind, col)) for name, kind, col in self.attrs.columns(batch)]
        for i in range(seg.start, seg.stop):
            holders = [a for a, col in warm.items() if not np.isnan(col[i])]
            if holders:
                raw = [[name, _plain(col[i])] for name, col, present in cols if present[i]]
                for a in holders:
                    _append(self.buffers.setdefault(a, []), [int(rows[i]), float(w[i]), float(raw_w[i]), raw])

    def _fix(self, a: int) -> None:
        """Fix attribute ``a``'s edges from the buffered values up to the one that completed the
        warm-up (stream order, weighted), then replay the whole buffer."""
        records = self._take_buffer(a)
        name = self.attrs.names.values[a]
        weights = np.array([r[2] for r in records])
        upto = int(np.searchsorted(np.cumsum(weights), self.warmup, side="left")) + 1
        values = np.array([dict(raw)[name] for *_, raw in records[:upto]], np.float64)
        used = weights[:upto].copy()  # the completing event counts only for what was still needed,
        used[-1] = max(self.warmup - used[:-1].sum(), 0.0)  # so weight 2 == the event twice
        self._adopt(a, equal_frequency_edges(values, self.bins, used), records)

    def _adopt(self, a: int, edges: np.ndarray, records: list) -> None:
        self.attrs.fix_edges(a, edges)
        self.pairs.grow(len(self.class_counts), self.attrs.n_codes)
        self._replay(a, records)

    def _replay(self, a: int, records: list, skip: frozenset = frozenset()) -> None:
        """Count the pairs of the buffered events ``records`` that involve attribute ``a`` (not
        those with the attributes in ``skip``, whose own replay will count them), in one addition."""
        name, events = self.attrs.names.values[a], []
        for c, w, _, raw in records:
            code, others = -1, []
            for field, value in raw:
                b = self.attrs.names.get(field)
                g = self.attrs.code_of(b, value) if b >= 0 and b not in skip else -1
                if field == name:
                    code = g
                elif g >= 0:
                    others.append(g)
            others += [g for g in self.attrs.missing_codes({field for field, _ in raw})
                       if self.attrs.attr_of[g] not in skip]
            if code >= 0:
                events.append((c, code, np.array(others, np.int64), w))
        if events:
            self.add_replayed(events)

    def scale(self, factor: float) -> None:
        self.pairs.scale(factor)
        self.class_counts *= factor
        for records in self.buffers.values():
            for r in records:
                r[1] *= factor
        self.version += 1

    # -- merge --------------------------------------------------------------------------------
    def check_merge(self, other: AttributeTable) -> None:
        """Refuse, before any change, a merge past ``max_values`` (LimitError) or of an attribute
        binned with other edges (ModelError)."""
        self.attrs.check_merge(other.attrs)
        for ob, name in enumerate(other.attrs.names.values):
            a = self.attrs.names.get(name)
            if a >= 0:
                _same_edges(name, self.attrs.edges[a], other.attrs.edges[ob])

    def merge(self, other: AttributeTable, class_map: np.ndarray, factor: float) -> None:
        code_map = np.full(other.attrs.n_codes, -1, np.int64)
        pending = []
        for ob, name in enumerate(other.attrs.names.values):
            a = self._merge_attribute(other, ob, name, code_map)
            if ob in other.buffers:
                pending.append((a, [[int(class_map[c]), w * factor, rw, raw]
                                    for c, w, rw, raw in other.buffers[ob]]))
        self.merge_counts(other, class_map, code_map, factor)
        np.add.at(self.class_counts, class_map, other.class_counts * factor)
        self.attrs.dropped += other.attrs.dropped
        # Their buffered events: a pair of two attributes both binned here is counted once, by
        # the later one's replay; attributes not binned here take the events into their buffer.
        binned = [a for a, _ in pending if self.attrs.edges[a] is not None]
        for a, records in pending:
            if self.attrs.edges[a] is not None:
                self._replay(a, records, skip=frozenset(binned[binned.index(a) + 1:]))
            else:
                for record in records:
                    _append(self.buffers.setdefault(a, []), record)
        for a, _ in pending:
            if a in self.buffers and self._buffer_totals(a)[0] >= self.warmup:
                self._fix(a)
        self.merge_extra(other, class_map, factor)
        self.version += 1

    def merge_counts(self, other: AttributeTable, class_map: np.ndarray, code_map: np.ndarray,
                     factor: float) -> None:
        """Add ``other``'s counts: its class ``i`` is our ``class_map[i]``, its code ``g`` ours
        ``code_map[g]`` (-1: dropped). Hook: a subclass merges its other count tables here."""
        self.pairs.grow(len(self.class_counts), self.attrs.n_codes)
        self.pairs.merge(other.pairs, class_map, code_map, factor)

    def merge_extra(self, other: AttributeTable, class_map: np.ndarray, factor: float) -> None:
        """Hook for statistics a subclass keeps besides the counts."""

    def _merge_attribute(self, other: AttributeTable, ob: int, name, code_map: np.ndarray) -> int:
        mine = self.attrs
        a = mine.add_attribute(name)
        theirs = other.attrs.edges[ob]
        if theirs is not None:
            if mine.edges[a] is None:  # their edges win; our buffer is binned with them
                self._adopt(a, theirs, self._take_buffer(a))
            else:
                _same_edges(name, mine.edges[a], theirs)
        for local, value in enumerate(other.attrs.values[ob].values):
            mine_local = mine.add_value(a, value)
            if mine_local >= 0:
                code_map[other.attrs.gcodes[ob][local]] = mine.gcodes[a][mine_local]
        return a

    # -- state ----------------------------------------------------------------------------------
    def to_state(self) -> dict:
        attrs, order = self.attrs.canonical_order()
        a = self.attrs
        return {
            "params": self.params(),
            "class_counts": self.class_counts.copy(),
            "attributes": [{"name": a.names.values[i], "values": a.canonical_values(i),
                            "edges": None if a.edges[i] is None else a.edges[i].copy()} for i in attrs],
            **self.pairs.to_arrays(order),
            "buffers": [[a.names.values[i], [list(r) for r in self.buffers[i]]]
                        for i in attrs if i in self.buffers],
            "dropped": a.dropped,
            **self.extra_state(attrs),
        }

    def extra_state(self, attrs: list[int]) -> dict:
        return {}

    @classmethod
    def from_state(cls, state: dict):
        t = cls(**state["params"])
        t.class_counts = np.array(state["class_counts"], np.float64)
        for entry in state["attributes"]:
            a = t.attrs.add_attribute(entry["name"])
            for value in entry["values"]:  # categories and bin numbers, in their local order
                t.attrs.add_value(a, value)
            if entry["edges"] is not None:
                t.attrs.edges[a] = np.array(entry["edges"], np.float64)
        t.attrs.dropped = int(state["dropped"])
        k, g = len(t.class_counts), t.attrs.n_codes
        if "counts" in state:  # a snapshot of the dense table (before the sparse store)
            dense = np.array(state["counts"], np.float64).reshape(k, g, g)
            t.pairs = PairCounts.from_array(dense, t.max_bytes)
        else:
            t.pairs = PairCounts.from_arrays(np.array(state["singles"], np.float64).reshape(k, g),
                                             state["pair_codes"], np.array(state["pair_counts"], np.float64),
                                             t.max_bytes)
        t.buffers = {t.attrs.names.get(name): [[int(c), float(w), float(rw), [list(p) for p in raw]]
                                               for c, w, rw, raw in records]
                     for name, records in state["buffers"]}
        t.load_extra(state)
        return t

    def load_extra(self, state: dict) -> None:
        """Hook: restore what :meth:`extra_state` saved."""

    def memory_bytes(self) -> int:
        buffered = sum(n * (64 + 48 * d) for n, d in self._buffered_sizes())
        return self.pairs.memory_bytes() + self.attrs.memory_bytes() + self.class_counts.nbytes + buffered


def _same_edges(name: object, mine: np.ndarray | None, theirs: np.ndarray | None) -> None:
    """Refuse a merge of attribute ``name`` binned with other edges (either side unbinned: fine)."""
    if mine is not None and theirs is not None and not np.array_equal(mine, theirs):
        raise ModelError(f"cannot merge: attribute {name!r} has other bin edges "
                         f"({mine.tolist()} vs {theirs.tolist()})")


_RAW = itemgetter(3)  # the fields of a buffered event [class, w, raw w, raw]


def _append(buffer: list, record: list) -> None:
    """Append a buffered event; the same event again right after it just adds its weight, so a
    weight-2 event and the event twice leave the same buffer."""
    if buffer and buffer[-1][0] == record[0] and buffer[-1][3] == record[3]:
        buffer[-1][1] += record[1]
        buffer[-1][2] += record[2]
    else:
        buffer.append(record)


def _plain(value):
    """A JSON-able Python scalar from a column cell."""
    return value.item() if isinstance(value, np.generic) else value
