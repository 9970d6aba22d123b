"""A growable value index: value → dense code in order of first appearance.

Labels, categorical values and field names are discovered as they appear in the stream.
Learners merge by value, never by code, because two learners number values differently.

>>> ix = ValueIndex()
>>> ix.codes(["ham", "spam", "ham"]).tolist(), ix.values
([0, 1, 0], ['ham', 'spam'])
>>> ix.lookup(["spam", "eggs"]).tolist()
[1, -1]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from streambayes.errors import LimitError, ModelError

_JSON_SCALARS = (str, int, float, bool)


class ValueIndex:
    """Map JSON-scalar values (str, int, float, bool) to codes 0, 1, 2, … ."""

    def __init__(self, values: Iterable = ()) -> None:
        self.values: list = []
        self._codes: dict = {}
        for v in values:
            self.add(v)

    def __len__(self) -> int:
        return len(self.values)

    def __contains__(self, value: object) -> bool:
        return value in self._codes

    def add(self, value: object) -> int:
        code = self._codes.get(value)
        if code is None:
            if not isinstance(value, _JSON_SCALARS):
                raise ModelError(f"values must be str, int, float or bool, got {type(value).__name__}")
            code = self._codes[value] = len(self.values)
            self.values.append(value)
        return code

    def get(self, value: object) -> int:
        """The code of ``value``, or -1 if unseen."""
        return self._codes.get(value, -1)

    @property
    def table(self) -> Mapping:
        """value → code, read only (a per-event path looks values up without a call each)."""
        return self._codes

    def codes(self, values: Iterable) -> np.ndarray:
        """Codes of ``values``, adding the unseen ones."""
        values = values if isinstance(values, list) else list(values)
        out = list(map(self._codes.get, values))
        if None in out:
            out = [c if c is not None else self.add(v) for v, c in zip(values, out, strict=True)]
        return np.fromiter(out, np.int64, len(out))

    def lookup(self, values: Iterable) -> np.ndarray:
        """Codes of ``values`` without adding; -1 for unseen."""
        get = self._codes.get
        return np.fromiter((get(v, -1) for v in values), np.int64)

    def check_room(self, values: Iterable, limit: int, bound: str, what: str) -> int:
        """Raise :class:`LimitError` if adding ``values`` would make more than ``limit`` values
        (naming the first one that does not fit); else return how many there would be."""
        n = len(self.values)
        new: set = set()
        for v in values:
            if v not in self._codes and v not in new:
                if n + len(new) >= limit:
                    raise LimitError(bound, limit, v, f"{what} {v!r} would exceed {bound}={limit:,} "
                                     f"(the model has {n:,}; {len(new):,} other new ones come first)")
                new.add(v)
        return n + len(new)

    def absorb(self, other: ValueIndex) -> np.ndarray:
        """Add ``other``'s values; return where each of ``other``'s codes lands in ``self``."""
        return np.array([self.add(v) for v in other.values], np.int64)

    def to_state(self) -> list:
        return list(self.values)

    @classmethod
    def from_state(cls, values: list) -> ValueIndex:
        return cls(values)
