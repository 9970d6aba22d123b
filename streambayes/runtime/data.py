"""Finding the SMS Spam Collection for the demo: local data, cache, download, or synthetic.

Order: ``$STREAMBAYES_DATA/sms_spam_collection/SMSSpamCollection`` (the layout of
``shared/data``); then ``../shared/data`` seen from the current directory (a checkout next to
the shared data, as the tests assume); then the same path under the cache folder; then, unless
offline, the UCI zip (dataset 228) downloaded into the cache under a hard time limit; else a seeded synthetic
spam/ham stream in the same ``label<TAB>text`` format, which callers must call synthetic.

>>> lines = synthetic_sms(n=50, seed=1)
>>> len(lines), lines[0].split("\\t")[0] in ("ham", "spam")
(50, True)
>>> synthetic_sms(n=5, seed=1) == synthetic_sms(n=5, seed=1)
True
"""

from __future__ import annotations

import io
import os
import random
import tempfile
import threading
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from streambayes.config import Settings
from streambayes.errors import DataUnavailable

SMS_RELATIVE = Path("sms_spam_collection") / "SMSSpamCollection"
SMS_MEMBER = "SMSSpamCollection"
MAX_DOWNLOAD_BYTES = 32 << 20
SHARED_DATA = Path("..") / "shared" / "data"  # relative to the current directory


@dataclass(frozen=True)
class SmsData:
    """Where the demo's messages come from; ``path`` is None for the synthetic stream."""

    origin: Literal["local", "cache", "download", "synthetic"]
    path: Path | None
    note: str


def find_sms(settings: Settings) -> SmsData:
    """The best available SMS data; never raises (the synthetic stream is the last resort)."""
    for data in (settings.data, SHARED_DATA):
        if data is not None and (data / SMS_RELATIVE).is_file():
            path = data / SMS_RELATIVE
            return SmsData("local", path, f"SMS Spam Collection from {path}")
    cached = settings.cache_dir / SMS_RELATIVE
    if cached.is_file():
        return SmsData("cache", cached, f"SMS Spam Collection from the cache, {cached}")
    if settings.offline:
        reason = "offline (STREAMBAYES_OFFLINE is set)"
    else:
        try:
            path = download_sms(settings.sms_url, cached, settings.download_timeout)
            return SmsData("download", path, f"SMS Spam Collection downloaded to {path}")
        except DataUnavailable as exc:
            reason = str(exc)
    return SmsData("synthetic", None, f"no SMS data found and {reason}")


def download_sms(url: str, target: Path, timeout: float) -> Path:
    """Fetch the UCI zip and extract ``SMSSpamCollection`` to ``target`` (atomically).

    The whole fetch, name resolution included, gets ``timeout`` seconds; any failure is a
    :class:`DataUnavailable` with a one-line reason.
    """
    box: dict[str, object] = {}

    def fetch() -> None:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310
                box["data"] = response.read(MAX_DOWNLOAD_BYTES + 1)
        except Exception as exc:  # noqa: BLE001  (reported below, one line)
            box["error"] = exc

    worker = threading.Thread(target=fetch, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise DataUnavailable(f"download timed out after {timeout:g} s ({url})")
    if "error" in box:
        raise DataUnavailable(f"download failed: {_one_line(box['error'])} ({url})")
    data = box["data"]
    assert isinstance(data, bytes)
    if len(data) > MAX_DOWNLOAD_BYTES:
        raise DataUnavailable(f"download is larger than {MAX_DOWNLOAD_BYTES} bytes ({url})")
    _extract(data, target)
    return target


def _extract(data: bytes, target: Path) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = [n for n in archive.namelist() if Path(n).name == SMS_MEMBER]
            if not names:
                raise DataUnavailable(f"the archive has no {SMS_MEMBER} file")
            content = archive.read(names[0])
    except zipfile.BadZipFile as exc:
        raise DataUnavailable(f"the download is not a zip archive: {exc}") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".download-")
    with os.fdopen(fd, "wb") as out:
        out.write(content)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, target)


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


_HAM = ("ok", "see", "you", "later", "lunch", "tomorrow", "are", "we", "still", "on", "for",
        "call", "me", "when", "home", "love", "thanks", "going", "to", "the", "gym", "what",
        "time", "dinner", "tonight", "sorry", "late", "meeting", "running", "be", "there", "soon")
_SPAM = ("free", "win", "winner", "prize", "claim", "now", "cash", "urgent", "txt", "reply",
         "stop", "offer", "guaranteed", "call", "mobile", "award", "selected", "to", "the",
         "£1000", "text", "code", "won", "ringtone", "entry", "valid", "18+", "for", "you")


def synthetic_sms(n: int = 3000, seed: int = 7, spam_rate: float = 0.15) -> list[str]:
    """``n`` seeded ``label<TAB>text`` lines from two overlapping word lists: a SYNTHETIC stream."""
    rng = random.Random(seed)
    lines: list[str] = []
    for _ in range(n):
        spam = rng.random() < spam_rate
        own, other = (_SPAM, _HAM) if spam else (_HAM, _SPAM)
        words = [rng.choice(own if rng.random() < 0.8 else other)
                 for _ in range(rng.randint(4, 14))]
        text = " ".join(words)
        lines.append(f"{'spam' if spam else 'ham'}\t{text[0].upper()}{text[1:]}")
    return lines
