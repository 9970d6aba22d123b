"""MultinomialNB's per-event fast path (models/token_one.py) gives the batch path's state and scores."""

from __future__ import annotations

import numpy as np
import pytest

from streambayes.models import token_one
from streambayes.models.naive_bayes import MultinomialNB

TEXTS = ["win a free prize now", "lunch at noon", "free free free cash", "see you at lunch",
         "prize draw: claim your prize", "noon meeting moved", "", "cash now now", "new words here",
         "call me", "WIN cash now", "free lunch"]
LABELS = ["spam", "ham", "spam", "ham", "spam", "ham", "ham", "spam", "ham", "ham", "spam", "ham"]


def _stream(n: int = 120):
    rng = np.random.default_rng(3)
    for i in range(n):
        j = int(rng.integers(len(TEXTS)))
        text = f"{TEXTS[j]} w{int(rng.integers(40))}" if i % 3 else TEXTS[j]
        yield {"text": text}, LABELS[j], [1.0, 2.5, 0.0, 0.1, 1.0][i % 5]


def _same_state(a: MultinomialNB, b: MultinomialNB) -> None:
    sa, sb = a.to_state(), b.to_state()
    assert sa["classes"] == sb["classes"] and sa["n_events"] == sb["n_events"]
    np.testing.assert_array_equal(sa["class_counts"], sb["class_counts"])
    for key in ("cols", "counts", "totals"):
        np.testing.assert_array_equal(sa["components"][0][key], sb["components"][0][key])


@pytest.mark.parametrize("alpha", [1.0, 0.3, "auto"])
def test_prequential_per_event_equals_the_batch_path_event_by_event(alpha):
    one, many = MultinomialNB(alpha=alpha), MultinomialNB(alpha=alpha)
    assert token_one.fits(one._components[0])
    for x, y, w in _stream():
        if one.classes:
            got = one.predict_proba_one(x)
            ref = many.predict_proba_many([x])[0]
            np.testing.assert_allclose([got[c] for c in one.classes], ref, rtol=0, atol=1e-12)
        one.learn_one(x, y, w)
        many.learn_many([x], [y], [w])
    _same_state(one, many)


def test_per_event_on_plain_strings_and_repeated_tokens():
    one, many = MultinomialNB(alpha=1.0), MultinomialNB(alpha=1.0)
    for text, y in [("a a a b", "x"), ("b c", "y"), ("a c c", "x"), ("d d", "y")]:
        one.learn_one(text, y)
        one.learn_one(text, y)  # the same string object again: the cached tokens
        many.learn_many([{"text": text}] * 2, [y, y])
    _same_state(one, many)
    for text in ("a d", "c c c", "zz"):
        got = one.predict_proba_one(text)
        np.testing.assert_allclose([got[c] for c in one.classes],
                                   many.predict_proba_many([{"text": text}])[0], atol=1e-12)


def test_prior_follows_a_merge_and_a_changed_dict():
    a, b = MultinomialNB(alpha=1.0), MultinomialNB(alpha=1.0)
    for x, y, w in _stream(40):
        a.learn_one(x, y, w)
    x = {"text": "free lunch now"}
    before = a.predict_proba_one(x)
    b.learn_many([{"text": "free lunch"}] * 30, ["ham"] * 30)
    a.merge(b)
    after = a.predict_proba_one(x)
    np.testing.assert_allclose([after[c] for c in a.classes], a.predict_proba_many([x])[0], atol=1e-12)
    assert after["ham"] > before["ham"]
    x["text"] = "cash prize"  # the same dict, a new value: not the cached tokens
    got = a.predict_proba_one(x)
    np.testing.assert_allclose([got[c] for c in a.classes], a.predict_proba_many([x])[0], atol=1e-12)


def test_river_face_per_event_equals_its_batch_path():
    from streambayes.models.river_compat import MultinomialNB as FaceMNB

    one, many = FaceMNB(), FaceMNB()
    for x, y, w in _stream(80):
        w = float(round(w))  # whole weights: repeated additions of a count equal its product
        counts = {word: 1 + len(word) % 2 for word in x["text"].lower().split()} or {"empty": 1}
        if one.classes:
            got = one.predict_proba_one(counts)
            ref = many.predict_proba_many([counts])[0]
            np.testing.assert_allclose([got[c] for c in one.classes], ref, rtol=0, atol=1e-12)
        one.learn_one(counts, y, w)
        many.learn_many([counts], [y], [w])
    _same_state(one, many)


def test_bucket_ids_equal_buckets_cached_or_not():
    from streambayes.features.hashing import FeatureHasher

    for cache_size in (0, 3, 2**19):
        h, ref = FeatureHasher(2**20, cache_size=cache_size), FeatureHasher(2**20, cache_size=0)
        for tokens in (["a", "b", "a"], ["a", "b"], ["c", "d", "e", "f", "a"], [], ["é", "a"]):
            got = h.bucket_ids(tokens)
            assert got.dtype == np.int64 and got.tolist() == ref.buckets(tokens)
