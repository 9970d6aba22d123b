"""Compiled per-event kernels for AODE (the ``fast`` extra: numba), with the numpy path as the
fallback where numba is not installed.

One event's AODE likelihood is some 20 numpy calls on (classes × n × n) arrays, and adding the
event to the dense estimates some 12 more; at a microsecond or more per call, that is most of the
time of River's loop (``predict_proba_one`` then ``learn_one``). Compiled, the two are loops of a
few hundred multiplications: a few µs together.

The kernels are compiled in memory at their first call (a second or two per process) and never
cached on disk: this layer does no I/O. ``import numba`` itself (some 0.7 s) waits for that
first call too.

>>> import numpy as np
>>> t = np.zeros((2, 2, 2)); kw = np.zeros((2, 2, 1))
>>> add_event(t, kw, np.zeros((2, 2)), np.zeros((2, 1)), np.zeros(1), np.zeros(2), np.zeros(2),
...           0, np.array([1]), np.array([0, 0]), 2.0)
True
>>> t[0].tolist(), kw[0].tolist()
([[0.0, 0.0], [0.0, 2.0]], [[0.0], [2.0]])
"""

from __future__ import annotations

import warnings

import numpy as np

ENABLED = True  # False: the numpy path always (the tests run both)


def likelihood(t, known_with, attr_total, value_total, alpha, alpha_values, alpha_joint, codes,
               attr_of, min_count, out) -> bool:
    """AODE's joint likelihood of each class, into ``out``, for the present codes of ``codes``
    (-1: missing), from the dense estimates: :meth:`AODETable.event_likelihood`'s products, in
    the same order. False (``out`` untouched) where no code is present or no parent is eligible
    (``value_total >= min_count``)."""
    g = np.empty(len(codes), np.int64)
    n = 0
    for v in codes:
        if v >= 0:
            g[n] = v
            n += 1
    eligible = 0
    for i in range(n):
        if value_total[g[i]] >= min_count:
            eligible += 1
    if eligible == 0:
        return False
    for c in range(t.shape[0]):
        total = 0.0
        for i in range(n):
            gi = g[i]
            if not value_total[gi] >= min_count:
                continue
            term = 1.0
            for j in range(n):
                aj = attr_of[g[j]]
                term *= (t[c, gi, g[j]] + alpha) / (known_with[c, gi, aj] + alpha_values[aj])
            ai = attr_of[gi]
            term *= known_with[c, gi, ai] + alpha_values[ai]
            term /= attr_total[ai] + alpha_joint[ai]
            total += term
        out[c] = total
    return True


def add_event(t, known_with, single, class_attr, attr_total, value_total, class_total, c, codes,
              attr_of, w) -> bool:
    """One event of class ``c`` and weight ``w`` added to the dense estimates, in place (the
    present codes of ``codes``; -1 missing): :meth:`Derived.add_event`'s updates. True."""
    for x in codes:
        if x < 0:
            continue
        a = attr_of[x]
        for y in codes:
            if y >= 0:
                t[c, x, y] += w
                known_with[c, x, attr_of[y]] += w
        single[c, x] += w
        class_attr[c, a] += w
        attr_total[a] += w
        value_total[x] += w
    class_total[c] += w
    return True


_compiled: tuple | None = None
_missing = False  # numba is not installed, or could not compile: the numpy path


def kernels() -> tuple | None:
    """``(likelihood, add_event)`` compiled, or None: numba missing or ``ENABLED`` off."""
    global _compiled, _missing
    if not ENABLED or _missing:
        return None
    if _compiled is None:
        try:
            import numba

            jit = numba.njit(cache=False, nogil=False)  # the GIL held: no other thread runs while
            # a kernel reads or changes the estimates
            _compiled = (jit(likelihood), jit(add_event))
        except Exception as exc:  # noqa: BLE001 (a numba that is there but broken: numpy's path)
            _missing = True
            if not (isinstance(exc, ModuleNotFoundError) and exc.name in ("numba", "llvmlite")):
                warnings.warn(f"numba cannot be used ({type(exc).__name__}: {exc}); AODE per event "
                              "takes numpy's path", RuntimeWarning, stacklevel=3)
            return None
    return _compiled


def call(kernel, *args):
    """``kernel(*args)``; None where it cannot compile (numba's errors come before the kernel
    runs, so nothing is half done; then warned once, and the numpy path from now on). Any other
    error of a kernel already compiled is raised."""
    global _missing
    try:
        return kernel(*args)
    except Exception as exc:
        if kernel.signatures and not _numba_error(exc):
            raise
        _missing = True
        warnings.warn(f"numba could not compile the AODE kernels ({exc}); using numpy",
                      RuntimeWarning, stacklevel=3)
        return None


def _numba_error(exc: Exception) -> bool:
    try:
        from numba.core.errors import NumbaError
    except Exception:  # noqa: BLE001
        return False
    return isinstance(exc, NumbaError)
