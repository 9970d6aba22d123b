"""A reliability diagram (calibration before and after) on matplotlib's Agg canvas; the caller
saves it (no file I/O here).

>>> fig = reliability_diagram(before=([0.1, 0.9, 0.95], [0, 1, 0]), after=([0.2, 0.7, 0.8], [0, 1, 0]))
>>> [ax.get_ylabel() for ax in fig.axes]
['observed frequency', 'events']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from streambayes.evaluate.calibration import expected_calibration_error, reliability

Pair = tuple[Sequence[float] | np.ndarray, Sequence[float] | np.ndarray]


def reliability_diagram(before: Pair, after: Pair | None = None, n_bins: int = 10, title: str = "",
                        xlabel: str = "predicted probability"):
    """Observed frequency against mean predicted probability per bin (the diagonal is perfect
    calibration), with each curve's ECE in its label, and the events per bin underneath.
    Returns a ``matplotlib.figure.Figure``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 7), layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    top.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect")
    width = 1.0 / n_bins
    curves = [("before", before, -width / 4)] + ([("after", after, width / 4)] if after is not None else [])
    for name, (p, y), shift in curves:
        r = reliability(p, y, n_bins)
        ece = expected_calibration_error(p, y, n_bins)
        full = r.weight > 0
        top.plot(r.mean_predicted[full], r.observed[full], marker="o", label=f"{name} (ECE {ece:.3f})")
        centres = 0.5 * (r.edges[:-1] + r.edges[1:])
        bottom.bar(centres + shift, r.weight, width=width / 2, label=name)
    top.set_ylabel("observed frequency")
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    top.legend(loc="upper left")
    bottom.set_yscale("symlog")
    bottom.set_ylabel("events")
    bottom.set_xlabel(xlabel)
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
    if title:
        fig.suptitle(title)
    return fig


def reliability_panels(data: Mapping[str, tuple[Pair, Pair | None]], n_bins: int = 10, title: str = "",
                       xlabel: str = "predicted probability"):
    """One reliability panel per model from ``{model: (before, after)}`` (``after`` may be None),
    side by side in rows of up to three, each with its curves' ECE in the legend. Returns a
    ``matplotlib.figure.Figure``.

    >>> fig = reliability_panels({"nb": (([0.1, 0.9], [0, 1]), None), "aode": (([0.6, 0.8], [1, 1]), None)})
    >>> [ax.get_title() for ax in fig.axes]
    ['nb', 'aode']
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    n = max(len(data), 1)
    ncols = min(n, 3)
    nrows = -(-n // ncols)
    fig = Figure(figsize=(4.2 * ncols, 4.2 * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (name, (before, after)) in zip(axes, data.items(), strict=False):
        ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect")
        for label, pair in (("before", before), ("after", after)):
            if pair is None:
                continue
            r = reliability(pair[0], pair[1], n_bins)
            ece = expected_calibration_error(pair[0], pair[1], n_bins)
            full = r.weight > 0
            ax.plot(r.mean_predicted[full], r.observed[full], marker="o", label=f"{label} (ECE {ece:.3f})")
        ax.set_title(name)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("observed frequency")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize="small")
    for ax in axes[len(data):]:
        fig.delaxes(ax)
    if title:
        fig.suptitle(title)
    return fig
