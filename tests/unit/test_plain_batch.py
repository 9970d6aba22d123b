"""The learner's plain JSONL batches (runtime/records/plain_batch.py) give what decoding gives."""

from __future__ import annotations

import gc
import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streambayes.models import make_model
from streambayes.runtime.loops.learn import LearnLoop
from streambayes.runtime.records.decode import Decoded, Decoder
from streambayes.runtime.records.limits import RecordLimits
from streambayes.runtime.records.sources import MemorySource, Record
from streambayes.snapshot.store import MemorySnapshotStore

PLAIN = [{"id": "a", "label": "spam", "text": "WIN cash"}, {"id": "b", "label": "ham", "text": "lunch?"},
         {"id": "c", "label": "ham", "text": "see you", "key": "k1"}]
NOT_PLAIN = [  # each decodes differently from a plain event, or not at all
    {"id": 7, "label": "ham", "text": "int id"}, {"id": "d", "label": 1, "text": "int label"},
    {"id": "e", "label": " ", "text": "blank label"}, {"id": "f", "text": "no label"},
    {"id": "g", "label": "ham", "text": ""}, {"id": "h", "label": "ham", "text": "t", "weight": 2},
    {"id": "i", "label": "ham", "text": "t", "features": {"n": 1}}, {"label": "ham", "text": "no id"},
    {"id": "j", "label": "ham", "text": "t", "key": None}, {"id": "k", "label": "ham", "text": 5},
    {"id": "l", "label": "ham", "text": "t", "extra": 1}, {"id": None, "label": "ham", "text": "t"},
    {"id": "m" * 2000, "label": "ham", "text": "long id"}]


def _records(events):
    return [Record(json.dumps(e).encode(), None, "t", 0, i, None) for i, e in enumerate(events)]


def _check_against_decode(decoder: Decoder, records: list[Record]) -> bool:
    """plain_batch equals decode_many wherever it answers; returns whether it answered."""
    plain = decoder.plain_batch(records)
    if plain is None:
        return False
    decoded = decoder.decode_many(records)
    assert all(isinstance(d, Decoded) for d in decoded)
    xs, labels = plain
    assert xs == [d.x for d in decoded] and labels == [d.label for d in decoded]
    assert all(type(y) is str for y in labels) and all(d.weight == 1.0 for d in decoded)
    return True


def test_plain_batches_answer_and_others_do_not():
    decoder = Decoder("jsonl")
    assert _check_against_decode(decoder, _records(PLAIN * 3))
    for odd in NOT_PLAIN:
        assert decoder.plain_batch(_records([*PLAIN, odd])) is None, odd
    assert Decoder("jsonl", require_label=False).plain_batch(_records(PLAIN)) is None
    assert Decoder("jsonl", limits=RecordLimits(max_text_chars=5)).plain_batch(_records(PLAIN)) is None
    assert Decoder("jsonl").plain_batch(_records(PLAIN[:1])) is None  # one record: decode it
    assert Decoder("jsonl", limits=RecordLimits(max_record_bytes=50)).plain_batch(_records(PLAIN)) is None
    assert _check_against_decode(decoder, _records([{**e, "text": "[{" * 40 + "9" * 5000} for e in PLAIN]))
    head = [Record(r.value, None, "t", 0, r.offset, None, None, 2 << 20) for r in _records(PLAIN)]
    assert decoder.plain_batch(head) is None  # only the head of an oversized record


texts = st.text(max_size=12)
events = st.fixed_dictionaries(
    {"id": st.one_of(texts, st.integers(0, 9))},
    optional={"label": st.one_of(st.sampled_from(["ham", "spam", " ", ""]), st.integers(0, 1)),
              "text": st.one_of(texts, st.none()), "key": st.one_of(texts, st.none()),
              "weight": st.sampled_from([1, 1.0, 0.5])})


@settings(max_examples=200, deadline=None)
@given(st.lists(events, min_size=2, max_size=5))
def test_random_batches_equal_decode_wherever_the_plain_path_answers(batch):
    _check_against_decode(Decoder("jsonl"), _records(batch))


def _loop(values, plain: bool, model: str = "nb"):
    decoder = Decoder("jsonl")
    if not plain:
        decoder.plain_batch = lambda records: None  # the general path only
    loop = LearnLoop(MemorySource({"learn": values}), decoder, MemorySnapshotStore(),
                     lambda: make_model(model), model, batch_size=16)
    try:
        stats = loop.run()
    finally:
        gc.unfreeze()
    return loop, stats


def test_learn_loop_learns_the_same_by_either_path():
    rng = np.random.default_rng(0)
    words = ["free", "cash", "lunch", "noon", "prize", "call", "now"]
    events = [{"id": f"m{i}", "label": ["ham", "spam"][int(rng.integers(2))],
               "text": " ".join(rng.choice(words, 4))} for i in range(200)]
    events[37] = {"id": "bad", "label": "ham", "text": ""}  # one dead letter: its batch decodes
    values = [json.dumps(e).encode() for e in events]
    fast, fast_stats = _loop(values, plain=True)
    slow, slow_stats = _loop(values, plain=False)
    assert fast_stats.events == slow_stats.events == 199
    assert fast_stats.dead_letters == slow_stats.dead_letters == {"empty_event": 1}
    a, b = fast.model.to_state(), slow.model.to_state()
    np.testing.assert_array_equal(a["class_counts"], b["class_counts"])
    for ca, cb in zip(a["components"], b["components"], strict=True):
        for key in ("cols", "counts", "totals"):
            if key in ca:
                np.testing.assert_array_equal(ca[key], cb[key])
    assert fast.calibrator.to_state()["loss"].tolist() == slow.calibrator.to_state()["loss"].tolist()


def test_a_plain_batch_the_model_refuses_is_learned_one_by_one():
    from streambayes.models.naive_bayes import MultinomialNB

    values = [json.dumps({"id": f"m{i}", "label": f"c{i % 3}", "text": "a b"}).encode() for i in range(9)]
    loop = LearnLoop(MemorySource({"learn": values}), Decoder("jsonl"), MemorySnapshotStore(),
                     lambda: MultinomialNB(max_classes=2), "mnb", batch_size=16)
    try:
        stats = loop.run()
    finally:
        gc.unfreeze()
    assert stats.events == 6 and stats.dead_letters == {"limit": 3}


def test_text_events_featurize_as_their_dicts():
    """The plain path's TextEvents skip the walk over each dict: the batch is the same, words,
    places and slices included; a featurizer whose text fields do not name "text" walks them."""
    from streambayes.features import Featurizer
    from streambayes.features.batch import TextEvents

    texts = ["WIN cash now", "lunch? at 1", "Café au lait, s'il vous plaît", "ok ok ok", "x"]
    for featurizer in (Featurizer(2**20), Featurizer(2**20, text_fields=("body",))):
        for keep_words, keep_places in ((False, False), (True, False), (False, True)):
            a = featurizer.featurize([{"text": t} for t in texts], keep_words, keep_places)
            b = featurizer.featurize(TextEvents(texts), keep_words, keep_places)
            for x, y in ((a, b), (a.slice(1, 4), b.slice(1, 4))):
                np.testing.assert_array_equal(x.tokens.indptr, y.tokens.indptr)
                np.testing.assert_array_equal(x.tokens.indices, y.tokens.indices)
                assert {k: list(v) for k, v in x.categorical.items()} == \
                    {k: list(v) for k, v in y.categorical.items()}
                assert x.words == y.words
                if x.word_source is not None:
                    assert x.word_source.words() == y.word_source.words()
                if x.places is not None:
                    assert x.places.names(np.arange(len(x.tokens.indices))) == \
                        y.places.names(np.arange(len(y.tokens.indices)))
    assert Featurizer(2**20, text_fields=("body",)).featurize(TextEvents(texts)).categorical["text"][0] \
        == "WIN cash now"
