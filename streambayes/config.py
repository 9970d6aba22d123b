"""Process settings from ``STREAMBAYES_*`` environment variables (one frozen object, STYLE 13).

- ``STREAMBAYES_DATA``: folder with the shared data sets (layout of ``shared/data``).
- ``STREAMBAYES_CACHE_DIR``: where downloads go (default ``$XDG_CACHE_HOME/streambayes``,
  else ``~/.cache/streambayes``).
- ``STREAMBAYES_OFFLINE``: ``1``/``true`` forbids any network access.
- ``STREAMBAYES_DOWNLOAD_TIMEOUT``: seconds allowed for a whole download (default 8).
- ``STREAMBAYES_SMS_URL``: where the demo fetches the SMS Spam Collection zip.
- ``STREAMBAYES_KAFKA_CLIENT``: ``confluent`` (default: confluent-kafka, librdkafka) or
  ``kafka-python``; both are installed.
- ``STREAMBAYES_KAFKA_SECURITY_PROTOCOL`` (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``,
  ``SASL_SSL``), ``STREAMBAYES_KAFKA_SASL_MECHANISM`` (``PLAIN``, ``SCRAM-SHA-256``...),
  ``STREAMBAYES_KAFKA_SASL_USERNAME``, ``STREAMBAYES_KAFKA_SASL_PASSWORD``,
  ``STREAMBAYES_KAFKA_SSL_CAFILE``, ``STREAMBAYES_KAFKA_SSL_CERTFILE``,
  ``STREAMBAYES_KAFKA_SSL_KEYFILE``: passed through to the client.
- ``STREAMBAYES_KAFKA_OPTIONS``: a JSON object of further client options, passed as they are
  (librdkafka property names for ``confluent``, kafka-python keyword names for ``kafka-python``).
- ``STREAMBAYES_LOSS`` (a JSON loss matrix ``{"decided": {"truth": cost}}``) and
  ``STREAMBAYES_REJECT`` (the cost of "unsure"): decisions of ``predict`` and ``replay`` when
  ``--loss``/``--reject`` are not given.
- ``STREAMBAYES_KAFKA_GROUP``: consumer group of ``predict`` (and of ``learn``'s lag-only
  offset commits); default ``streambayes-predict`` / ``streambayes-learn``.
- ``STREAMBAYES_KAFKA_CONSUMER_OPTIONS``, ``STREAMBAYES_KAFKA_PRODUCER_OPTIONS``,
  ``STREAMBAYES_KAFKA_ADMIN_OPTIONS``: JSON objects of options for one kind of client only. The
  shared ``STREAMBAYES_KAFKA_OPTIONS`` go to each client that knows them (kafka-python: the
  client's ``DEFAULT_CONFIG``; librdkafka: consumer-only and producer-only properties are kept
  from the other role); an option no client knows is a usage error (exit 2).
- ``STREAMBAYES_KAFKA_SESSION_TIMEOUT_MS`` (default 6000), ``..._HEARTBEAT_INTERVAL_MS`` (2000),
  ``..._MAX_POLL_INTERVAL_MS`` (300000): group timeouts of ``predict``'s consumer; a member that
  dies hands its partitions over after about the session timeout (options given explicitly win).
- ``STREAMBAYES_KAFKA_DELIVERY_DEADLINE``: seconds a sink keeps re-sending after a retriable
  failure before it gives up with an error (default 120); errors that cannot succeed (a message
  too large, an authorization failure...) are not retried.
- ``STREAMBAYES_KAFKA_STALL_SECONDS`` (default 60; 0: off): when a partition of a group-managed
  learner has had no record for this long while its polls come back short (or the learner has
  held none that long), it asks the broker, with a new short-lived client, for the end offsets
  of those partitions. If the broker has records past both its position and what its consumer
  last fetched, or it holds no partition and is not in the group while the broker answers (a
  wedged consumer, seen after a broker stall), and a look 5 s later finds the same partition
  still short of the end seen first, it checkpoints its shards and joins the group again with a
  new consumer; while renewals bring no record the wait doubles, up to 16 times this setting
  (:mod:`streambayes.runtime.loops.group`).
- ``STREAMBAYES_KAFKA_FETCH_AHEAD`` (default 4; kafka-python only): ``learn --partitions`` and
  ``replay`` of a Kafka topic fetch in a helper process, which reads at most this many batches
  of 2,000 records ahead of the learner and then waits for it; ``0`` fetches in the learner's
  own process (:mod:`streambayes.runtime.kafka.kafka_python_fetch`).
- ``STREAMBAYES_SINK_MAX_LINE_BYTES``: the longest line a JSONL file sink writes (default
  1048576); a longer dead letter is truncated to fit (with the payload's size and sha256), a
  longer posterior becomes a dead letter.
- ``STREAMBAYES_SNAPSHOT_KEY``: signs snapshots (HMAC-SHA256); when set, unsigned or wrongly
  signed snapshots are refused as corrupt (the previous good one is used).
- ``STREAMBAYES_SNAPSHOT_MAX_BYTES`` (default 4 GiB): a snapshot file, or its arrays uncompressed,
  larger than this is refused as corrupt; ``STREAMBAYES_SNAPSHOT_MAX_RATIO`` (default 100): an old
  (npz) snapshot member inflating more than this many times (past 1 MiB) is refused as a zip bomb.
- Per-record limits (a record past one is a dead letter with reason ``limit``; defaults and
  meaning in :class:`streambayes.runtime.records.limits.RecordLimits`): ``STREAMBAYES_MAX_RECORD_BYTES``
  (1 MiB), ``STREAMBAYES_MAX_JSON_DEPTH`` (32), ``STREAMBAYES_MAX_NUMBER_DIGITS`` (100),
  ``STREAMBAYES_MAX_ABS_NUMBER`` (1e100, at most 1e100), ``STREAMBAYES_MAX_FEATURES`` (1000),
  ``STREAMBAYES_MAX_TEXT_CHARS`` (1000000), ``STREAMBAYES_MAX_STRING_CHARS`` (1000),
  ``STREAMBAYES_MAX_WEIGHT`` (1000, at most 1e12).
- ``STREAMBAYES_MAX_RESIDENT`` (default 10,000) and ``STREAMBAYES_MAX_RESIDENT_MB`` (default
  1024): per-key models kept live by ``--per-key`` runs, by count and by MiB (live models plus
  spilled states held in memory); past either, the least recently used models spill to
  ``DIR/spill`` next to the snapshots (a temporary directory for ``replay``) and come back on
  demand. ``--max-resident`` / ``--max-resident-mb`` override them.
- ``STREAMBAYES_MAX_KEYS`` (default 1,000,000): keys a per-key model ever learns; an event of a
  new key past it is a dead letter with reason ``limit`` (the model is left unchanged).

>>> Settings(offline=True, data="/tmp/data").offline
True
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

SMS_URL = "https://archive.ics.uci.edu/static/public/228/sms+spam+collection.zip"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/streambayes``, else ``~/.cache/streambayes``."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "streambayes"


class Settings(BaseSettings):
    """Settings of one streambayes process; built once by the CLI and passed down."""

    model_config = SettingsConfigDict(env_prefix="STREAMBAYES_", frozen=True, extra="ignore",
                                      env_ignore_empty=True)

    data: Path | None = None
    cache_dir: Path = Field(default_factory=default_cache_dir)
    offline: bool = False
    download_timeout: float = Field(default=8.0, gt=0)
    sms_url: str = SMS_URL

    kafka_client: Literal["kafka-python", "confluent"] = "confluent"
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] | None = None
    kafka_sasl_mechanism: str | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: str | None = Field(default=None, repr=False)
    kafka_ssl_cafile: Path | None = None
    kafka_ssl_certfile: Path | None = None
    kafka_ssl_keyfile: Path | None = None
    kafka_options: dict[str, Any] = Field(default_factory=dict)
    kafka_group: str | None = None

    loss: dict[str, dict[str, float]] | None = None  # STREAMBAYES_LOSS='{"spam": {"ham": 10}}'
    reject: float | None = None  # STREAMBAYES_REJECT: the cost of answering "unsure"

    kafka_consumer_options: dict[str, Any] = Field(default_factory=dict)
    kafka_producer_options: dict[str, Any] = Field(default_factory=dict)
    kafka_admin_options: dict[str, Any] = Field(default_factory=dict)
    kafka_session_timeout_ms: int = Field(default=6000, ge=1000)
    kafka_heartbeat_interval_ms: int = Field(default=2000, ge=100)
    kafka_max_poll_interval_ms: int = Field(default=300_000, ge=1000)
    kafka_delivery_deadline: float = Field(default=120.0, gt=0)
    kafka_connect_deadline: float = Field(default=30.0, gt=0)  # every command, both clients
    kafka_stall_seconds: float = Field(default=60.0, ge=0)  # group learners' stall guard; 0: off
    kafka_fetch_ahead: int = Field(default=4, ge=0)  # STREAMBAYES_KAFKA_FETCH_AHEAD (kafka-python)
    sink_max_line_bytes: int = Field(default=1_048_576, ge=1024)
    snapshot_key: SecretStr | None = None  # STREAMBAYES_SNAPSHOT_KEY: HMAC-sign and check snapshots
    snapshot_max_bytes: int = Field(default=4 * 2**30, gt=0)
    snapshot_max_ratio: float = Field(default=100.0, ge=1)
    max_resident: int = Field(default=10_000, ge=1)  # STREAMBAYES_MAX_RESIDENT: live per-key models
    max_resident_mb: float = Field(default=1024.0, gt=0)  # STREAMBAYES_MAX_RESIDENT_MB: their MiB
    max_keys: int = Field(default=1_000_000, ge=1)  # STREAMBAYES_MAX_KEYS: per-key keys ever learned
    # Model bounds (None: the model's default: 1,000 classes, 10,000 fields, 100,000 values per
    # field; 100 fields and 1,000 values for the semi-naive models); past one: dead letter "limit"
    max_classes: int | None = Field(default=None, ge=1)  # STREAMBAYES_MAX_CLASSES
    max_fields: int | None = Field(default=None, ge=1)  # STREAMBAYES_MAX_FIELDS
    max_values: int | None = Field(default=None, ge=1)  # STREAMBAYES_MAX_VALUES

    def kafka_security(self) -> dict[str, Any]:
        """The connection options that are set, in neutral names (each backend maps them).

        >>> Settings(kafka_security_protocol="SASL_SSL", kafka_sasl_username="u").kafka_security()
        {'security_protocol': 'SASL_SSL', 'sasl_username': 'u'}
        """
        names = ("security_protocol", "sasl_mechanism", "sasl_username", "sasl_password",
                 "ssl_cafile", "ssl_certfile", "ssl_keyfile")
        values = {name: getattr(self, "kafka_" + name) for name in names}
        return {name: str(value) if isinstance(value, Path) else value
                for name, value in values.items() if value is not None}

    # per-record limits (streambayes.runtime.records.limits.RecordLimits): past one, a `limit` dead letter
    max_record_bytes: int = Field(default=1 << 20, gt=0)
    max_json_depth: int = Field(default=32, gt=0)
    max_number_digits: int = Field(default=100, gt=0)
    max_abs_number: float = Field(default=1e100, gt=0, le=1e100)
    max_features: int = Field(default=1000, gt=0)
    max_text_chars: int = Field(default=1_000_000, gt=0)
    max_string_chars: int = Field(default=1000, gt=0)
    max_weight: float = Field(default=1e3, gt=0, le=1e12)
