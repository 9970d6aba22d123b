"""Token options, streaming TF/IDF/length transforms (TWCNB) and alpha="auto" (issue 11)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from streambayes.errors import FeatureError, ModelError
from streambayes.features import Featurizer, SparseRows
from streambayes.features.text import ADDRESS_TOKEN_PATTERN, ENGLISH_STOP_WORDS, Tokenizer
from streambayes.models import make_model, model_from_state, text_transform
from streambayes.snapshot import pack, unpack
from streambayes.stats.evidence import GRID, evidence_alpha, log_evidence

DOCS = ["Free prize now, claim your free prize", "lunch at noon with Bob?", "WIN a prize: call now",
        "meeting notes for the lunch meeting", "free entry to win cash cash cash", "see you at the meeting",
        "café owner wins a prize", "notes: bring the notes", "urgent! claim cash now", "bob said hi"]
LABELS = ["spam", "ham", "spam", "ham", "spam", "ham", "spam", "ham", "spam", "ham"]
TW = {"norm": True, "tf": "log", "idf": True, "length_norm": "l2"}


# -- token options --------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["a bb ccc d_e 4 55 x", "café à la crème, 1 été", "I a b c"])
def test_min_token_length_two_is_sklearns_pattern(text):
    assert Tokenizer(min_token_length=2)(text) == re.findall(r"\b\w\w+\b", text.lower())
    assert Tokenizer(token_pattern=r"\b\w\w+\b")(text) == Tokenizer(min_token_length=2)(text)


def test_token_pattern_with_a_group_and_case():
    assert Tokenizer(token_pattern=r"#(\w+)", lowercase=False)("see #Spam and #ham") == ["Spam", "ham"]
    with pytest.raises(FeatureError, match="token_pattern"):
        Tokenizer(token_pattern="(")
    with pytest.raises(FeatureError, match="one group"):
        Tokenizer(token_pattern=r"(a)(b)")


def test_stop_words_and_ngrams():
    assert Tokenizer(stop_words="english")("The prize is yours") == ["prize"]
    assert "the" in ENGLISH_STOP_WORDS and "prize" not in ENGLISH_STOP_WORDS
    assert Tokenizer(stop_words=["prize"])("the prize") == ["the"]
    t = Tokenizer(ngram_range=(1, 3))
    assert t("a b c") == ["a", "b", "c", "a b", "b c", "a b c"]
    assert Tokenizer(ngram_range=(2, 2))("a b c") == ["a b", "b c"]
    assert Tokenizer(ngram_range=(1, 2))("x y z") == Tokenizer(bigrams=True)("x y z")
    for bad in [(0, 1), (2, 1), "12", (1,)]:
        with pytest.raises(FeatureError):
            Tokenizer(ngram_range=bad)
    with pytest.raises(FeatureError):
        Tokenizer(min_token_length=0)
    with pytest.raises(FeatureError):
        Tokenizer(stop_words="french")


def test_token_options_reach_the_model_and_survive_snapshot_and_clone():
    opts = {"min_token_length": 2, "stop_words": ["now", "prize"], "ngram_range": [1, 2],
            "token_pattern": r"[a-z]+"}
    m = make_model("mnb", **opts)
    m.learn_many([{"text": t} for t in DOCS], LABELS)
    buckets = set(m.featurize([{"text": "a prize now free entry"}]).tokens.indices.tolist())
    f = Featurizer()
    assert buckets == {f.hasher.bucket(w) for w in ("free", "entry", "free entry")}
    state = m.to_state()
    data, _ = pack(state, snapshot_id="1", model=m.name, config={}, positions={}, events=10,
                   created_at="2024-01-01T00:00:00Z")
    for other in (model_from_state(unpack(data)[1]), m.clone()):
        assert other.params() == m.params()
        assert {k: other.params()[k] for k in opts} == opts
    restored = model_from_state(unpack(data)[1])
    xs = [{"text": t} for t in DOCS]
    assert np.array_equal(restored.predict_log_proba_many(xs), m.predict_log_proba_many(xs))
    with pytest.raises(ModelError):
        m.merge(make_model("mnb", **{**opts, "min_token_length": 3}))


# -- TWCNB: streaming transforms -----------------------------------------------------------------
def _reference_twcnb(train: list[str], labels: list[str], test: list[str], alpha: float) -> np.ndarray:
    """Rennie et al. 2003 §4 by hand (TF log(1+tf), IDF log(N/df), L2) + sklearn's ComplementNB(norm)."""
    from sklearn.naive_bayes import ComplementNB

    f = Featurizer()
    tok = [[f.hasher.bucket(w) for w in f.tokenizer(t)] for t in train]
    vocab = sorted({b for doc in tok for b in doc})
    col = {b: i for i, b in enumerate(vocab)}

    def counts(docs):
        X = np.zeros((len(docs), len(vocab)))
        for i, doc in enumerate(docs):
            for b in doc:
                if b in col:
                    X[i, col[b]] += 1
        return X
    X = counts(tok)
    df = (X > 0).sum(axis=0)
    idf = np.log(len(train) / df)

    def weigh(X):
        W = np.log1p(X) * idf
        n = np.sqrt((W ** 2).sum(axis=1, keepdims=True))
        return W / np.where(n > 0, n, 1.0)
    model = ComplementNB(alpha=alpha, norm=True).fit(weigh(X), labels)
    Xt = counts([[f.hasher.bucket(w) for w in f.tokenizer(t)] for t in test])
    return model.predict_log_proba(weigh(Xt))[:, np.argsort(np.argsort(model.classes_))]


@pytest.mark.parametrize("alpha", [1.0, 0.1])
def test_twcnb_equals_the_batch_reference(alpha):
    test = ["free cash prize", "lunch meeting notes bob", "claim now", "totally unseen words"]
    m = make_model("cnb", alpha=alpha, **TW)
    m.learn_many([{"text": t} for t in DOCS], LABELS)
    ours = m.predict_log_proba_many([{"text": t} for t in test])
    ref = _reference_twcnb(DOCS, LABELS, test, alpha)[:, [sorted(m.classes).index(c) for c in m.classes]]
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-9)


POSTS = ["From: jdoe@cs.cmu.edu (John Doe)\nSubject: Re: X11R5 on sun4\n\nxterm-color won't start",
         "From: ann@mac.apple.com\nSubject: PowerBook 170's RAM\n\nThe 4 MB SIMM isn't cheap.",
         "From: bob@ucsd.edu\nSubject: Re: Yankees\n\nThe Yankees' 3.5 game lead... Café-owner",
         "From: jdoe@cs.cmu.edu\nSubject: twm vs. mwm\n\nmwm on x11r5 is fine",
         "From: cathy@mac.apple.com\nSubject: Quadra 700\n\nmac-ii or quadra? e-mail me",
         "From: rick@ucsd.edu\nSubject: Re: Red Sox\n\nsox won 5-3, don't ask."]
GROUPS = ["windows.x", "sys.mac", "baseball", "windows.x", "sys.mac", "baseball"]
QUERIES = ["jdoe@cs.cmu.edu asks about xterm-color", "mac.apple.com quadra", "yankees 5-3 sox",
           "never seen@at.all"]


@pytest.mark.parametrize("ngram_range", [(1, 1), (1, 2)])
def test_address_pattern_tokenizes_as_sklearns_analyzer(ngram_range):
    from sklearn.feature_extraction.text import CountVectorizer

    ref = CountVectorizer(token_pattern=ADDRESS_TOKEN_PATTERN, ngram_range=ngram_range).build_analyzer()
    ours = Tokenizer(token_pattern=ADDRESS_TOKEN_PATTERN, ngram_range=ngram_range)
    for text in POSTS + QUERIES + ["end.\nNext -dash- 'quote' a.b.c@d-e", "über.café été-2"]:
        assert ours(text) == ref(text)
    assert "jdoe@cs.cmu.edu" in ours(POSTS[0]) and "won't" in ours(POSTS[0])


@pytest.mark.parametrize("alpha", [1.0, 0.1])
def test_address_bigram_twcnb_equals_sklearns_tfidf_complement_pipeline(alpha):
    """Streaming TWCNB with scikit-learn's sublinear TF (1 + log tf), unnormalised weights, smooth IDF,
    bigrams and the address pattern, learned in one batch, is scikit-learn's
    TfidfVectorizer(sublinear_tf) + ComplementNB on the same tokens."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.naive_bayes import ComplementNB
    from sklearn.pipeline import make_pipeline

    opts = {"token_pattern": ADDRESS_TOKEN_PATTERN, "ngram_range": (1, 2)}
    m = make_model("cnb", alpha=alpha, norm=False, tf="sublinear", idf="smooth", length_norm="l2", **opts)
    m.learn_many([{"text": t} for t in POSTS], GROUPS)
    ours = m.predict_log_proba_many([{"text": t} for t in QUERIES])
    pipe = make_pipeline(TfidfVectorizer(sublinear_tf=True, **opts), ComplementNB(alpha=alpha, norm=False))
    ref = pipe.fit(POSTS, GROUPS).predict_log_proba(QUERIES)
    ref = ref[:, [list(pipe.classes_).index(c) for c in m.classes]]
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-9)


def test_sublinear_tf_is_one_plus_log_and_stays_continuous_below_one():
    rows = SparseRows(np.array([0, 5]), np.arange(5), np.array([1.0, 2.0, 7.0, 0.5, 0.0]))
    got = text_transform.transform(rows, "sublinear", None, False, None).values
    np.testing.assert_allclose(got, [1.0, 1 + math.log(2), 1 + math.log(7), 0.5, 0.0], rtol=0, atol=1e-15)


def test_streaming_idf_counts_a_batch_before_weighing_it():
    """Learned event by event, each event sees the df of the events before it and itself: the
    table then differs from the batch one (streaming IDF), but df and N are the same."""
    one, many = make_model("cnb", **TW), make_model("cnb", **TW)
    for t, y in zip(DOCS, LABELS, strict=True):
        one.learn_one({"text": t}, y)
    many.learn_many([{"text": t} for t in DOCS], LABELS)
    a, b = one.to_state()["components"][0], many.to_state()["components"][0]
    assert a["df"]["n_docs"] == b["df"]["n_docs"] == 10.0
    assert np.array_equal(a["df"]["ids"], b["df"]["ids"]) and np.array_equal(a["df"]["df"], b["df"]["df"])
    assert a["counts"].shape != b["counts"].shape or not np.allclose(a["counts"], b["counts"])


@pytest.mark.parametrize("split", [0, 3, 7])
def test_df_statistics_merge_equals_sequential_and_decay_scales_them(split):
    xs = [{"text": t} for t in DOCS]
    a, b, seq = (make_model("mnb", tf="log", idf="smooth", length_norm="l2") for _ in range(3))
    a.learn_many(xs[:split], LABELS[:split]) if split else None
    b.learn_many(xs[split:], LABELS[split:])
    for x, y in zip(xs, LABELS, strict=True):
        seq.learn_one(x, y)
    a.merge(b)
    da, ds = a.to_state()["components"][0]["df"], seq.to_state()["components"][0]["df"]
    assert da["n_docs"] == ds["n_docs"]
    assert np.array_equal(da["ids"], ds["ids"]) and np.array_equal(da["df"], ds["df"])
    comp = a._components[0]
    comp.scale(0.5)
    assert comp.df.n_docs == 5.0 and np.array_equal(comp.df.table.sorted_counts()[0], da["df"] * 0.5)


def test_transforms_round_trip_through_snapshots():
    for name, params in [("cnb", TW), ("nb", {"tf": "log", "idf": "smooth"}), ("mnb", {"length_norm": "l2"}),
                         ("cnb", {**TW, "tf": "sublinear"})]:
        m = make_model(name, **params)
        xs = [{"text": t} for t in DOCS]
        m.learn_many(xs[:6], LABELS[:6])
        data, _ = pack(m.to_state(), snapshot_id="1", model=m.name, config={}, positions={}, events=6,
                       created_at="2024-01-01T00:00:00Z")
        r = model_from_state(unpack(data)[1])
        assert r.params() == m.params()
        assert np.array_equal(r.predict_log_proba_many(xs), m.predict_log_proba_many(xs))
        for model in (r, m):
            model.learn_many(xs[6:], LABELS[6:])
        assert np.array_equal(r.predict_log_proba_many(xs), m.predict_log_proba_many(xs))


def test_transform_options_are_checked():
    for bad in [{"tf": "sqrt"}, {"idf": "yes"}, {"length_norm": "l1"}]:
        with pytest.raises(ModelError):
            make_model("mnb", **bad)
    with pytest.raises(ModelError):
        make_model("bnb", tf="log")
    with pytest.raises(ModelError):
        make_model("bnb", alpha="auto")


# -- alpha="auto" ----------------------------------------------------------------------------------
def test_log_evidence_is_the_dirichlet_formula():
    counts = np.array([[3.0, 0.0, 1.0], [0.0, 2.0, 5.0]])
    totals, v, a = counts.sum(axis=1), 3, 0.7
    want = sum(math.lgamma(v * a) - math.lgamma(totals[c] + v * a)
               + sum(math.lgamma(n + a) - math.lgamma(a) for n in counts[c]) for c in range(2))
    assert log_evidence(counts, totals, v, np.array([a]))[0] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("fractional", [False, True])
def test_log_evidence_tallies_equal_counts_exactly_enough(fractional):
    """Equal counts share one lgamma (bincount for whole counts, unique otherwise): the sum is the
    term-by-term one to rounding."""
    rng = np.random.default_rng(7)
    counts = rng.poisson(rng.gamma(0.3, 4.0, size=(3, 2000))).astype(float)
    if fractional:
        counts *= rng.choice([1.0, 0.5, 1 / 3], size=counts.shape)
    totals, alphas = counts.sum(axis=1), np.array([0.01, 0.3, 2.0])
    nz = counts[counts > 0]
    direct = [sum(math.lgamma(n + a) - math.lgamma(a) for n in nz)
              + sum(math.lgamma(2000 * a) - math.lgamma(t + 2000 * a) for t in totals) for a in alphas]
    np.testing.assert_allclose(log_evidence(counts, totals, 2000, alphas), direct, rtol=1e-12)


def test_evidence_alpha_finds_the_maximum():
    rng = np.random.default_rng(3)
    counts = rng.poisson(rng.gamma(0.2, 5.0, size=(2, 300))).astype(float)
    totals = counts.sum(axis=1)
    fine = np.exp(np.linspace(np.log(GRID[0]), np.log(GRID[-1]), 4001))
    best = fine[np.argmax(log_evidence(counts, totals, 300, fine))]
    assert evidence_alpha(counts, totals, 300) == pytest.approx(best, rel=0.05)
    assert evidence_alpha(np.zeros((2, 3)), np.zeros(2), 3) == 1.0


# idf weighs each batch by the document frequencies after it: its counts depend on the batching
AUTO_MODELS = [("mnb", {}), ("cnb", {}), ("nb", {}),
               ("cnb", {"norm": True, "tf": "log", "length_norm": "l2"})]


def _restored(model):
    data, _ = pack(model.to_state(), snapshot_id="1", model=model.name, config={}, positions={},
                   events=model.n_events, created_at="2024-01-01T00:00:00Z")
    return model_from_state(unpack(data)[1])


def _learn_in(model, xs, ys, sizes, *, predict=False, restore_at=None):
    """Learn ``xs`` in mini-batches of ``sizes`` (then one by one), predicting each batch first
    if ``predict``, through a snapshot and restore after ``restore_at`` events."""
    i, sizes = 0, list(sizes)
    while i < len(xs):
        n = sizes.pop(0) if sizes else 1
        if predict:
            model.predict_log_proba_many(xs[i:i + n])
        if n == 1:
            model.learn_one(xs[i], ys[i])
        else:
            model.learn_many(xs[i:i + n], ys[i:i + n])
        i += n
        if restore_at is not None and i == restore_at:
            model = _restored(model)
    return model


def _evidence_fit(model) -> float:
    comp = model._components[0]
    counts, totals = comp._evidence_counts(comp.table.sorted_counts(), comp.totals)
    return evidence_alpha(counts, totals, comp.vocabulary)


@pytest.mark.parametrize(("name", "opts"), AUTO_MODELS)
def test_auto_alpha_is_fixed_by_the_event_count(name, opts):
    """alpha="auto" is refitted after events 1, 2, 3, …, 8, 10, 12, …, 40, 48: the same alpha and
    bit-identical predictions whatever the mini-batches, predictions and restores."""
    xs, ys = [{"text": t} for t in DOCS * 5], LABELS * 5
    ref = _learn_in(make_model(name, alpha="auto", **opts), xs, ys, [])  # one event at a time
    alpha, p_ref = ref._components[0]._alpha(), ref.predict_log_proba_many(xs)
    at48 = make_model(name, alpha="auto", **opts)
    at48.learn_many(xs[:48], ys[:48])
    assert alpha == _evidence_fit(at48) != 1.0  # fitted after event 48, not 50
    assert alpha != _evidence_fit(ref)
    variants = [dict(sizes=[50]), dict(sizes=[7, 13, 1, 29]), dict(sizes=[3, 40], predict=True),
                dict(sizes=[16, 16], predict=True, restore_at=23), dict(sizes=[23, 27], restore_at=23),
                dict(sizes=[49], restore_at=49)]
    for kw in variants:
        m = _learn_in(make_model(name, alpha="auto", **opts), xs, ys, **kw)
        assert m._components[0]._alpha() == alpha, kw
        assert np.array_equal(m.predict_log_proba_many(xs), p_ref), kw
        assert np.array_equal(_restored(m).predict_log_proba_many(xs), p_ref), kw
    fixed = make_model(name, alpha=alpha, **opts)
    fixed.learn_many(xs, ys)
    np.testing.assert_allclose(fixed.predict_log_proba_many(xs), p_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("name", "opts"), AUTO_MODELS)
def test_auto_alpha_under_merge(name, opts):
    """A merge refits alpha on the merged counts at once; from the next refit point of the summed
    event count on, the merged model has the sequential model's alpha (to rounding of the sums)."""
    xs, ys = [{"text": t} for t in DOCS * 7], LABELS * 7
    a = _learn_in(make_model(name, alpha="auto", **opts), xs[:20], ys[:20], [5, 15], predict=True)
    b = _learn_in(make_model(name, alpha="auto", **opts), xs[20:50], ys[20:50], [30])
    a.merge(b)
    assert a._components[0]._alpha() == _evidence_fit(a) != _evidence_fit(b)
    assert np.array_equal(_restored(a).predict_log_proba_many(xs), a.predict_log_proba_many(xs))
    a.learn_many(xs[50:64], ys[50:64])  # 64 events in all: a refit point
    seq = make_model(name, alpha="auto", **opts)
    seq.learn_many(xs[:64], ys[:64])
    assert a._components[0]._alpha() == pytest.approx(seq._components[0]._alpha(), rel=1e-12)
    np.testing.assert_allclose(a.predict_log_proba_many(xs), seq.predict_log_proba_many(xs),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["mnb", "cnb", "nb"])
def test_the_default_alpha_is_auto_on_counts_and_one_under_transforms(name):
    xs, ys = [{"text": t} for t in DOCS * 2], LABELS * 2
    plain, auto = make_model(name), make_model(name, alpha="auto")
    plain.learn_many(xs, ys)
    auto.learn_many(xs, ys)
    assert plain.params()["alpha"] is None and plain._components[0]._alpha() != 1.0
    assert np.array_equal(plain.predict_log_proba_many(xs), auto.predict_log_proba_many(xs))
    assert _restored(plain).params()["alpha"] is None
    for transform in ({"tf": "log"}, {"idf": True}, {"length_norm": "l2"}):
        weighted, laplace = make_model(name, **transform), make_model(name, alpha=1.0, **transform)
        weighted.learn_many(xs, ys)
        laplace.learn_many(xs, ys)
        assert np.array_equal(weighted.predict_log_proba_many(xs), laplace.predict_log_proba_many(xs))


@pytest.mark.parametrize(("name", "opts"), [("mnb", {}), ("cnb", {"norm": True}), ("bnb", {}), ("nb", {}),
                                            ("mnb", {"tf": "log", "idf": True})])
def test_big_batches_in_parts_give_the_same_model(monkeypatch, name, opts):
    """A batch is scored (and, with plain counts, learned) in parts of about ENTRY_CHUNK token
    entries (at least; more while the scores in flight stay under IN_FLIGHT_BYTES): the same
    state and predictions as in one piece."""
    import streambayes.models.base as base

    xs = [{"text": t, "tld": "biz" if i % 3 else "org"} for i, t in enumerate(DOCS * 4)]
    ys = LABELS * 4
    whole = make_model(name, **opts)
    whole.learn_many(xs, ys)
    monkeypatch.setattr(base, "ENTRY_CHUNK", 7)
    monkeypatch.setattr(base, "IN_FLIGHT_BYTES", 0)
    assert len(base._row_chunks(whole.featurize(xs), base._entries_per_part(2))) > 5
    parts = make_model(name, **opts)
    parts.learn_many(xs, ys)
    assert np.array_equal(parts.predict_log_proba_many(xs), whole.predict_log_proba_many(xs))
    monkeypatch.setattr(base, "ENTRY_CHUNK", 4096)
    assert np.array_equal(parts.predict_log_proba_many(xs), whole.predict_log_proba_many(xs))
    a, b = parts.to_state(), whole.to_state()
    for got, want in zip(a["components"], b["components"], strict=True):
        for key in ("counts", "totals"):
            if key in want:
                assert np.array_equal(got[key], want[key])
