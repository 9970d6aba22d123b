"""Waiting politely: exponential backoff that a stop request interrupts at once.

Loops use it when the broker is down, a topic does not exist yet or a delivery failed: no busy
loop (each wait at least ``first`` seconds, doubling up to ``cap``) and no hang on shutdown
(``stop.set()`` ends a wait immediately).

>>> import threading
>>> stop = threading.Event()
>>> b = Backoff(first=0.001, cap=0.004, stop=stop)
>>> [b.wait() for _ in range(3)], b.delay
([True, True, True], 0.004)
>>> stop.set(); b.wait()
False
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from streambayes.errors import NetworkUnavailable

logger = logging.getLogger(__name__)
_T = TypeVar("_T")


class Patience:
    """How long a run of retriable failures has lasted: started by the first failure, cleared by
    a success; :meth:`failed` says whether ``seconds`` have passed (``clock`` injectable).

    >>> now = [0.0]
    >>> p = Patience(120, clock=lambda: now[0])
    >>> p.failed(); now[0] = 119.0; p.failed(); now[0] = 121.0; p.failed()
    False
    False
    True
    >>> p.reset(); p.failed()
    False
    """

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self.since: float | None = None

    def failed(self) -> bool:
        """Note a failure; True once the failures have lasted ``seconds`` or more."""
        now = self.clock()
        if self.since is None:
            self.since = now
        return now - self.since >= self.seconds

    def elapsed(self) -> float:
        return 0.0 if self.since is None else self.clock() - self.since

    def reset(self) -> None:
        self.since = None


class Backoff:
    """Doubling waits from ``first`` to ``cap`` seconds; :meth:`reset` after a success."""

    def __init__(self, first: float = 0.1, cap: float = 5.0, stop: threading.Event | None = None) -> None:
        self.first = first
        self.cap = cap
        self.stop = stop or threading.Event()
        self.delay = first
        self.failures = 0

    def wait(self) -> bool:
        """Sleep the current delay (False at once if stop is set or gets set), then double it."""
        if self.stop.is_set():
            return False
        stopped = self.stop.wait(self.delay)
        self.failures += 1
        self.delay = min(self.cap, self.delay * 2)
        return not stopped

    def reset(self) -> None:
        self.delay = self.first
        self.failures = 0


def retrying(action: Callable[[], _T], what: str, errors: tuple[type[BaseException], ...],
             stop: threading.Event | None = None, *, first: float = 0.2, cap: float = 5.0,
             deadline: float | None = None) -> _T:
    """Call ``action`` until it does not raise one of ``errors``; back off between tries.

    Logs a warning on the first failure and every tenth after it. Raises
    :class:`~streambayes.errors.NetworkUnavailable` when stopped or after ``deadline`` seconds.
    """
    backoff = Backoff(first, cap, stop)
    start = time.monotonic()
    while True:
        try:
            return action()
        except errors as exc:
            if backoff.failures % 10 == 0:
                logger.warning("%s failed (%s); retrying", what, " ".join(str(exc).split()) or
                               type(exc).__name__)
            if deadline is not None and time.monotonic() - start >= deadline:
                raise NetworkUnavailable(f"{what}: gave up after {deadline:g} s: {exc}") from exc
            if not backoff.wait():
                raise NetworkUnavailable(f"{what}: stopped while retrying ({exc})") from exc
