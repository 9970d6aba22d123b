"""Report figures built with matplotlib's Agg canvas; the runtime saves them (no file I/O here).

>>> from streambayes.evaluate.prequential import Curve
>>> fig = learning_curves({"nb": Curve([256, 512], [0.9, 0.95], [0.3, 0.2])}, title="sms")
>>> [ax.get_ylabel() for ax in fig.axes]
['accuracy', 'log loss']
"""

from __future__ import annotations

from collections.abc import Mapping

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from streambayes.evaluate.prequential import Curve


def learning_curves(curves: Mapping[str, Curve], title: str = "") -> Figure:
    """Running accuracy and log loss against events seen, one line per model."""
    fig = Figure(figsize=(8, 6), layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True)
    for name, curve in curves.items():
        top.plot(curve.events, curve.accuracy, label=name)
        bottom.plot(curve.events, curve.log_loss, label=name)
    top.set_ylabel("accuracy")
    bottom.set_ylabel("log loss")
    bottom.set_xlabel("events (prequential: predicted, then learned)")
    top.legend(loc="lower right")
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
    if title:
        fig.suptitle(title)
    return fig
