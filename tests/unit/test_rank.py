"""``streambayes rank`` (issue 15 item 7): a reading list per reader from a per-key snapshot,
with clues; per-key posteriors carry clues too."""

import json

import pytest

from streambayes.cli import main
from streambayes.models.perkey import PerKeyModel
from tests.unit.test_perkey_cli import READERS, TOPICS, write_events


@pytest.fixture()
def learned(tmp_path):
    write_events(tmp_path / "train.jsonl", n=480)
    assert main(["learn", "--source", str(tmp_path / "train.jsonl"), "--snapshots",
                 str(tmp_path / "snaps"), "--model", "mnb", "--per-key"]) == 0
    articles = [{"id": f"a{i}", "text": TOPICS[i % 3]} for i in range(9)]
    articles.insert(4, {"id": "broken", "text": 7})  # not text: a dead letter, not a crash
    path = tmp_path / "today.jsonl"
    path.write_text("\n".join(json.dumps(a) for a in articles) + "\n" + "{not json\n")
    return tmp_path


def test_each_reader_gets_the_articles_of_their_interest_first_with_clues(learned, capsys):
    capsys.readouterr()
    assert main(["rank", str(learned / "today.jsonl"), "--snapshots", str(learned / "snaps"),
                 "--key", "r0,r1", "--clues", "2"]) == 0
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    assert "2 bad records skipped" in captured.err
    for reader in ("r0", "r1"):
        mine = [line for line in lines if line["key"] == reader]
        assert [line["rank"] for line in mine] == list(range(1, 10))
        liked = TOPICS[READERS.index(reader) % 3]
        first = {int(line["id"][1:]) % 3 for line in mine[:3]}
        assert first == {TOPICS.index(liked)}, (reader, mine)
        assert mine[0]["p_positive"] > 0.5 > mine[-1]["p_positive"]
        assert all(a["log_odds"] >= b["log_odds"] for a, b in zip(mine, mine[1:], strict=False))
        assert mine[0]["positive"] == "interesting"
        assert len(mine[0]["clues"]) == 2 and mine[0]["clues"][0][0] in {f"tok:{w}" for w in liked.split()}


def test_top_out_file_dead_letters_and_readers_from_the_articles_keys(learned, capsys):
    out, dead = learned / "lists.jsonl", learned / "dead.jsonl"
    keyed = learned / "keyed.jsonl"
    keyed.write_text("".join(json.dumps({"id": f"k{i}", "key": READERS[i % 2], "text": TOPICS[i % 3]})
                             + "\n" for i in range(12)))
    assert main(["rank", str(keyed), "--snapshots", str(learned / "snaps"), "--top", "2",
                 "--out", str(out), "--dead-letter", str(dead)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((line["key"], line["rank"]) for line in lines) == [("r0", 1), ("r0", 2),
                                                                    ("r1", 1), ("r1", 2)]
    assert not dead.exists() or dead.read_text() == ""
    assert main(["rank", str(learned / "today.jsonl"), "--snapshots", str(learned / "snaps"),
                 "--out", str(out), "--dead-letter", str(dead)]) == 2  # no keys and no --key
    assert "name the readers with --key" in capsys.readouterr().err


def test_rank_refuses_a_snapshot_that_is_not_per_key(tmp_path, capsys):
    write_events(tmp_path / "train.jsonl", n=60)
    assert main(["learn", "--source", str(tmp_path / "train.jsonl"), "--snapshots",
                 str(tmp_path / "plain"), "--model", "mnb"]) == 0
    assert main(["rank", str(tmp_path / "train.jsonl"), "--snapshots", str(tmp_path / "plain"),
                 "--key", "r0"]) == 2
    assert "not a per-key model" in capsys.readouterr().err
    assert main(["rank", str(tmp_path / "train.jsonl"), "--snapshots", str(tmp_path / "none"),
                 "--key", "r0"]) == 2


def test_per_key_clues_come_from_the_readers_own_model_once_it_knows_two_classes():
    m = PerKeyModel("mnb")
    sport, money = {"text": "goal striker"}, {"text": "stocks rates"}
    m.learn_many([sport, money, sport, money], ["interesting", "not", "not", "interesting"],
                 keys=["ann", "ann", "bob", "bob"])
    m.learn_many([money], ["not"], keys=["carl"])  # one class only: the global learner explains
    ann = m.clues_many([sport], ["ann"], 3)[0]
    assert ann == m.user_model("ann").clues_one(sport, 3) and ann
    assert m.clues_one(sport, "carl", 3) == m.global_model.clues_one(sport, 3)
    assert m.clues_one(sport, "newcomer", 3) == m.global_model.clues_one(sport, 3)


def test_per_key_predict_posteriors_carry_clues(learned):
    query = learned / "query.jsonl"
    write_events(query, n=16, labelled=False)
    out = learned / "posteriors.jsonl"
    assert main(["predict", "--source", str(query), "--sink", str(out), "--snapshots",
                 str(learned / "snaps"), "--per-key", "--clues", "3"]) == 0
    posteriors = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(posteriors) == 16 and all(len(p["clues"]) == 3 for p in posteriors)
