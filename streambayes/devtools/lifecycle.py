"""The process life cycle shared by the local test brokers: stop, kill, restart, pause, resume."""

from __future__ import annotations

import signal
import subprocess


class BrokerProcess:
    """A broker run as one child process (``self.process``), started by the subclass's ``start``.

    ``STOP_SECONDS`` is how long ``stop`` waits after SIGTERM before SIGKILL, ``START_SECONDS``
    how long ``restart`` gives ``start``."""

    STOP_SECONDS = 30.0
    START_SECONDS = 120.0
    process: subprocess.Popen | None = None

    def start(self, timeout: float) -> None:  # pragma: no cover - each broker has its own
        raise NotImplementedError

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM (a controlled shutdown), then SIGKILL after ``timeout`` s; the exit status."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGCONT)  # a paused process cannot act on SIGTERM
        self.process.terminate()
        try:
            return self.process.wait(self.STOP_SECONDS if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            return self.kill()

    def kill(self) -> int | None:
        """SIGKILL: the broker dies at once, as in a crash (its log directory, if any, stays)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.kill()
        return self.process.wait()

    def restart(self, *, kill: bool = False, timeout: float | None = None) -> None:
        """Stop (SIGTERM, or SIGKILL with ``kill=True``) and start the same broker again."""
        if kill:
            self.kill()
        else:
            self.stop()
        self.start(self.START_SECONDS if timeout is None else timeout)

    def pause(self) -> None:
        """SIGSTOP: the broker stalls (connections stay open, nothing is answered)."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)
