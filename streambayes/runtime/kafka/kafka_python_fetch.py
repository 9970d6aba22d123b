"""kafka-python's fetching in a process of its own, beside a learner or a replay that reads
assigned partitions (:class:`FetchedSource`).

kafka-python is pure Python: turning a fetch response into records costs it about 10 us a record
in the caller's thread (varints, record objects), under the same interpreter lock as the learner's
own work, so a learner through kafka-python ran at about 0.6 of the client's raw consume rate. (The
confluent client does the same work in librdkafka's threads, outside the lock.) Here a helper
process (``python -m streambayes.runtime.kafka.kafka_python_fetch``) owns the fetching consumer
and sends the records over a socket pair as plain arrays (offsets, timestamps, lengths, then the
values and keys joined: no pickle), while the learner learns the previous batch on the other core.

- The learner's process stays the truth: it hands out records and counts their next offsets
  (:meth:`FetchedSource.positions`) exactly like :class:`~.kafka_python.AssignedSource`, which it
  extends (metadata, partitions added later, end offsets, lag commits are that class's, on its
  own consumer, which never fetches).
- Every assignment or seek starts a new *generation*: the helper is told where each partition
  starts, and records of an older generation still on their way are dropped, so a seek never
  hands out a stale record.
- Bound: the helper reads at most ``ahead`` batches (of up to ``batch`` records) before the
  learner has taken them, then waits (``STREAMBAYES_KAFKA_FETCH_AHEAD``, default 4 batches of
  2,000). ``0`` turns the helper off: the consumer then fetches in the learner's own process.
- The helper ends when the learner closes the source, and on its own when the learner's process
  is gone (the socket closes). A helper that dies is started again from the learner's positions,
  so nothing is lost or read twice; its warnings are logged by the learner's process.
"""

from __future__ import annotations

import json
import logging
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

from streambayes.errors import BrokerError, UsageError
from streambayes.runtime.kafka.kafka_python import (
    AssignedSource,
    assigned_options,
    wake_on_landed_fetch,
)
from streambayes.runtime.records.sources import Record
from streambayes.runtime.retry import Backoff

logger = logging.getLogger("streambayes.runtime.kafka.kafka_python")

_LENGTH = struct.Struct(">I")
_RECORDS, _LOG, _FATAL, _READY = b"R", b"L", b"F", b"K"
_READY_SECONDS = 30.0  # how long a new source waits for its helper to connect
DEFAULT_AHEAD = 4
_NO_TIME = -(2**63)  # a record without a timestamp (kafka-python says None)
DEFAULT_BATCH = 2000


# -- framing: a 4-byte length, then the payload ------------------------------------------------
def _send(sock: socket.socket, *parts: bytes) -> None:
    sock.sendall(_LENGTH.pack(sum(len(p) for p in parts)))
    for part in parts:
        sock.sendall(part)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            return None  # the other side is gone
        got += k
    return bytes(buf)


def _recv(sock: socket.socket) -> bytes | None:
    head = _recv_exact(sock, 4)
    return None if head is None else _recv_exact(sock, _LENGTH.unpack(head)[0])


def _readable(sock: socket.socket, timeout: float | None) -> bool:
    return bool(select.select([sock], [], [], timeout)[0])


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


# -- the record arrays -------------------------------------------------------------------------
def pack(partition: int, messages: Sequence[Any]) -> tuple[list, bytes]:
    """One partition's records as (header, bytes): offsets, timestamps and value lengths as
    int64 arrays, then the values joined; keys (when any) as lengths (-1: none) and joined.
    A value of None becomes empty bytes, as :class:`~.kafka_python.AssignedSource` makes it.

    >>> from types import SimpleNamespace as M
    >>> head, body = pack(3, [M(offset=7, timestamp=9, key=None, value=b"ab"),
    ...                       M(offset=8, timestamp=None, key=b"k", value=None)])
    >>> records, end = unpack(head, body, "t"); end == len(body)
    True
    >>> [(r.value, r.key, r.partition, r.offset, r.timestamp) for r in records]
    [(b'ab', None, 3, 7, 9), (b'', b'k', 3, 8, None)]
    """
    values = [m.value if m.value is not None else b"" for m in messages]
    keys = [m.key for m in messages]
    with_keys = any(k is not None for k in keys)
    stamps = array("q", [_NO_TIME if m.timestamp is None else m.timestamp for m in messages])
    parts = [array("q", [m.offset for m in messages]).tobytes(), stamps.tobytes(),
             array("q", map(len, values)).tobytes(), b"".join(values)]
    if with_keys:
        parts += [array("q", [-1 if k is None else len(k) for k in keys]).tobytes(),
                  b"".join(k for k in keys if k is not None)]
    return [partition, len(messages), with_keys], b"".join(parts)


def _split(blob: bytes, lengths: array, start: int) -> tuple[list, int]:
    out, at = [], start
    for n in lengths:
        if n < 0:
            out.append(None)
        else:
            out.append(blob[at:at + n])
            at += n
    return out, at


def unpack(head: Sequence[Any], body: bytes, topic: str,
           start: int = 0) -> tuple[list[Record], int]:
    """The records :func:`pack` packed from ``start`` in ``body``, and where they end."""
    partition, n, with_keys = head
    arrays = []
    for _ in range(3):
        a = array("q")
        a.frombytes(body[start:start + 8 * n])
        arrays.append(a)
        start += 8 * n
    offsets, stamps, lengths = arrays
    values, start = _split(body, lengths, start)
    keys: list = [None] * n
    if with_keys:
        key_lengths = array("q")
        key_lengths.frombytes(body[start:start + 8 * n])
        keys, start = _split(body, key_lengths, start + 8 * n)
    records = list(map(Record, values, keys, [topic] * n, [partition] * n, offsets,
                       [None if t == _NO_TIME else t for t in stamps]))
    return records, start



# -- the helper process ------------------------------------------------------------------------
class _Commands:
    """What the learner asked for: credits (batches it may be sent) and the latest assignment."""

    def __init__(self) -> None:
        self.credit = 0
        self.generation: int | None = None
        self.starts: dict[int, int | None] | None = None  # an assignment not applied yet

    def read(self, sock: socket.socket) -> bool:
        """Take one command; False on ``stop`` or when the learner is gone."""
        raw = _recv(sock)
        if raw is None:
            return False
        command = json.loads(raw)
        if command["op"] == "credit":
            self.credit += int(command["n"])
        elif command["op"] == "assign":
            self.generation = int(command["generation"])
            self.starts = {int(p): off for p, off in command["starts"].items()}
        return command["op"] != "stop"

    def ready(self) -> bool:
        return self.credit > 0 and self.generation is not None


def _helper(sock: socket.socket, consumer_class: Any = None) -> int:
    """Fetch for the learner on ``sock`` until it says stop or goes away (``consumer_class``:
    kafka-python's ``KafkaConsumer`` unless a test gives another)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaConfigurationError, KafkaError

    def log(level: int, message: str) -> None:
        _send(sock, _LOG, _json({"level": level, "message": message}))

    first = _recv(sock)
    if first is None:
        return 0
    config = json.loads(first)
    topic, batch = config["topic"], int(config["batch"])
    commands = _Commands()
    delay, consumer = 0.1, None
    while consumer is None:
        try:
            consumer = (consumer_class or KafkaConsumer)(**config["options"])
        except KafkaConfigurationError as exc:
            _send(sock, _FATAL, _json({"message": f"kafka-python refused the options: {exc}"}))
            return 1
        except (KafkaError, OSError) as exc:  # no broker yet: wait, hearing the learner meanwhile
            log(logging.WARNING, f"connect failed ({exc}); retrying")
            until = time.monotonic() + delay
            while _readable(sock, max(0.0, until - time.monotonic())):
                if not commands.read(sock):
                    return 0
            delay = min(5.0, delay * 2)
    wake_on_landed_fetch(consumer)
    _send(sock, _READY)
    delay = 0.1
    try:
        while True:
            while _readable(sock, 0.0 if commands.ready() else None):
                if not commands.read(sock):
                    return 0
            if commands.starts is not None:  # a new generation: assign and seek
                tps = {p: TopicPartition(topic, p) for p in commands.starts}
                consumer.assign(list(tps.values()))
                for p, offset in commands.starts.items():
                    if offset is None:
                        consumer.seek_to_beginning(tps[p])
                    else:
                        consumer.seek(tps[p], int(offset))
                commands.starts = None
            try:
                batches = consumer.poll(timeout_ms=200, max_records=batch)
            except KafkaError as exc:  # the client reconnects by itself: do not spin meanwhile
                log(logging.WARNING, f"poll of {topic} failed: {exc}")
                if _readable(sock, delay):
                    continue  # a command first
                delay = min(5.0, delay * 2)
                continue
            except Exception as exc:  # noqa: BLE001 (in the learner's process it ends the run)
                _send(sock, _FATAL, _json({"message": f"fetching {topic} failed: "
                                                      f"{type(exc).__name__}: {exc}"}))
                return 1
            delay = 0.1
            heads, bodies = [], []
            for tp, messages in batches.items():
                if messages:
                    head, body = pack(tp.partition, messages)
                    heads.append(head)
                    bodies.append(body)
            if heads:
                ends = {}
                for tp in consumer.assignment():
                    end = consumer.highwater(tp)
                    if end is not None:
                        ends[str(tp.partition)] = end
                header = _json({"generation": commands.generation, "parts": heads, "ends": ends})
                _send(sock, _RECORDS, _LENGTH.pack(len(header)), header, *bodies)
                commands.credit -= 1
    finally:
        consumer.close(autocommit=False)


def main(argv: list[str] | None = None) -> int:
    """``python -P -m streambayes.runtime.kafka.kafka_python_fetch FD``: the helper's entry."""
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the learner's to handle (own session anyway)
    sock = socket.socket(fileno=int(argv[0]))
    try:
        return _helper(sock)
    except OSError:  # the learner is gone, or shut the socket down to stop us
        return 0
    finally:
        sock.close()


def helper_command(fd: int) -> list[str]:
    """The helper's command line (``-P``: the working directory's modules are not imported)."""
    return [sys.executable, "-P", "-m", "streambayes.runtime.kafka.kafka_python_fetch", str(fd)]


# -- the learner's side ------------------------------------------------------------------------
_OFF = "STREAMBAYES_KAFKA_FETCH_AHEAD=0 fetches in the learner's process instead"
_MAX_DEATHS = 5  # helpers in a row that die before sending records: then an error


class FetchedSource(AssignedSource):
    """:class:`~.kafka_python.AssignedSource` whose records are fetched by a helper process.

    Same arguments, plus ``ahead`` (batches the helper may read ahead) and ``batch`` (records per
    batch). Options that do not survive JSON unchanged (a tuple, a callable, an SSL context)
    cannot reach a helper: such a source fetches in this process, as its base class does.
    Raises :class:`~streambayes.errors.BrokerError` when a helper cannot start, ends before it
    connects, reports a fatal error, or dies five times in a row without sending records.
    """

    def __init__(self, bootstrap: str, topic: str, *, ahead: int = DEFAULT_AHEAD,
                 batch: int = DEFAULT_BATCH, **kwargs: Any) -> None:
        if ahead < 1 or batch < 1:
            raise UsageError("the fetch helper reads ahead at least one batch of one record")
        self.ahead, self.batch = ahead, batch
        self._generation = 0
        self._buffer: list[Record] = []
        self._taken = 0
        self._ends: dict[int, int] = {}
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._assign: dict[str, Any] | None = None  # the assignment the helper is yet to hear
        self._credited = False  # the first credits go with the first poll: no fetch before
        self._ready = False  # the running helper has connected
        self._deaths = 0  # helpers in a row that died before sending records
        self._exit: int | None = None
        self._restarts = Backoff(0.2, 5.0)
        helper = assigned_options(bootstrap, kwargs.get("group"),
                                  kwargs.get("refresh_seconds", 5.0), kwargs.get("options"))
        self._helper_options: dict[str, Any] | None = None
        try:
            if json.loads(json.dumps(helper)) == helper:
                self._helper_options = helper
        except (TypeError, ValueError):
            pass
        if self._helper_options is None:
            logger.info("kafka-python options do not survive JSON: fetching in this process")
        try:
            super().__init__(bootstrap, topic, **kwargs)
            self._restarts.stop = self.stop
            if self._sock is not None:
                self._await_ready()
        except BaseException:
            self._stop_helper()
            if getattr(self, "_consumer", None) is not None:
                self._consumer.close(autocommit=False)
            raise

    # -- the helper ------------------------------------------------------------------------------
    def _start(self) -> None:
        parent, child = socket.socketpair()
        try:
            self._proc = subprocess.Popen(helper_command(child.fileno()), pass_fds=[child.fileno()],
                                          stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            parent.close()
            raise BrokerError(f"cannot start kafka-python's fetch helper: {exc} ({_OFF})") from exc
        finally:
            child.close()
        self._sock, self._credited, self._ready = parent, False, False
        logger.info("reading %s through a fetch helper process (pid %d)", self.topic,
                    self._proc.pid)
        try:
            _send(parent, _json({"topic": self.topic, "batch": self.batch,
                                 "options": self._helper_options}))
        except OSError as exc:  # its end shows at the next read
            logger.debug("fetch helper socket: %s", exc)

    def _await_ready(self) -> None:
        """Wait until the new helper has connected (as a client's constructor does), at most
        ``_READY_SECONDS``; its warnings meanwhile are logged, its fatal error raised."""
        deadline = time.monotonic() + _READY_SECONDS
        while self._sock is not None and not self._ready and not self.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return  # the broker is slow: the first poll waits on
            try:
                frame = _recv(self._sock) if _readable(self._sock, min(left, 0.5)) else b""
            except OSError:
                frame = None
            if frame == b"" and self._proc is not None and self._proc.poll() is None:
                continue
            if not frame:
                self._stop_helper()
                raise BrokerError(f"kafka-python's fetch helper ended (exit {self._exit}) before "
                                  f"it connected: see its error above ({_OFF})")
            self._other(frame)

    def _other(self, frame: bytes) -> None:
        """A helper's frame other than records: ready, a warning to log, or a fatal error."""
        kind, body = frame[:1], frame[1:]
        if kind == _READY:
            self._ready = True
        elif kind == _LOG:
            entry = json.loads(body)
            logger.log(entry["level"], "fetch helper: %s", entry["message"])
        elif kind == _FATAL:
            self._stop_helper()
            raise BrokerError(json.loads(body)["message"])

    def _assign_helper(self) -> None:
        """A new generation: the helper is to read the assigned partitions from this process's
        positions (told with the next poll); what it read ahead is dropped."""
        if self._helper_options is None or self.stop.is_set() or not self.assigned:
            return
        self._generation += 1
        self._buffer, self._taken = [], 0
        self._assign = {"op": "assign", "generation": self._generation,
                        "starts": {str(p): self._next.get(p) for p in self.assigned}}
        if self._sock is None:
            self._start()

    def _tell(self) -> None:
        """Send what the helper is yet to hear: the assignment, then the first credits."""
        try:
            if self._assign is not None:
                _send(self._sock, _json(self._assign))
                self._assign = None
            if not self._credited:
                _send(self._sock, _json({"op": "credit", "n": self.ahead}))
                self._credited = True
        except OSError as exc:  # its end shows at the next read
            logger.debug("fetch helper socket: %s", exc)

    def _lost(self, why: str) -> None:
        """The helper died: start another at this process's positions, after a backoff; an
        error if it had not even connected, or after five in a row without records."""
        ready = self._ready
        self._stop_helper()
        self._deaths += 1
        if not ready or self._deaths >= _MAX_DEATHS:
            raise BrokerError(f"kafka-python's fetch helper ended (exit {self._exit}) "
                              f"{'before it connected' if not ready else 'five times in a row'}: "
                              f"see its error above ({_OFF})")
        logger.warning("%s (exit %s); starting it again at the positions handed out", why,
                       self._exit)
        if self._restarts.wait():
            self._assign_helper()

    def _stop_helper(self) -> None:
        """Tell the helper to stop, and shut the socket, so that a helper blocked sending a
        batch ends at once too; wait for it (killed after 5 s)."""
        sock, proc = self._sock, self._proc
        self._sock = self._proc = None
        if sock is not None:
            try:
                sock.settimeout(0.5)
                _send(sock, _json({"op": "stop"}))
            except OSError:
                pass
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if proc is not None:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            self._exit = proc.returncode
        if sock is not None:
            sock.close()

    # -- AssignedSource hooks ------------------------------------------------------------------------
    def refresh(self) -> None:
        before = list(self.assigned)
        super().refresh()
        if self.assigned != before or self._sock is None:
            self._assign_helper()

    def _seek_one(self, partition: int) -> None:
        if self._helper_options is None:
            super()._seek_one(partition)

    def seek(self, positions: Mapping[str, Mapping[str, int]]) -> None:
        super().seek(positions)
        self._assign_helper()

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[Record]:
        if self._helper_options is None:
            return super().poll(max_records, timeout)
        if time.monotonic() - self._last_refresh >= self.refresh_seconds:
            self.refresh()
        if not self.assigned or self._sock is None:
            self.stop.wait(max(timeout, 0.05))
            return []
        if self._taken >= len(self._buffer):
            self._receive(timeout)
        out = self._buffer[self._taken:self._taken + max_records]
        self._taken += len(out)
        for r in out:
            self._next[r.partition] = r.offset + 1
        return out

    def _receive(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for the helper's next batch of this generation."""
        deadline = time.monotonic() + timeout
        while self._sock is not None:
            self._tell()
            try:
                if not _readable(self._sock, max(0.0, deadline - time.monotonic())):
                    if self._proc is not None and self._proc.poll() is not None:
                        self._lost("the fetch helper ended")
                    return
                frame = _recv(self._sock)
            except OSError as exc:
                frame = None
                logger.debug("fetch helper socket: %s", exc)
            if frame is None:
                self._lost("the fetch helper ended")
                continue
            if frame[:1] != _RECORDS:
                self._other(frame)
                continue
            self._deaths = 0
            self._restarts.reset()
            try:
                _send(self._sock, _json({"op": "credit", "n": 1}))
            except OSError as exc:  # seen as gone at the next read
                logger.debug("fetch helper socket: %s", exc)
            size = _LENGTH.unpack(frame[1:5])[0]
            header = json.loads(frame[5:5 + size])
            if header["generation"] != self._generation:
                continue  # read before the last seek or assignment: not this generation's
            self._ends.update({int(p): int(end) for p, end in header["ends"].items()})
            records: list[Record] = []
            start = 5 + size
            for head in header["parts"]:
                part, start = unpack(head, frame, self.topic, start)
                records.extend(part)
            self._buffer, self._taken = records, 0
            return

    def known_ends(self) -> dict[int, int]:
        if self._helper_options is None:
            return super().known_ends()
        return {p: end for p, end in self._ends.items() if p in self.assigned}

    def close(self) -> None:
        try:
            self._stop_helper()
        finally:
            super().close()


if __name__ == "__main__":
    sys.exit(main())
