"""Synthetic data sets for tests and benchmarks."""

from __future__ import annotations

import numpy as np


def wide_stream(n: int = 226, n_classes: int = 24, n_attrs: int = 60, max_values: int = 150,
                typical: float = 0.9, missing: float = 0.05, seed: int = 0) -> tuple[list, list]:
    """Synthetic, audiology-like (no audiology/splice file is on this machine): ``n_classes``
    classes of skewed (Dirichlet 0.7) prior, ``n_attrs`` nominal attributes (every sixth with
    ``max_values`` values, the others 2-6); each class has a typical value per attribute, taken
    with probability ``typical``, else a uniform value; ``missing`` of the cells are empty.
    A dense class × value³ table for it would need ~35 GB.

    >>> xs, ys = wide_stream(n=5, n_attrs=7)
    >>> len(xs), len(xs[0]), ys[0].startswith("c")
    (5, 7, True)
    """
    rng = np.random.default_rng(seed)
    sizes = np.where(np.arange(n_attrs) % 6 == 0, max_values, rng.integers(2, 7, n_attrs))
    ys = rng.choice(n_classes, n, p=rng.dirichlet(np.full(n_classes, 0.7)))
    typ = np.stack([rng.integers(0, s, n_classes) for s in sizes], axis=1)
    other = np.stack([rng.integers(0, s, n) for s in sizes], axis=1)
    vals = np.where(rng.random((n, n_attrs)) < typical, typ[ys], other)
    miss = rng.random((n, n_attrs)) < missing
    xs = [{f"a{j:02d}": None if miss[i, j] else f"v{vals[i, j]}" for j in range(n_attrs)}
          for i in range(n)]
    return xs, [f"c{y}" for y in ys]
