"""Deployment files: ``docker-compose config`` validates and resolves them, offline.

``config`` needs neither a Docker engine nor the network, so this runs in the unit tier. It is
never skipped and never fails for the binary's absence: without ``docker-compose`` on PATH the
files are resolved and checked by ``compose_offline`` (the Compose Specification's JSON schema with
``jsonschema``, plus the checks ``config`` makes). Every test also runs on the offline resolution,
so both ways are exercised wherever the binary exists. The resolved YAML is read as text: a few lines
of indentation parsing pick out the services, their commands and the declared volumes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.unit import compose_offline

REPO = Path(__file__).resolve().parents[2]
BASE = ("docker-compose.yml",)
SCALE_OUT = ("docker-compose.yml", "deploy/docker-compose.scale-out.yml")
SERVICES = {"kafka", "topic-init", "learner", "predictor"}
TOPICS = {"events": 4, "unlabelled": 4, "posteriors": 4, "dead-letters": 1}


def compose_binary() -> str | None:
    return shutil.which("docker-compose")


def compose_env(**variables: str) -> dict[str, str]:
    """The process environment without STREAMBAYES_*/COMPOSE_*/DOCKER_*/KAFKA_* settings, so the
    compose defaults apply; DOCKER_HOST points nowhere, proving no engine is needed."""
    prefixes = ("STREAMBAYES_", "COMPOSE_", "DOCKER_", "KAFKA_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    return env | {"DOCKER_HOST": "unix:///nonexistent/docker.sock", "COMPOSE_PROJECT_NAME": "sbtest",
                  **variables}


def compose_config(files: tuple[str, ...], env_file: Path, offline: bool = False, **variables: str) -> str:
    """``docker-compose --env-file EMPTY -f F1 [-f F2] config`` from the repository root; without
    the binary (or with ``offline``), the same resolution by ``compose_offline``."""
    binary = None if offline else compose_binary()
    if binary is None:
        return compose_offline.config_text(REPO, files, compose_env(**variables))
    argv = [binary, "--env-file", str(env_file)]
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
def _resolved(files: tuple[str, ...], env_file: Path, offline: bool = False) -> Resolved:
    return Resolved(compose_config(files, env_file, offline))


@pytest.fixture(params=[(BASE, False), (SCALE_OUT, False), (BASE, True), (SCALE_OUT, True)],
                ids=["base", "scale-out", "base-offline", "scale-out-offline"])
def resolved(request, env_file) -> Resolved:
    files, offline = request.param
    return _resolved(files, env_file, offline)


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
    assert resolved.environment("learner")["STREAMBAYES_KAFKA_CLIENT"] == "confluent"


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


@pytest.mark.parametrize("offline", [False, True], ids=["config", "offline"])
def test_scale_out_learners_own_disjoint_partitions(env_file, offline):
    resolved = _resolved(SCALE_OUT, env_file, offline)
    assert resolved.learners() == ["learner", "learner-1"]
    owned = [option(resolved.command(s), "--partitions").split(",") for s in resolved.learners()]
    assert owned == [["0", "1"], ["2", "3"]]


@pytest.mark.parametrize("offline", [False, True], ids=["config", "offline"])
def test_settings_come_through_environment_substitution(env_file, offline):
    resolved = Resolved(compose_config(BASE, env_file, offline, STREAMBAYES_MODEL="mnb",
                                       STREAMBAYES_PARTITIONS="8",
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


def test_the_base_learners_join_a_group_and_scale_with_compose(env_file):
    """`docker compose up --scale learner=3`: no partition lists, no fixed container name or host
    port that a second replica would collide on."""
    resolved = _resolved(BASE, env_file)
    for service in ("learner", "predictor"):
        spec = resolved.services[service]
        assert "--partitions" not in resolved.command(service)
        assert "container_name" not in spec and not spec.get("ports"), service
    assert "--scale learner=" in (REPO / "docker-compose.yml").read_text()


def test_s3_state_comes_through_the_environment(env_file):
    resolved = Resolved(compose_config(BASE, env_file, STREAMBAYES_STATE="s3://models/sms",
                                       AWS_ENDPOINT_URL_S3="http://minio:9000", AWS_REGION="eu-west-1"))
    for service in ("learner", "predictor"):
        assert option(resolved.command(service), "--snapshots") == "s3://models/sms"
        env = resolved.environment(service)
        assert (env["AWS_ENDPOINT_URL_S3"], env["AWS_REGION"]) == ("http://minio:9000", "eu-west-1")


def test_the_offline_resolution_matches_docker_compose_config(env_file):
    """Where the binary exists, ``compose_offline`` resolves the files as ``config`` does (the fields
    these tests read; ``config`` also rewrites ports and mounts to long forms, which they do not)."""
    import yaml

    fields = ("command", "entrypoint", "environment", "depends_on", "image", "build", "stop_signal",
              "stop_grace_period", "restart", "healthcheck", "hostname")

    def view(text: str) -> dict:
        doc = yaml.safe_load(text)
        services = {name: {f: s.get(f) for f in fields} for name, s in doc["services"].items()}
        return {"services": services, "volumes": sorted(doc.get("volumes") or {})}

    for files in (BASE, SCALE_OUT):
        offline = view(compose_config(files, env_file, offline=True))
        if compose_binary() is None:  # a fresh machine: nothing to compare with, but the offline
            assert set(offline["services"]) >= SERVICES  # resolution must still hold the services
            continue
        assert offline == view(compose_config(files, env_file))


@pytest.mark.parametrize("text, error", [
    ("services:\n  a:\n    image: x\n    restart: 3\n", "Compose Specification"),
    ("services:\n  a:\n    image: x\n    bogus_key: 1\n", "Compose Specification"),
    ("services:\n  a:\n    image: x\n    volumes: [data:/d]\n", "undefined volume 'data'"),
    ("services:\n  a:\n    image: x\n    depends_on: [b]\n", "undefined service 'b'"),
    ("services:\n  a:\n    build: ./nowhere\n", "does not exist"),
    ("services:\n  a:\n    command: ${NEEDED:?set it}\n    image: x\n", "NEEDED"),
    ("services:\n  a:\n    command: ${BAD-\n    image: x\n", "invalid interpolation"),
    ("services:\n  a:\n    command: echo\n", "neither an image nor a build"),
])
def test_the_offline_check_refuses_what_config_refuses(tmp_path, text, error):
    (tmp_path / "compose.yml").write_text(text)
    with pytest.raises(compose_offline.ComposeError, match=error):
        compose_offline.resolve(tmp_path, ("compose.yml",), {})
