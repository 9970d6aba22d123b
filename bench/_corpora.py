"""Long-text corpora for the throughput benches: the shared Enron mails and 20 Newsgroups posts.

``load_corpus(name)`` gives (texts, labels, file a user would hand to ``streambayes replay``):

  sms         the SMS Spam Collection (short texts, 80 characters on average), TSV
  enron       enron1-3 as handed over (gzip JSONL without ids; 16,541 mails, ~1,500 characters),
              in file order
  newsgroups  20 Newsgroups bydate, train and test, headers kept (18,846 posts, ~1,900
              characters); the replay file is written as ``{"text", "label"}`` JSONL

and the stream helpers the contestants share: ``growing`` (replay's batch sizes) and
``score_rows`` (each event's probability of its true class, and whether the top class was it).
"""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

from _common import data_path, load_sms_spam

CORPORA = ("sms", "enron", "newsgroups")


def load_corpus(name: str) -> tuple[list[str], list[str], Path]:
    """(texts, labels, replay file) of a corpus, in file order."""
    if name == "sms":
        texts, labels = load_sms_spam()
        return texts, labels, data_path("sms_spam_collection", "SMSSpamCollection")
    if name == "enron":
        path = data_path("enron_spam_dev", "enron1-3.jsonl.gz")
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            mails = [json.loads(line) for line in fh]
        return [m["text"] for m in mails], [m["label"] for m in mails], path
    if name == "newsgroups":
        with gzip.open(data_path("20newsgroups", "20news-bydate.jsonl.gz"), "rt", encoding="utf-8") as fh:
            posts = [json.loads(line) for line in fh]
        return [p["text"] for p in posts], [p["group"] for p in posts], Path()
    raise ValueError(f"unknown corpus {name!r}; choose from {', '.join(CORPORA)}")


def replay_file(texts: list[str], labels: list[str]) -> Path:
    """The stream as a JSONL file of ``{"text", "label"}`` events (a temporary file)."""
    fh = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8")
    with fh:
        for text, label in zip(texts, labels, strict=True):
            fh.write(json.dumps({"text": text, "label": label}) + "\n")
    return Path(fh.name)


def score_rows(proba, classes: list, ys: list, p, right, lo: int, first: str) -> None:
    """Store P(true class) (0.5 before any training, 0 for a class not seen yet) and whether the
    top class (``first`` before any training) is the true one, for rows ``lo, lo + 1, ...`` of a
    (n, classes) array."""
    import numpy as np

    if not classes:  # untrained: the first class in sorted order (ham for SMS), P = 0.5
        p[lo:lo + len(ys)] = 0.5
        right[lo:lo + len(ys)] = [y == first for y in ys]
        return
    index = {c: j for j, c in enumerate(classes)}
    col = np.array([index.get(y, -1) for y in ys])
    p[lo:lo + len(ys)] = np.where(col >= 0, proba[np.arange(len(ys)), np.maximum(col, 0)], 0.0)
    right[lo:lo + len(ys)] = np.asarray(classes, dtype=object)[proba.argmax(axis=1)] == np.asarray(ys, object)


def growing(n: int, bs: int, grow: bool):
    """(lo, hi) of mini-batches of ``bs``; with ``grow`` they grow 1, 2, 4, ... to ``bs`` (replay's)."""
    lo, size = 0, 1 if grow else bs
    while lo < n:
        yield lo, min(lo + size, n)
        lo, size = lo + size, min(size * 2, bs)
