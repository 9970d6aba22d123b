"""A reliability diagram (calibration before and after) on matplotlib's Agg canvas; the caller
saves it (no file I/O here).

>>> fig = reliability_diagram(before=([0.1, 0.9, 0.95], [0, 1, 0]), after=([0.2, 0.7, 0.8], [0, 1, 0]))
>>> [ax.get_ylabel() for ax in fig.axes]
['observed frequency', 'events']
"""

from __future__ import annotations

from collections.abc import Sequence

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
