"""Where a loop reads or writes: a file path, or ``kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?query]``.

The query carries replay bounds (``from``/``to``: an offset, or an ISO-8601 time) and is kept as
a plain dict; each command says which keys it accepts.

>>> u = parse_uri("kafka://localhost:9092/sms?from=10&to=2026-11-20T10:00:00Z")
>>> u.bootstrap, u.topic, u.query
('localhost:9092', 'sms', {'from': '10', 'to': '2026-11-20T10:00:00Z'})
>>> parse_uri("data/SMSSpamCollection")
PosixPath('data/SMSSpamCollection')
>>> parse_uri("kafka://localhost:9092/")
Traceback (most recent call last):
...
streambayes.errors.UsageError: kafka URI 'kafka://localhost:9092/' names no topic (expected kafka://HOST:PORT/TOPIC)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from streambayes.errors import UsageError

_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_HOST_PORT = re.compile(r"[A-Za-z0-9._\-\[\]:]+:\d{1,5}")


@dataclass(frozen=True)
class KafkaURI:
    """A Kafka topic on a cluster; ``bootstrap`` is the comma-separated HOST:PORT list."""

    bootstrap: str
    topic: str
    query: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"kafka://{self.bootstrap}/{self.topic}"


def is_kafka(text: str) -> bool:
    return text.startswith("kafka://")


def parse_uri(text: str, *, allowed_query: tuple[str, ...] = ("from", "to")) -> KafkaURI | Path:
    """A :class:`KafkaURI` for ``kafka://...``, a :class:`~pathlib.Path` for a file (``file://``
    accepted); any other scheme is a :class:`UsageError`."""
    if text.startswith("file://"):
        return Path(text[len("file://"):])
    if "://" not in text:
        return Path(text)
    if not is_kafka(text):
        raise UsageError(f"unsupported URI {text!r} (expected a file path or kafka://HOST:PORT/TOPIC)")
    parts = urlsplit(text)
    hosts = parts.netloc
    topic = parts.path.lstrip("/")
    if not hosts or not all(_HOST_PORT.fullmatch(h) for h in hosts.split(",")):
        raise UsageError(f"kafka URI {text!r} needs HOST:PORT[,HOST:PORT...] after kafka://")
    if not topic:
        raise UsageError(f"kafka URI {text!r} names no topic (expected kafka://HOST:PORT/TOPIC)")
    if not _TOPIC.fullmatch(topic) or topic in (".", ".."):
        raise UsageError(f"kafka URI {text!r}: {topic!r} is not a valid topic name "
                         "(letters, digits, '.', '_', '-')")
    query = dict(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False))
    unknown = sorted(set(query) - set(allowed_query))
    if unknown:
        allowed = ", ".join(allowed_query) or "none"
        raise UsageError(f"kafka URI {text!r}: unknown parameter {unknown[0]!r} (allowed: {allowed})")
    return KafkaURI(hosts, topic, query)
