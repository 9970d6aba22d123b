"""The River and scikit-learn faces beside their peers, in one run.

1. River: ``BagOfWords() | MultinomialNB()`` prequentially (``evaluate.progressive_val_score``) over
   the SMS Spam Collection (the data of River's ``datasets.SMSSpam``), streambayes' River face
   against River's own MultinomialNB; also River's MNB with words unseen in training left out of
   the score (streambayes' rule), which shows where the accuracy gap comes from, and a null
   classifier (the pipeline and BagOfWords alone: the floor both share).
2. scikit-learn: ``predict_proba`` on the sparse count matrix of the same texts
   (``CountVectorizer``), ``streambayes.sklearn.MultinomialNB`` against
   ``sklearn.naive_bayes.MultinomialNB``, both fitted on the same matrix.

Every timing is the median of ``--repeats`` runs in this process; the ratios are what to read.

    .venv/bin/python bench/faces.py                # about a minute on a quiet machine
    .venv/bin/python bench/faces.py --repeats 1
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import fmt, load_sms_spam, print_table


def _timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def river_rows(texts: list[str], labels: list[str], repeats: int) -> list[list[str]]:
    from river import base, compose, evaluate, feature_extraction, metrics, naive_bayes

    from streambayes.models import river_compat

    class UnseenIgnored(naive_bayes.MultinomialNB):
        """River's MNB scoring only the words seen in training (as streambayes does)."""

        def joint_log_likelihood(self, x):
            return super().joint_log_likelihood({f: v for f, v in x.items() if f in self.feature_counts})

    class Null(base.Classifier):
        """Learns nothing: the cost of the pipeline and BagOfWords alone."""

        def learn_one(self, x, y):
            pass

        def predict_proba_one(self, x):
            return {"ham": 1.0}

    stream = list(zip(texts, labels, strict=True))
    contestants = {
        "streambayes MultinomialNB": river_compat.MultinomialNB,
        "river MultinomialNB": naive_bayes.MultinomialNB,
        "river MNB, unseen words ignored": UnseenIgnored,
        "null (pipeline + BagOfWords only)": Null,
    }
    results = {}
    for name, cls in contestants.items():
        def run(cls=cls):
            model = compose.Pipeline(feature_extraction.BagOfWords(), cls())
            return evaluate.progressive_val_score(stream, model, metrics.Accuracy()).get()
        results[name] = _timed(run, repeats)
    river_s = results["river MultinomialNB"][0]
    return [[name, fmt(acc, ".4f"), fmt(len(stream) / s, ",.0f"), fmt(river_s / s, ".2f")]
            for name, (s, acc) in results.items()]


def sklearn_rows(texts: list[str], labels: list[str], repeats: int) -> list[list[str]]:
    import numpy as np
    from sklearn import naive_bayes
    from sklearn.feature_extraction.text import CountVectorizer

    from streambayes import sklearn as sbs

    X = CountVectorizer().fit_transform(texts)
    ours, theirs = sbs.MultinomialNB().fit(X, labels), naive_bayes.MultinomialNB().fit(X, labels)
    ours.predict_proba(X[:1])  # derive the cached log-likelihood table once, as a server would
    t_ours, p_ours = _timed(lambda: ours.predict_proba(X), repeats * 5)
    t_theirs, p_theirs = _timed(lambda: theirs.predict_proba(X), repeats * 5)
    agree = float(np.mean(p_ours.argmax(1) == p_theirs.argmax(1)))
    return [["streambayes.sklearn MultinomialNB", fmt(t_ours * 1e3, ".2f"), fmt(t_ours / t_theirs, ".2f"),
             fmt(agree, ".4f")],
            ["sklearn MultinomialNB", fmt(t_theirs * 1e3, ".2f"), "1.00", "1.0000"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    texts, labels = load_sms_spam()
    print_table(f"River: BagOfWords | model, prequential on SMS ({len(texts):,} messages), "
                f"median of {args.repeats}",
                ["contestant", "accuracy", "events/s", "speed vs River MNB"],
                river_rows(texts, labels, args.repeats))
    print_table(f"scikit-learn: predict_proba on the sparse SMS count matrix, median of {args.repeats * 5}",
                ["contestant", "ms", "time vs sklearn", "same argmax"],
                sklearn_rows(texts, labels, args.repeats))


if __name__ == "__main__":
    main()
