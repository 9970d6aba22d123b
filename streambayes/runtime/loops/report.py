"""What a replay shows: the summary table on the terminal, progress while it runs, and the report
directory (``metrics.json`` and the plots).

The table fits the terminal: one row per model when that fits, else one column per model with
the metrics as rows, in as many tables as needed (an 80-column terminal shows every figure
whole). Tuned cutoffs and per-key ranking metrics appear in it when the run has them.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from streambayes.models.usage import usage_line
from streambayes.runtime.records.sources import FileSource, Source

if TYPE_CHECKING:
    from streambayes.runtime.loops.replay import ReplayResult


def _fmt(value: float | None, spec: str = ".4f") -> str:
    return "—" if value is None else format(value, spec)


def _columns(result: ReplayResult) -> list[tuple[str, Callable[[dict], str]]]:
    """(header, cell) for every figure this run has, in the order they are shown."""
    run = result.run
    positive = run.positive_label
    auc = f"ROC AUC ({positive})" if positive is not None else "ROC AUC"
    columns: list[tuple[str, Callable[[dict], str]]] = [
        ("events", lambda m: str(m["events"])),
        ("accuracy", lambda m: _fmt(m["accuracy"])),
        ("log loss", lambda m: _fmt(m["log_loss"])),
        ("macro F1", lambda m: _fmt(m["macro_f1"])),
        (auc, lambda m: _fmt(m["roc_auc"])),
        ("ECE", lambda m: _fmt(m["ece"])),
        ("events/s", lambda m: _fmt(m["events_per_s"], ",.0f")),
    ]
    summary = run.summary()
    if run.loss is not None:
        columns += [("cost/event", lambda m: _fmt(m["expected_cost"])),
                    ("unsure", lambda m: _fmt(m["unsure_rate"], ".2%"))]
    if any(m.get("cutoffs") for m in summary.values()):
        columns += [("tuned cutoffs", _cutoff_cell), ("tuned cost", lambda m: _fmt(
            (m.get("cutoffs") or {}).get("expected_cost")))]
    if any("precision_at_10pct" in m for m in summary.values()):
        columns += [("P@10% per key", lambda m: _fmt(m.get("precision_at_10pct"))),
                    ("NDCG per key", lambda m: _fmt(m.get("ndcg"))),
                    ("keys", lambda m: _fmt(m.get("keys"), ","))]
    return columns


def _cutoff_cell(m: Mapping[str, Any]) -> str:
    cut = m.get("cutoffs")
    if not cut:
        return "—"
    return f"{cut['low']:.3f}–{cut['high']:.3f}"


def summary_tables(result: ReplayResult, width: int, title: str = "prequential replay") -> list[Table]:
    """The summary as tables no wider than ``width``: one row per model when that fits, else
    metrics as rows and models as columns, split into as many tables as needed."""
    summary = result.run.summary()
    columns = _columns(result)
    wide = Table(title=title)
    wide.add_column("model", justify="left")
    for header, _ in columns:
        wide.add_column(header, justify="right")
    for name, m in summary.items():
        wide.add_row(name, *(cell(m) for _, cell in columns))
    if _width(wide) <= width:
        return [wide]
    names = list(summary)
    tables: list[Table] = []
    start = 0
    while start < len(names):
        end = start + 1  # at least one model per table, however narrow the terminal
        while end < len(names) and _width(_tall(summary, names[start:end + 1], columns, title)) <= width:
            end += 1
        tables.append(_tall(summary, names[start:end], columns, title if not tables else ""))
        start = end
    return tables


def _tall(summary: Mapping[str, dict], names: list[str], columns: list, title: str) -> Table:
    table = Table(title=title or None)
    table.add_column("metric", justify="left")
    for name in names:
        table.add_column(name, justify="right")
    for header, cell in columns:
        table.add_row(header, *(cell(summary[name]) for name in names))
    return table


def _width(table: Table) -> int:
    console = Console(width=10_000)
    return Measurement.get(console, console.options, table).maximum


def summary_table(result: ReplayResult, title: str = "prequential replay") -> Table:
    """One row per model: events, accuracy, log loss, macro F1, ROC AUC, ECE, events/s, and the
    cost, tuned-cutoff and per-key ranking columns the run has (however wide)."""
    return summary_tables(result, 10_000, title)[0]


def print_summary(result: ReplayResult, console: Console) -> None:
    """The summary tables (fitted to the console's width), then one line on records, events and
    dead letters."""
    for table in summary_tables(result, console.width):
        console.print(table)
    n_dead = sum(result.dead_letters.values())
    console.print(f"{result.source}: {result.records} records, {result.events} events, "
                  f"{n_dead} dead letters in {result.seconds:.2f} s; {result.batches} mini-batches "
                  f"growing 1, 2, 4, ... to {result.largest or result.batch_size}", highlight=False,
                  soft_wrap=True)
    exact = [name for name, n in result.run.per_event_events.items() if n and n == result.events]
    if exact:  # the models whose every event was predicted by the model of all events before it
        console.print(f"prequential per event: {', '.join(exact)}", highlight=False, soft_wrap=True)
    line = usage_line(result.fields_used())
    if line:
        console.print(line, highlight=False, soft_wrap=True)
    if n_dead:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(result.dead_letters.items()))
        console.print(f"dead letters ({reasons}) written to {result.dead_letter_path}",
                      highlight=False, soft_wrap=True)


@contextmanager
def progress(source: Source, show: bool | None) -> Iterator[Callable[[ReplayResult], None]]:
    """A rich progress line on stderr when stderr is a terminal (or ``show`` is True): events
    read and events/s for every source (files of any size, Kafka ranges), and for a file also the
    share of its bytes and the time left. Yields the callback to call after each batch."""
    if show is None:
        show = sys.stderr.isatty()
    if not show:
        yield lambda result: None
        return
    sized = isinstance(source, FileSource) and source.size_bytes > 0
    columns: list[Any] = [TextColumn("replay"), TextColumn("{task.fields[events]:>12,} records"),
                          TextColumn("{task.fields[rate]:>9,.0f} events/s")]
    if sized:
        columns += [BarColumn(), TextColumn("{task.percentage:>5.1f}%"), TimeRemainingColumn()]
    start = time.perf_counter()
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("replay", total=source.size_bytes if sized else None, events=0, rate=0.0)

        def tick(result: ReplayResult) -> None:
            n = result.records
            rate = n / max(time.perf_counter() - start, 1e-9)
            bar.update(task, completed=source.bytes_read if sized else 0, events=n, rate=rate)

        yield tick


def write_report(result: ReplayResult, directory: Path) -> list[Path]:
    """Write ``metrics.json`` and the plots into ``directory``: ``learning_curves.png``,
    ``reliability.png`` (one panel per model) and, with two labels, ``roc.png`` (linear and
    logarithmic false-positive axes) and ``cost_vs_cutoff.png`` (under the loss matrix's costs
    when one is given, else 1:1, with the tuned cutoffs drawn)."""
    from streambayes.evaluate.calibration_plots import reliability_panels  # matplotlib
    from streambayes.evaluate.plots import learning_curves
    from streambayes.evaluate.report_plots import cost_vs_cutoff_figure, roc_curve_figure

    directory.mkdir(parents=True, exist_ok=True)
    metrics_path = directory / "metrics.json"
    metrics_path.write_text(json.dumps(result.metrics(), indent=2, ensure_ascii=False) + "\n",
                            encoding="utf-8")
    name = Path(result.source).name
    run = result.run
    figures = {"learning_curves.png": learning_curves(run.curves, title=f"prequential replay of {name}")}
    scored = {m: s for m, s in run.scores.items() if s.p_top}
    if scored:
        figures["reliability.png"] = reliability_panels(
            {m: ((s.p_top, s.correct), (s.p_top_calibrated, s.correct)) for m, s in scored.items()},
            title="top-class reliability, before / after calibration")
    if len(run.labels) == 2 and run.positive_label is not None and scored:
        pairs = {m: run.positive_scores(s) for m, s in scored.items()}
        figures["roc.png"] = roc_curve_figure(pairs, title=f"ROC, positive = {run.positive_label}")
        fp, fn = _binary_costs(run.loss, run.positive_label, run.labels)
        summary = run.summary()
        tuned = {m: (c["low"], c["high"]) for m in pairs if (c := summary[m].get("cutoffs"))}
        title = f"cost per event vs cutoff on p({run.positive_label}), FP {fp:g} : FN {fn:g}"
        figures["cost_vs_cutoff.png"] = cost_vs_cutoff_figure(pairs, fp, fn, title=title, tuned=tuned)
    if hasattr(run, "window_curves"):
        from streambayes.evaluate.report_plots import window_accuracy_figure

        figures["window_accuracy.png"] = window_accuracy_figure(
            run.window_curves, run.drift_points, title=f"sliding / fading accuracy ({name})")
    written = [metrics_path]
    for filename, figure in figures.items():
        figure.savefig(directory / filename, dpi=100)
        written.append(directory / filename)
    return written


def _binary_costs(loss: Any, positive: Any, labels: Mapping[Any, float]) -> tuple[float, float]:
    """(false-positive, false-negative) costs of a two-class loss matrix (1, 1 without one)."""
    if loss is None:
        return 1.0, 1.0
    negative = next(label for label in labels if label != positive)
    index = {c: i for i, c in enumerate(loss.classes)}
    p, n = index[str(positive)], index[str(negative)]
    return float(loss.loss[p, n]), float(loss.loss[n, p])
