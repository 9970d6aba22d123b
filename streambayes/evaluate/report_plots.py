"""Report figures: ROC curves, cost against cutoff, windowed accuracy with drift points.

The numbers are computed here with numpy (:func:`roc_points`, :func:`expected_cost`) so they can
be tested without drawing; matplotlib is imported inside the figure functions and draws on its
Agg canvas (no pyplot state, no display). Figures are returned; the runtime saves them.

>>> fpr, tpr, auc = roc_points([0.9, 0.8, 0.3, 0.1], [True, False, True, False])
>>> fpr.tolist(), tpr.tolist(), auc
([0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.5, 0.5, 1.0, 1.0], 0.75)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from streambayes.evaluate.windows import WindowCurve

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def roc_points(scores: Sequence[float] | np.ndarray,
               y_true: Sequence[bool] | np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """False and true positive rates at every distinct score cutoff, from (0, 0), and the AUC.

    Tied scores form one step (the diagonal of the tie), so the AUC counts a tied
    positive/negative pair as one half, as the Mann-Whitney statistic does.

    >>> roc_points([0.5, 0.5], [True, False])[2]
    0.5
    """
    s = np.asarray(scores, dtype=float)
    y = np.asarray(y_true, dtype=bool)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError(f"roc_points: scores {s.shape} and labels {y.shape} must be 1-D and equal")
    if np.isnan(s).any():
        raise ValueError("roc_points: scores contain NaN")
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"roc_points: needs both classes, got {n_pos} positive and {n_neg} negative")
    order = np.argsort(-s, kind="stable")
    s, y = s[order], y[order]
    last_of_tie = np.r_[np.flatnonzero(s[1:] != s[:-1]), len(s) - 1]
    tps = np.cumsum(y)[last_of_tie]
    fps = last_of_tie + 1 - tps
    fpr = np.r_[0.0, fps / n_neg]
    tpr = np.r_[0.0, tps / n_pos]
    auc = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0))
    return fpr, tpr, auc


def expected_cost(p_positive: Sequence[float] | np.ndarray, y_true: Sequence[bool] | np.ndarray,
                  fp_cost: float, fn_cost: float, cutoffs: np.ndarray) -> np.ndarray:
    """Mean cost per event when ``p_positive >= cutoff`` is called positive, for each cutoff.

    >>> expected_cost([0.9, 0.2], [False, True], fp_cost=1.0, fn_cost=5.0,
    ...               cutoffs=np.array([0.0, 0.5, 1.0])).tolist()  # both +, one FP and one FN, both -
    [0.5, 3.0, 2.5]
    """
    p = np.asarray(p_positive, dtype=float)
    y = np.asarray(y_true, dtype=bool)
    if p.shape != y.shape or p.ndim != 1 or p.size == 0:
        raise ValueError(f"expected_cost: probabilities {p.shape} and labels {y.shape} must match")
    negatives = np.sort(p[~y])
    positives = np.sort(p[y])
    false_pos = negatives.size - np.searchsorted(negatives, cutoffs, side="left")
    false_neg = np.searchsorted(positives, cutoffs, side="left")
    return (fp_cost * false_pos + fn_cost * false_neg) / p.size


def _new_figure(figsize: tuple[float, float]) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def roc_curve_figure(data: Mapping[str, tuple[Sequence[float], Sequence[bool]]], title: str = "",
                     ) -> Figure:
    """One ROC curve per model from ``{model: (scores, y_true)}``, twice: on a linear
    false-positive axis (the AUC is in the legend), and on a logarithmic one from one false
    positive in all negatives to 1, where a spam operator reads the low false-positive range."""
    fig = _new_figure((11, 5.5))
    linear, logarithmic = fig.subplots(1, 2)
    floor = 1.0
    for name, (scores, y_true) in data.items():
        fpr, tpr, auc = roc_points(scores, y_true)
        (line,) = linear.plot(fpr, tpr, label=f"{name} (AUC {auc:.3f})")
        negatives = int(np.size(y_true) - np.count_nonzero(y_true))
        floor = min(floor, 1.0 / max(negatives, 1))
        shown = fpr > 0  # a log axis cannot show 0; the first false positive starts the curve
        logarithmic.step(fpr[shown], tpr[shown], where="post", color=line.get_color(), label=name)
    linear.plot([0, 1], [0, 1], linestyle=":", color="grey", label="chance")
    linear.set_xlim(0, 1)
    linear.legend(loc="lower right")
    logarithmic.set_xscale("log")
    logarithmic.set_xlim(floor / 2 if floor < 1 else 1e-3, 1)
    logarithmic.legend(loc="lower right")
    for ax, scale in ((linear, "linear"), (logarithmic, "log")):
        ax.set_xlabel(f"false positive rate ({scale})")
        ax.set_ylabel("true positive rate")
        ax.set_ylim(0, 1.01)
        ax.grid(True, alpha=0.3, which="both")
    if title:
        fig.suptitle(title)
    return fig


def cost_vs_cutoff_figure(data: Mapping[str, tuple[Sequence[float], Sequence[bool]]],
                          fp_cost: float, fn_cost: float, n_cutoffs: int = 201, title: str = "",
                          tuned: Mapping[str, tuple[float, float]] | None = None) -> Figure:
    """Cost per event against the cutoff on ``p(positive)``, one line per model.

    The legend gives each model's lowest cost; a dashed line marks the cutoff
    ``fp_cost / (fp_cost + fn_cost)``, optimal for calibrated probabilities; ``tuned`` cutoffs
    (``{model: (low, high)}``, the three-way decision's) are drawn dotted in the model's colour.
    The cost axis stops at 1.5x the cost of the cheaper trivial rule (everything positive at
    cutoff 0, or nothing at cutoff 1): above it a cutoff is worse than not classifying, and the
    spike of calling everything positive no longer flattens the curves that matter.
    """
    cutoffs = np.linspace(0.0, 1.0, n_cutoffs)
    fig = _new_figure((8, 5))
    ax = fig.subplots()
    top, lowest = 0.0, 0.0
    for name, (p_positive, y_true) in data.items():
        cost = expected_cost(p_positive, y_true, fp_cost, fn_cost, cutoffs)
        best = int(np.argmin(cost))
        (line,) = ax.plot(cutoffs, cost, label=f"{name} (min {cost[best]:.4f} at {cutoffs[best]:.2f})")
        top = max(top, 1.5 * float(min(cost[0], cost[-1])))
        lowest = max(lowest, float(cost[best]))
        for at in (tuned or {}).get(name, ()):
            ax.axvline(at, linestyle=":", color=line.get_color())
    if (tuned or {}):
        ax.plot([], [], linestyle=":", color="black", label="tuned cutoffs (low, high)")
    if fp_cost + fn_cost > 0:
        ax.axvline(fp_cost / (fp_cost + fn_cost), linestyle="--", color="grey",
                   label="Bayes cutoff for calibrated p")
    top = max(top, 1.1 * lowest)
    ax.set_ylim(0, top if top > 0 else 1)
    ax.set_xlabel("cutoff on p(positive)")
    ax.set_ylabel(f"cost per event (FP {fp_cost:g}, FN {fn_cost:g})")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best")
    if title:
        fig.suptitle(title)
    return fig


def window_accuracy_figure(curves: Mapping[str, WindowCurve],
                           drift_points: Mapping[str, Sequence[int]] | None = None,
                           title: str = "") -> Figure:
    """Sliding-window and fading accuracy over events, one line per model; drift points dotted."""
    fig = _new_figure((8, 6))
    top, bottom = fig.subplots(2, 1, sharex=True)
    for name, curve in curves.items():
        (line,) = top.plot(curve.events, curve.window_accuracy, label=name)
        bottom.plot(curve.events, curve.fading_accuracy, label=name, color=line.get_color())
        for at in (drift_points or {}).get(name, []):
            for ax in (top, bottom):
                ax.axvline(at, linestyle=":", color=line.get_color(), alpha=0.7)
    top.set_ylabel("sliding-window accuracy")
    bottom.set_ylabel("fading accuracy")
    bottom.set_xlabel("events (dotted: ADWIN drift points)")
    top.legend(loc="lower right")
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
    if title:
        fig.suptitle(title)
    return fig
