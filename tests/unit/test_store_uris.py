"""``--snapshots`` chooses the store by URI: a directory, kafka://, s3:// (here: a local moto
server); any other scheme is a one-line usage error and creates nothing."""

import json
from pathlib import Path

import pytest

from streambayes.cli import main
from streambayes.runtime.stores import location, open_store, split_locations
from streambayes.runtime.stores.s3 import S3SnapshotStore
from streambayes.snapshot.store import SnapshotStore
from tests.store_conformance import s3_client  # noqa: F401 (a fixture)

LINES = [json.dumps({"id": f"m{n}", "text": ("win cash prize now", "see you at lunch")[n % 2],
                     "label": ("spam", "ham")[n % 2]}) for n in range(200)]


@pytest.fixture
def train(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(LINES) + "\n")
    return path


def _one_line_usage_error(capsys, argv) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err, err
    return err


@pytest.mark.parametrize("command", [
    ["learn", "--source", "train.jsonl", "--snapshots"],
    ["predict", "--source", "train.jsonl", "--sink", "out.jsonl", "--snapshots"],
    ["snapshot", "ls"],
    ["snapshot", "show"],
])
@pytest.mark.parametrize("uri", ["kafkaa://h:9092/state", "gs://bucket/x", "s3://B/x", "kafka://nohost/"])
def test_an_unknown_or_bad_store_uri_is_a_usage_error_and_creates_nothing(train, capsys, command, uri):
    before = sorted(p.name for p in train.parent.iterdir())
    err = _one_line_usage_error(capsys, [*command, uri])
    assert "store" in err or "URI" in err
    assert sorted(p.name for p in train.parent.iterdir()) == before  # no 'kafkaa:' or 'gs:' directory


def test_locations():
    assert location("state/sms") == Path("state/sms") and location("file:///tmp/x") == Path("/tmp/x")
    assert location("kafka://h:1,g:2/state") == "kafka://h:1,g:2/state"
    assert split_locations("a, s3://b/p,kafka://h:1,g:2/t,b") == ("a", "s3://b/p", "kafka://h:1,g:2/t", "b")
    assert isinstance(open_store("d"), SnapshotStore)


def test_learn_predict_and_snapshot_on_s3(train, s3_client, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_client.endpoint)
    s3_client.create_bucket(Bucket="models")
    uri = "s3://models/sms/state"
    assert isinstance(open_store(uri), S3SnapshotStore)
    assert main(["learn", "--source", "train.jsonl", "--snapshots", uri, "--model", "mnb",
                 "--every", "50", "--batch-size", "50", "--keep", "2"]) == 0
    keys = sorted(o["Key"] for o in s3_client.list_objects_v2(Bucket="models")["Contents"])
    assert keys == ["sms/state/snapshot-000003.sbs", "sms/state/snapshot-000004.sbs"]
    query = train.parent / "q.jsonl"
    query.write_text('{"id": "q1", "text": "win a prize"}\n')
    assert main(["predict", "--source", str(query), "--sink", "out.jsonl", "--snapshots", uri]) == 0
    (post,) = map(json.loads, Path("out.jsonl").read_text().splitlines())
    assert (post["decision"], post["snapshot"]) == ("spam", "000004")
    capsys.readouterr()
    assert main(["snapshot", "show", uri]) == 0
    assert json.loads(capsys.readouterr().out)["events"] == 200
    assert main(["snapshot", "merge", uri, uri + "-copy", "--to", "s3://models/merged"]) == 2  # no copy yet
    capsys.readouterr()
    assert main(["snapshot", "merge", uri, "--to", "s3://models/merged"]) == 0
    assert "into s3://models/merged as 000001" in capsys.readouterr().out
    assert not any(p.name.startswith("s3") for p in train.parent.iterdir())


def test_per_key_needs_a_snapshot_directory(train, capsys):
    err = _one_line_usage_error(capsys, ["learn", "--source", "train.jsonl", "--per-key",
                                         "--snapshots", "s3://models/perkey"])
    assert "--per-key needs a snapshot directory" in err


def test_a_predictor_keeps_serving_when_its_store_stops_answering(caplog):
    from streambayes.errors import SnapshotError
    from streambayes.models import make_model
    from streambayes.runtime.loops.predict import ModelWatcher
    from streambayes.snapshot.store import MemorySnapshotStore

    class Flaky(MemorySnapshotStore):
        down = False

        def _numbers(self):
            if self.down:
                raise SnapshotError("cannot read the state topic: broker unreachable")
            return super()._numbers()

    model = make_model("mnb")
    model.learn_many(model.featurize([{"text": "win cash"}, {"text": "lunch"}]), ["spam", "ham"])
    store = Flaky()
    store.write(model.to_state(), model="mnb", positions={"e": {"0": 2}}, events=2)
    watcher = ModelWatcher([store])
    assert watcher.check() and watcher.current.ids == ("000001",)
    store.down = True
    assert watcher.check() is False and watcher.current.ids == ("000001",)
    assert "still serving 000001" in caplog.text
    store.down = False
    store.write(model.to_state(), model="mnb", positions={"e": {"0": 2}}, events=2)
    assert watcher.check() and watcher.current.ids == ("000002",)


def test_snapshot_ls_show_and_merge_name_a_groups_shards_on_s3(train, s3_client, monkeypatch,  # noqa: F811
                                                               capsys):
    """A group's state under an S3 prefix (one child per partition) is listed, shown and merged
    by shard name, as a directory's is (the names once came from the store's repr: "', keep=5)")."""
    from tests.unit.test_group_learn import TOPIC, FakeGroup, FakeMember, drive, learner

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_client.endpoint)
    s3_client.create_bucket(Bucket="models")
    uri = "s3://models/group"
    group = FakeGroup({0: 20, 1: 31})
    member = FakeMember(group, "a")
    gl = learner(member, open_store(uri))
    member.pending.append(("assigned", [0, 1]))
    drive(gl, member, 3)
    gl.checkpoint()
    names = [f"partition-{TOPIC}-0", f"partition-{TOPIC}-1"]
    capsys.readouterr()
    assert main(["snapshot", "ls", uri]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == [f"{name}/000001" for name in names]
    assert main(["snapshot", "show", uri]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {name: head["events"] for name, head in shown.items()} == dict(zip(names, (19, 29), strict=True))
    assert main(["snapshot", "merge", uri, "--to", "s3://models/one"]) == 0
    merged = open_store("s3://models/one").latest()
    assert merged.events == 48 and merged.config["merged_from"] == [
        f"{uri}/{name}:000001" for name in names]
