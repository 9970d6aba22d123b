"""One deadline policy for every command when the broker is down: connecting gives up after
STREAMBAYES_KAFKA_CONNECT_DEADLINE seconds with one line and exit 1, never a hang or a trace."""

import socket

import pytest

from streambayes.cli import main


@pytest.fixture()
def dead_broker(monkeypatch, tmp_path):
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("STREAMBAYES_KAFKA_CONNECT_DEADLINE", "0.5")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one.jsonl").write_text('{"text": "a", "label": "x"}\n')
    return f"kafka://127.0.0.1:{port}"


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
@pytest.mark.parametrize("argv", [
    "produce one.jsonl --to {b}/t",
    "produce one.jsonl --to {b}/t --partitions 2",
    "replay {b}/t",
    "learn --source {b}/t --snapshots s",
    "learn --source {b}/t --snapshots s --partitions 0",
    "predict --source {b}/t --sink out.jsonl --snapshots s",
    "learn --source one.jsonl --snapshots {b}/state",
    "predict --source one.jsonl --sink out.jsonl --snapshots {b}/state",
    "rank one.jsonl --snapshots {b}/state --key r",
])
def test_every_command_gives_up_connecting_with_one_line(dead_broker, argv, client, capsys, monkeypatch):
    monkeypatch.setenv("STREAMBAYES_KAFKA_CLIENT", client)
    assert main(argv.format(b=dead_broker).split()) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("streambayes: error: connect to 127.0.0.1:")
    assert "gave up after 0.5 s" in err[-1]
    assert not any("Traceback" in line for line in err)
