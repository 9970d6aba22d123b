"""Factory fixtures shared by the unit tests (STYLE habit 15)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import numpy as np
import pytest

WORDS = {
    "spam": "free prize win cash offer click now winner".split(),
    "ham": "lunch meeting tomorrow noon report team call".split(),
    "promo": "sale discount coupon store deal week shop".split(),
}
SHARED_WORDS = "the a to and you your of for".split()
_TLDS = {"spam": ["biz", "ru", "com"], "ham": ["org", "com"], "promo": ["com", "shop"]}
_RATE = {"spam": 6.0, "ham": 1.0, "promo": 3.5}


@pytest.fixture(params=["text by text", "numpy passes"])
def both_text_paths(request, monkeypatch) -> str:
    """A test on both ways of a batch's words, each forced for any batch: text by text (what
    batches of at most ``SMALL_CHARS`` characters take: the predictor's small batches) and the
    numpy passes (``pytestmark = pytest.mark.usefixtures("both_text_paths")``)."""
    from streambayes.features import ascii_words

    monkeypatch.setattr(ascii_words, "SMALL_CHARS", -1 if request.param == "numpy passes" else 1 << 62)
    return request.param


@pytest.fixture(autouse=True)
def _logging_enabled_again() -> Iterator[None]:
    """A test that silences pgmpy with ``logging.disable`` must not silence the tests after it
    (they read the warnings they expect with ``caplog``)."""
    yield
    logging.disable(logging.NOTSET)


def mixed_stream(n: int = 120, seed: int = 0) -> tuple[list[dict], list[str]]:
    """A labelled event stream that every learner can learn from.

    Events carry text (``text``), categorical str (``tld``, and ``lang`` from mid-stream on)
    and bool (``urgent``) fields, count-like numeric fields (``n_links`` int, ``score`` a
    float on a 1/4 grid, so sums of them are exact) and occasional None or missing fields.
    Labels ``spam``/``ham`` from the start; ``promo`` first appears at event ``n // 2``.
    """
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for i in range(n):
        labels = ["spam", "ham"] + (["promo"] if i >= n // 2 else [])
        y = "promo" if i == n // 2 else (labels[i % 2] if i < 4 else str(rng.choice(labels)))
        words = rng.choice(WORDS[y] + SHARED_WORDS, size=int(rng.integers(2, 9)))
        x: dict = {
            "text": " ".join(words),
            "tld": str(rng.choice(_TLDS[y])),
            "urgent": bool(rng.random() < (0.7 if y == "spam" else 0.2)),
            "n_links": int(rng.poisson(_RATE[y])),
            "score": float(np.round(max(rng.normal(_RATE[y], 1.0), 0.0) * 4) / 4),
        }
        if i >= n // 2:
            x["lang"] = str(rng.choice(["en", "fr"]))
        if rng.random() < 0.15:
            x["tld"] = None
        if rng.random() < 0.15:
            del x["score"]
        if rng.random() < 0.1:
            x["text"] = None
        xs.append(x)
        ys.append(y)
    return xs, ys


@pytest.fixture(scope="session")
def make_stream() -> Callable[..., tuple[list[dict], list[str]]]:
    """Factory: ``make_stream(n=120, seed=0) -> (xs, ys)``, see :func:`mixed_stream`."""
    return mixed_stream


# -- per-model streams (the conformance suite picks the stream of the model under test) ---------
def bif_dir():
    """The BIF networks: $STREAMBAYES_DATA/bif, else ../shared/data/bif next to the repository."""
    import os
    from pathlib import Path

    root = os.environ.get("STREAMBAYES_DATA")
    return Path(root) / "bif" if root else Path(__file__).resolve().parents[3] / "shared" / "data" / "bif"


BN_CLASS = "either"


def bn_stream(n: int = 120, seed: int = 0) -> tuple[list[dict], list[str]]:
    """Complete rows sampled from asia: ``x`` = every variable but ``either``, ``y`` = ``either``."""
    from streambayes.models.bayesnet import read_bif
    from streambayes.models.bayesnet.sampling import forward_sample

    net = read_bif(bif_dir() / "asia.bif")
    rows = net.decode(forward_sample(net, n, seed))
    return [{k: v for k, v in r.items() if k != BN_CLASS} for r in rows], [r[BN_CLASS] for r in rows]


STREAMS: dict[str, Callable[..., tuple[list[dict], list[str]]]] = {"bn": bn_stream}


def stream_for(model: str | None) -> Callable[..., tuple[list[dict], list[str]]]:
    """The stream factory of a model (default: :func:`mixed_stream`)."""
    return STREAMS.get(model, mixed_stream)
