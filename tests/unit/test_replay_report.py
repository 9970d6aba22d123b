"""What a replay shows: tables that fit the terminal with every figure whole, tuned cutoffs and
ranking metrics in them, progress for every source, one reliability panel per model, a ROC plot
on a log false-positive axis and a cost plot not flattened by cutoff 0."""

import io
import json
import re

import numpy as np
import pytest
from rich.console import Console

from streambayes.cli import main
from streambayes.evaluate.report_plots import cost_vs_cutoff_figure, expected_cost, roc_curve_figure
from streambayes.runtime.loops.replay import FileReplay, replay_file
from streambayes.runtime.loops.report import progress
from streambayes.runtime.records.sources import FileSource, MemorySource
from tests.unit.test_replay import SMS

MODELS = ("nb", "mnb", "cnb", "bnb")


@pytest.fixture(scope="module")
def costed(tmp_path_factory):
    """A replay of 1,500 SMS with four models, a loss matrix and a reject cost."""
    from streambayes.decide import LossMatrix

    tmp = tmp_path_factory.mktemp("costed")
    loss = LossMatrix.from_mapping({"spam": {"ham": 10}}, reject=0.2)
    job = FileReplay(path=SMS, models=MODELS, limit=1500, loss=loss, dead_letter=tmp / "dl.jsonl")
    wide = Console(file=io.StringIO(), width=1000)
    return replay_file(job, console=wide, progress=False)


@pytest.mark.parametrize("width", [80, 100])
def test_every_figure_of_the_summary_is_shown_whole_on_a_narrow_terminal(costed, width):
    from streambayes.runtime.loops.report import print_summary

    console = Console(file=io.StringIO(), width=width, record=True)
    print_summary(costed, console)
    text = console.export_text()
    tables = [line for line in text.splitlines() if "│" in line or "┃" in line]
    assert tables and max(len(line) for line in tables) <= width
    assert "…" not in text
    summary = costed.run.summary()
    for name in MODELS:
        assert name in text
        m = summary[name]
        for figure in (f"{m['accuracy']:.4f}", f"{m['log_loss']:.4f}", f"{m['expected_cost']:.4f}",
                       f"{m['cutoffs']['low']:.3f}–{m['cutoffs']['high']:.3f}"):
            assert figure in text, (name, figure)


def test_a_wide_terminal_keeps_one_row_per_model(costed):
    from streambayes.runtime.loops.report import summary_tables

    (table,) = summary_tables(costed, 1000)
    assert [c.header for c in table.columns][:2] == ["model", "events"]
    assert "tuned cutoffs" in [c.header for c in table.columns]
    assert table.row_count == len(MODELS)


def test_per_key_ranking_metrics_are_in_the_table(tmp_path, capsys):
    lines = [json.dumps({"key": f"u{i % 4}", "text": ("goal match" if (i * 7) % 3 else "code chip"),
                         "label": "interesting" if (i % 4 < 2) == bool((i * 7) % 3) else "boring"})
             for i in range(400)]
    path = tmp_path / "interest.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["replay", str(path), "--model", "mnb", "--per-key"]) == 0
    out = capsys.readouterr().out
    assert "P@10% per key" in out and "NDCG per key" in out


def test_progress_counts_records_for_a_small_file_and_a_source_without_size(tmp_path):
    small = tmp_path / "few.tsv"
    small.write_text("ham\thello there\nspam\twin cash\n" * 10)
    for source in (FileSource(small), MemorySource([b'{"text": "x", "label": "a"}'] * 5)):
        seen = []
        with progress(source, True) as tick:
            class Result:
                records = 7
            tick(Result())
            seen.append(True)
        assert seen
    job = FileReplay(path=small, dead_letter=tmp_path / "dl.jsonl")
    calls = []
    import streambayes.runtime.loops.replay as replay_module

    real = replay_module.progress

    def spy(source, show):
        calls.append(show)
        return real(source, show)

    replay_module.progress = spy
    try:
        result = replay_file(job, console=Console(file=io.StringIO()), progress=True)
    finally:
        replay_module.progress = real
    assert calls == [True] and result.records == 20


def test_roc_figure_has_a_log_false_positive_panel():
    rng = np.random.default_rng(0)
    y = rng.random(2000) < 0.2
    p = np.clip(np.where(y, 0.8, 0.2) + rng.normal(0, 0.2, y.size), 0, 1)
    fig = roc_curve_figure({"nb": (p, y), "cnb": (1 - p, y)})
    linear, logarithmic = fig.axes
    assert (linear.get_xscale(), logarithmic.get_xscale()) == ("linear", "log")
    lo, hi = logarithmic.get_xlim()
    assert lo <= 1 / (~y).sum() and hi == 1


def test_cost_plot_is_clipped_above_the_cutoff_zero_spike_and_draws_tuned_cutoffs():
    rng = np.random.default_rng(1)
    y = rng.random(3000) < 0.1
    p = np.clip(np.where(y, 0.9, 0.05) + rng.normal(0, 0.05, y.size), 0, 1)
    fig = cost_vs_cutoff_figure({"nb": (p, y)}, fp_cost=10, fn_cost=1, tuned={"nb": (0.3, 0.7)})
    (ax,) = fig.axes
    spike = expected_cost(p, y, 10, 1, np.array([0.0]))[0]
    assert ax.get_ylim()[1] < spike / 5
    vertical = [line.get_xdata()[0] for line in ax.get_lines() if len(set(line.get_xdata())) == 1]
    assert 0.3 in vertical and 0.7 in vertical
    assert any("tuned" in t.get_text() for t in ax.get_legend().get_texts())


def test_reliability_plot_has_one_panel_per_model(costed, tmp_path):
    from matplotlib.figure import Figure

    from streambayes.runtime.loops import report

    saved = {}
    real = Figure.savefig

    def keep(self, path, *args, **kwargs):
        saved[str(path).rsplit("/", 1)[-1]] = self
        return real(self, path, *args, **kwargs)

    Figure.savefig = keep
    try:
        report.write_report(costed, tmp_path / "rep")
    finally:
        Figure.savefig = real
    titles = [ax.get_title() for ax in saved["reliability.png"].axes]
    assert titles == list(MODELS)
    assert re.search("ECE", " ".join(t.get_text() for ax in saved["reliability.png"].axes
                                     for t in ax.get_legend().get_texts()))
