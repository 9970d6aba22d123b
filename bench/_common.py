"""Shared helpers for the benchmark scripts in ``bench/``.

Data lookup, the SMS Spam Collection loader, peak-memory measurement, median-of-repeats
timing, running a contestant in a fresh worker process, and a table printer (rich when it
is installed, plain text otherwise). Standard library only at import time, so a driver
process that imports this stays small (its size leaks into forked workers' ``ru_maxrss``).
"""

from __future__ import annotations

import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024


# -- data -----------------------------------------------------------------------------------
def data_dir() -> Path:
    """``$STREAMBAYES_DATA`` if set, else ``<repo>/../shared/data``."""
    env = os.environ.get("STREAMBAYES_DATA")
    return Path(env) if env else (REPO.parent / "shared" / "data").resolve()


def data_path(*parts: str) -> Path:
    """A file under the data directory; a clear error naming where we looked if missing."""
    path = data_dir().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(
            f"benchmark data not found: {path} (set STREAMBAYES_DATA to the shared data directory)")
    return path


def load_sms_spam() -> tuple[list[str], list[str]]:
    """The SMS Spam Collection as (texts, labels); labels are ``"ham"`` / ``"spam"``."""
    texts: list[str] = []
    labels: list[str] = []
    path = data_path("sms_spam_collection", "SMSSpamCollection")
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line:
                continue
            label, sep, text = line.partition("\t")
            if not sep or label not in ("ham", "spam"):
                raise ValueError(f"{path}:{lineno}: expected 'ham|spam<TAB>text', got {line[:60]!r}")
            labels.append(label)
            texts.append(text)
    return texts, labels


def load_uci(name: str) -> tuple[list[dict], list[str]]:
    """A UCI categorical set ``uci/<name>.csv`` as (xs, ys), in file order.

    Each ``x`` maps every attribute (all columns but ``class``) to its nominal string value,
    or None where the field is empty (missing); ``y`` is the ``class`` column.
    """
    import csv

    path = data_path("uci", f"{name}.csv")
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        if not header or header[-1] != "class":
            raise ValueError(f"{path}: expected a header row ending in 'class', got {header}")
        attributes = header[:-1]
        xs: list[dict] = []
        ys: list[str] = []
        for row in reader:
            if not row["class"]:
                raise ValueError(f"{path}:{reader.line_num}: the class is missing")
            xs.append({a: row[a] or None for a in attributes})
            ys.append(row["class"])
    return xs, ys


# -- memory ---------------------------------------------------------------------------------
def _proc_status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_hwm() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        return False
    return _proc_status_kib("VmHWM") is not None


def _maxrss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # macOS reports bytes, Linux KiB


class PeakMemory:
    """Peak resident-memory growth of this process inside a ``with`` block, in bytes.

    On Linux the kernel's high-water mark is reset on entry (``/proc/self/clear_refs``) and
    ``VmHWM - VmRSS(entry)`` is read on exit: exact, and no slowdown (unlike tracemalloc), so
    it can wrap a timed region. Elsewhere it falls back to the ``ru_maxrss`` delta, which
    misses growth that stays below an earlier peak. ``method`` says which one was used.
    """

    def __init__(self) -> None:
        self.method = ""
        self.peak_bytes = 0
        self._base = 0

    def __enter__(self) -> PeakMemory:
        gc.collect()
        if _reset_hwm():
            self.method = "VmHWM"
            self._base = (_proc_status_kib("VmRSS") or 0) * 1024
        else:
            self.method = "ru_maxrss"
            self._base = _maxrss_bytes()
        return self

    def __exit__(self, *exc: object) -> None:
        peak = (_proc_status_kib("VmHWM") or 0) * 1024 if self.method == "VmHWM" else _maxrss_bytes()
        self.peak_bytes = max(0, peak - self._base)

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / MIB


# -- timing ---------------------------------------------------------------------------------
def timed(fn: Callable[[], object]) -> tuple[float, object]:
    """(wall seconds, result) of ``fn()``, after a garbage collection."""
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def repeat_timed(fn: Callable[[], object], repeats: int) -> list[float]:
    """Seconds of ``repeats`` calls of ``fn`` in this process (use workers for isolation)."""
    return [timed(fn)[0] for _ in range(repeats)]


@dataclass(frozen=True)
class Rate:
    """Throughput over repeats: the median is the headline, min/max show the noise."""

    median: float
    low: float
    high: float
    samples: tuple[float, ...]

    @staticmethod
    def of(events: int, seconds: Sequence[float]) -> Rate:
        rates = tuple(events / s if s > 0 else float("inf") for s in seconds)
        return Rate(statistics.median(rates), min(rates), max(rates), rates)


# -- workers --------------------------------------------------------------------------------
def run_worker(script: Path, args: Sequence[str], timeout: float | None = None) -> dict:
    """Run ``python script *args`` in a fresh process; its last stdout line must be JSON."""
    proc = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {script.name} {' '.join(args)} exited {proc.returncode}:\n"
                           f"{proc.stderr.strip()[-4000:]}")
    lines = proc.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(f"worker {script.name} {' '.join(args)} printed nothing")
    return json.loads(lines[-1])


def emit_worker_result(result: dict) -> None:
    """The worker side of :func:`run_worker`."""
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


# -- output ---------------------------------------------------------------------------------
def fmt(value: float | None, spec: str = ",.0f", missing: str = "–") -> str:
    """Format a number, or ``missing`` for None / NaN."""
    if value is None or value != value:
        return missing
    return format(value, spec)


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]],
                right_align: Sequence[bool] | None = None, plain: bool = False) -> None:
    """A table of pre-formatted cells: rich if available (and not ``plain``), else aligned text."""
    align = list(right_align) if right_align is not None else [i > 0 for i in range(len(columns))]
    if not plain:
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            plain = True
    if not plain:
        table = Table(title=title)
        for name, right in zip(columns, align, strict=True):
            table.add_column(name, justify="right" if right else "left")
        for row in rows:
            table.add_row(*row)
        Console(width=max(100, _plain_width(columns, rows) + 3 * len(columns) + 1)).print(table)
        return
    widths = [max(len(str(c)) for c in col) for col in zip(columns, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w)
                         for c, w, r in zip(cells, widths, align, strict=True)).rstrip()

    print(title)
    print(line(columns))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))


def _plain_width(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    return sum(max(len(str(c)) for c in col) for col in zip(columns, *rows, strict=True))


# -- additions for bayesnet.py (existing helpers above are unchanged) -------------------------
def repeat_timed_fresh(setup: Callable[[], object], fn: Callable[[object], object],
                       repeats: int) -> tuple[list[float], object]:
    """Seconds of ``fn(setup())`` over ``repeats`` runs, each on a fresh object built untimed by
    ``setup``; also the last run's result."""
    seconds, out = [], None
    for _ in range(repeats):
        obj = setup()
        dt, out = timed(lambda obj=obj: fn(obj))
        seconds.append(dt)
    return seconds, out


def package_version(pkg: str) -> str:
    """Installed version of a distribution, or ``"absent"``."""
    from importlib import metadata

    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "absent"


def jsonable(obj: object) -> object:
    """Plain JSON values: numpy scalars/arrays to Python, tuples to lists, non-finite floats to None."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "tolist"):  # numpy scalar or array
        return jsonable(obj.tolist())
    if isinstance(obj, float) and (obj != obj or abs(obj) == float("inf")):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_json(path: Path, payload: dict) -> None:
    """Write ``payload`` (made :func:`jsonable`) as indented JSON and say so."""
    path.write_text(json.dumps(jsonable(payload), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")
