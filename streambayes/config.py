"""Process settings from ``STREAMBAYES_*`` environment variables (one frozen object, STYLE 13).

- ``STREAMBAYES_DATA``: folder with the shared data sets (layout of ``shared/data``).
- ``STREAMBAYES_CACHE_DIR``: where downloads go (default ``$XDG_CACHE_HOME/streambayes``,
  else ``~/.cache/streambayes``).
- ``STREAMBAYES_OFFLINE``: ``1``/``true`` forbids any network access.
- ``STREAMBAYES_DOWNLOAD_TIMEOUT``: seconds allowed for a whole download (default 8).
- ``STREAMBAYES_SMS_URL``: where the demo fetches the SMS Spam Collection zip.
- ``STREAMBAYES_KAFKA_CLIENT``: ``kafka-python`` (default) or ``confluent`` (librdkafka, the
  ``confluent`` extra).
- ``STREAMBAYES_KAFKA_SECURITY_PROTOCOL`` (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``,
  ``SASL_SSL``), ``STREAMBAYES_KAFKA_SASL_MECHANISM`` (``PLAIN``, ``SCRAM-SHA-256``...),
  ``STREAMBAYES_KAFKA_SASL_USERNAME``, ``STREAMBAYES_KAFKA_SASL_PASSWORD``,
  ``STREAMBAYES_KAFKA_SSL_CAFILE``, ``STREAMBAYES_KAFKA_SSL_CERTFILE``,
  ``STREAMBAYES_KAFKA_SSL_KEYFILE``: passed through to the client.
- ``STREAMBAYES_KAFKA_OPTIONS``: a JSON object of further client options, passed as they are
  (kafka-python keyword names, or librdkafka property names for ``confluent``).
- ``STREAMBAYES_LOSS`` (a JSON loss matrix ``{"decided": {"truth": cost}}``) and
  ``STREAMBAYES_REJECT`` (the cost of "unsure"): decisions of ``predict`` and ``replay`` when
  ``--loss``/``--reject`` are not given.
- ``STREAMBAYES_KAFKA_GROUP``: consumer group of ``predict`` (and of ``learn``'s lag-only
  offset commits); default ``streambayes-predict`` / ``streambayes-learn``.

>>> Settings(offline=True, data="/tmp/data").offline
True
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field
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

    kafka_client: Literal["kafka-python", "confluent"] = "kafka-python"
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
