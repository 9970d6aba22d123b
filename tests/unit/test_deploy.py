"""Deployment files: ``docker-compose config`` validates and resolves them, offline.

``config`` needs neither a Docker engine nor the network, so this runs in the unit tier. It is
never skipped: without the ``docker-compose`` binary it fails and says how to install it.
The resolved YAML is read as text (PyYAML is not a dependency): a few lines of indentation
parsing pick out the services, their commands and the declared volumes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BASE = ("docker-compose.yml",)
SCALE_OUT = ("docker-compose.yml", "deploy/docker-compose.scale-out.yml")
SERVICES = {"kafka", "topic-init", "learner", "predictor"}
TOPICS = {"events": 4, "unlabelled": 4, "posteriors": 4, "dead-letters": 1}


def compose_binary() -> str:
    path = shutil.which("docker-compose")
    if path is None:
        pytest.fail("docker-compose not found on PATH: the deployment files cannot be checked. "
                    "Install it with `apt-get install docker-compose` (Debian/Ubuntu).", pytrace=False)
    return path


def compose_env(**variables: str) -> dict[str, str]:
    """The process environment without STREAMBAYES_*/COMPOSE_*/DOCKER_*/KAFKA_* settings, so the
    compose defaults apply; DOCKER_HOST points nowhere, proving no engine is needed."""
    prefixes = ("STREAMBAYES_", "COMPOSE_", "DOCKER_", "KAFKA_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    return env | {"DOCKER_HOST": "unix:///nonexistent/docker.sock", "COMPOSE_PROJECT_NAME": "sbtest",
                  **variables}


def compose_config(files: tuple[str, ...], env_file: Path, **variables: str) -> str:
    """``docker-compose --env-file EMPTY -f F1 [-f F2] config`` from the repository root."""
    argv = [compose_binary(), "--env-file", str(env_file)]
    for name in files:
        argv += ["-f", name]
    run = subprocess.run(argv + ["config"], cwd=REPO, env=compose_env(**variables),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"{' '.join(argv)} config exited {run.returncode}:\n{run.stderr}"
    return run.stdout


def sections(text: str, indent: int) -> dict[str, str]:
    """The mapping keys written at ``indent`` spaces, each with the text of its block."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    key_line = re.compile("^" + " " * indent + r"([^\s#'\"-][^:]*):(.*)$")
    for line in text.splitlines():
        depth = len(line) - len(line.lstrip(" "))
        match = key_line.match(line)
        if match:
            current = blocks.setdefault(match.group(1), [])
            current.append(match.group(2))
        elif line.strip() and (depth < indent or (depth == indent and not line.lstrip().startswith("-"))):
            current = None
        elif current is not None:
            current.append(line)
    return {key: "\n".join(lines) for key, lines in blocks.items()}


def list_items(block: str) -> list[str]:
    """The ``- item`` entries of a block list, unquoted."""
    items = [line.strip()[2:] for line in block.splitlines() if line.strip().startswith("- ")]
    return [item.strip("'\"") for item in items]


def option(argv: list[str], name: str) -> str:
    assert name in argv, f"{name} missing from {argv}"
    return argv[argv.index(name) + 1]


class Resolved:
    """One ``docker-compose config`` output: services, their fields, the declared volumes."""

    def __init__(self, text: str):
        top = sections(text, 0)
        self.services = {name: sections(block, 4) for name, block in sections(top["services"], 2).items()}
        self.volumes = set(sections(top.get("volumes", ""), 2))

    def command(self, service: str) -> list[str]:
        return list_items(self.services[service]["command"])

    def environment(self, service: str) -> dict[str, str]:
        env = {}
        for line in self.services[service]["environment"].splitlines():
            key, colon, value = line.strip().partition(":")
            if colon:
                env[key] = value.strip().strip("'\"")
        return env

    def learners(self) -> list[str]:
        return sorted(s for s in self.services if self.services[s].get("command")
                      and self.command(s)[0] == "learn")


@pytest.fixture(scope="module")
def env_file(tmp_path_factory) -> Path:
    """An empty --env-file, so a developer's own .env cannot change what is checked."""
    path = tmp_path_factory.mktemp("compose") / "empty.env"
    path.write_text("")
    return path


@cache
def _resolved(files: tuple[str, ...], env_file: Path) -> Resolved:
    return Resolved(compose_config(files, env_file))


@pytest.fixture(params=[BASE, SCALE_OUT], ids=["base", "scale-out"])
def resolved(request, env_file) -> Resolved:
    return _resolved(request.param, env_file)


def test_the_services_exist(resolved):
    assert SERVICES <= set(resolved.services), sorted(resolved.services)


def test_kafka_is_the_official_image_in_kraft_mode(resolved):
    kafka = resolved.services["kafka"]
    image = kafka["image"].strip()
    assert re.fullmatch(r"apache/kafka:\d+\.\d+\.\d+", image), f"not a pinned apache/kafka tag: {image}"
    env = resolved.environment("kafka")
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert "KAFKA_ZOOKEEPER_CONNECT" not in env
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] and env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "1"
    assert "kafka-broker-api-versions.sh" in kafka["healthcheck"]


def test_topic_init_creates_the_topics_once_kafka_is_healthy(resolved):
    topic_init = resolved.services["topic-init"]
    assert topic_init["image"].strip() == resolved.services["kafka"]["image"].strip()
    assert "condition: service_healthy" in sections(topic_init["depends_on"], 6)["kafka"]
    squashed = re.sub(r"[\s\\]", "", topic_init["command"] + topic_init.get("entrypoint", ""))
    assert "--create--if-not-exists" in squashed
    for topic, partitions in TOPICS.items():
        assert f"create{topic}{partitions}" in squashed, topic


def test_learner_runs_learn_on_kafka_with_snapshots_and_a_graceful_stop(resolved):
    argv = resolved.command("learner")
    assert argv[0] == "learn"
    assert option(argv, "--source") == "kafka://kafka:9092/events"
    assert option(argv, "--snapshots").startswith(("/snapshots/", "kafka://kafka:9092/"))
    assert option(argv, "--dead-letter") == "kafka://kafka:9092/dead-letters"
    learner = resolved.services["learner"]
    assert learner["stop_signal"].strip() == "SIGTERM" and learner["stop_grace_period"].strip()
    assert "deploy/Dockerfile" in learner["build"]
    depends = sections(learner["depends_on"], 6)["topic-init"]
    assert "condition: service_completed_successfully" in depends
    assert resolved.environment("learner")["STREAMBAYES_KAFKA_CLIENT"] == "kafka-python"


def test_predictor_reads_every_learner_snapshot_directory(resolved):
    argv = resolved.command("predictor")
    assert argv[0] == "predict"
    assert option(argv, "--source") == "kafka://kafka:9092/unlabelled"
    assert option(argv, "--sink") == "kafka://kafka:9092/posteriors"
    learner_dirs = {option(resolved.command(s), "--snapshots") for s in resolved.learners()}
    assert set(option(argv, "--snapshots").split(",")) == learner_dirs
    assert len(learner_dirs) == len(resolved.learners()), "each learner needs its own snapshot directory"


def test_the_snapshots_volume_is_shared_and_read_only_for_the_predictor(resolved):
    assert {"snapshots", "kafka-data"} <= resolved.volumes
    for service in [*resolved.learners(), "predictor"]:
        mounts = resolved.services[service]["volumes"]
        assert "snapshots" in mounts and "/snapshots" in mounts, service
    predictor = resolved.services["predictor"]["volumes"]
    assert ":ro" in predictor or "read_only: true" in predictor


def test_scale_out_learners_own_disjoint_partitions(env_file):
    resolved = _resolved(SCALE_OUT, env_file)
    assert resolved.learners() == ["learner", "learner-1"]
    owned = [option(resolved.command(s), "--partitions").split(",") for s in resolved.learners()]
    assert owned == [["0", "1"], ["2", "3"]]


def test_settings_come_through_environment_substitution(env_file):
    resolved = Resolved(compose_config(BASE, env_file, STREAMBAYES_MODEL="mnb", STREAMBAYES_PARTITIONS="8",
                                       STREAMBAYES_KAFKA_CLIENT="confluent",
                                       STREAMBAYES_KAFKA_SASL_USERNAME="svc-streambayes"))
    assert option(resolved.command("learner"), "--model") == "mnb"
    assert "createevents8" in re.sub(r"[\s\\]", "", resolved.services["topic-init"]["command"])
    for service in ("learner", "predictor"):
        env = resolved.environment(service)
        assert env["STREAMBAYES_KAFKA_CLIENT"] == "confluent"
        assert env["STREAMBAYES_KAFKA_SASL_USERNAME"] == "svc-streambayes"


def test_the_dockerfile_builds_a_non_root_streambayes_image():
    text = (REPO / "deploy" / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    assert re.search(r'^ENTRYPOINT \["streambayes"\]$', text, re.M)
    assert re.search(r"^USER (?!root\b|0\b)\S+", text, re.M)
    assert "pip install --no-cache-dir" in text
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".git", ".venv"} <= set(ignored)


def test_the_base_learner_and_predictor_share_the_kafka_state_topic(env_file):
    resolved = _resolved(BASE, env_file)
    state = "kafka://kafka:9092/streambayes-state"
    assert option(resolved.command("learner"), "--snapshots") == state
    assert option(resolved.command("predictor"), "--snapshots") == state


def test_s3_state_comes_through_the_environment(env_file):
    resolved = Resolved(compose_config(BASE, env_file, STREAMBAYES_STATE="s3://models/sms",
                                       AWS_ENDPOINT_URL_S3="http://minio:9000", AWS_REGION="eu-west-1"))
    for service in ("learner", "predictor"):
        assert option(resolved.command(service), "--snapshots") == "s3://models/sms"
        env = resolved.environment(service)
        assert (env["AWS_ENDPOINT_URL_S3"], env["AWS_REGION"]) == ("http://minio:9000", "eu-west-1")
