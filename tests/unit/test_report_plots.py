"""Report figures: ROC points and AUC, cost per event against the cutoff, windowed accuracy."""

import numpy as np
import pytest
from river import metrics

from streambayes.evaluate.report_plots import (
    cost_vs_cutoff_figure,
    expected_cost,
    roc_curve_figure,
    roc_points,
    window_accuracy_figure,
)
from streambayes.evaluate.windows import WindowCurve


def scored(n=500, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    p = np.clip(np.where(y, 0.65, 0.35) + rng.normal(0, 0.2, n), 0, 1)
    return np.round(p, 2), y  # rounding makes ties


def mann_whitney_auc(scores, y):
    pos, neg = scores[y], scores[~y]
    return ((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()) / (
        pos.size * neg.size)


def test_roc_points_and_auc_with_ties():
    p, y = scored()
    fpr, tpr, auc = roc_points(p, y)
    assert auc == pytest.approx(mann_whitney_auc(p, y), rel=1e-12)
    assert (fpr[0], tpr[0], fpr[-1], tpr[-1]) == (0.0, 0.0, 1.0, 1.0)
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    assert len(fpr) == len(np.unique(p)) + 1
    river_auc = metrics.ROCAUC(n_thresholds=1000)
    for yi, pi in zip(y.tolist(), p.tolist(), strict=True):
        river_auc.update(yi, pi)
    assert auc == pytest.approx(river_auc.get(), abs=0.01)
    _, _, flipped = roc_points(-p, y)
    assert flipped == pytest.approx(1 - auc)
    with pytest.raises(ValueError):
        roc_points([0.1, 0.2], [True, True])


def test_expected_cost_counts_false_positives_and_negatives_at_each_cutoff():
    p, y = scored(seed=1)
    cutoffs = np.linspace(0, 1, 11)
    cost = expected_cost(p, y, fp_cost=1.0, fn_cost=4.0, cutoffs=cutoffs)
    for c, got in zip(cutoffs, cost, strict=True):
        called = p >= c
        assert got == pytest.approx(((called & ~y).sum() + 4 * (~called & y).sum()) / p.size)
    assert cost[0] == pytest.approx((~y).mean())  # cutoff 0: everything called positive


def test_each_figure_saves_to_a_non_empty_png(tmp_path):
    p1, y1 = scored(seed=2)
    p2, y2 = scored(seed=3)
    curve = WindowCurve([100, 200, 300], [0.9, 0.8, 0.5], [0.9, 0.85, 0.6])
    figures = {
        "roc": roc_curve_figure({"nb": (p1, y1), "aode": (p2, y2)}, title="sms"),
        "cost": cost_vs_cutoff_figure({"nb": (p1, y1), "aode": (p2, y2)}, fp_cost=5.0, fn_cost=1.0),
        "window": window_accuracy_figure({"nb": curve}, drift_points={"nb": [250]}),
    }
    legend = [t.get_text() for t in figures["roc"].axes[0].get_legend().get_texts()]
    assert legend[0] == f"nb (AUC {roc_points(p1, y1)[2]:.3f})"
    assert [ax.get_ylabel() for ax in figures["window"].axes] == ["sliding-window accuracy",
                                                                  "fading accuracy"]
    for name, fig in figures.items():
        path = tmp_path / f"{name}.png"
        fig.savefig(path)
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, name
