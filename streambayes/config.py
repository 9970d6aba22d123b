"""Process settings from ``STREAMBAYES_*`` environment variables (one frozen object, STYLE 13).

- ``STREAMBAYES_DATA``: folder with the shared data sets (layout of ``shared/data``).
- ``STREAMBAYES_CACHE_DIR``: where downloads go (default ``$XDG_CACHE_HOME/streambayes``,
  else ``~/.cache/streambayes``).
- ``STREAMBAYES_OFFLINE``: ``1``/``true`` forbids any network access.
- ``STREAMBAYES_DOWNLOAD_TIMEOUT``: seconds allowed for a whole download (default 8).
- ``STREAMBAYES_SMS_URL``: where the demo fetches the SMS Spam Collection zip.

>>> Settings(offline=True, data="/tmp/data").offline
True
"""

from __future__ import annotations

import os
from pathlib import Path

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
