"""Snapshot stores chosen by URI (``--snapshots``): one interface, three places.

- a directory (a path, or ``file://PATH``): :class:`~streambayes.snapshot.store.SnapshotStore`,
  the embedded default;
- ``kafka://HOST:PORT[,HOST:PORT...]/TOPIC``: a compacted topic, chunked and checksummed
  (:mod:`.kafka_topic`), so a predictor on any host loads the newest model with no shared disk;
- ``s3://BUCKET[/PREFIX]``: S3-compatible object storage through boto3 (:mod:`.s3`).

Each is a :class:`~streambayes.snapshot.store.BaseSnapshotStore` with the same retention (keep K),
child stores and corrupt-snapshot fallback. Any other scheme is a usage error (exit 2).

>>> open_store("state/sms")
SnapshotStore('state/sms', keep=5)
>>> open_store("ftp://host/x")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
streambayes.errors.UsageError: unsupported snapshot store 'ftp://host/x' (expected a directory, ...)
>>> split_locations("a,kafka://h1:9092,h2:9092/state,s3://b/p")
('a', 'kafka://h1:9092,h2:9092/state', 's3://b/p')
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from streambayes.errors import UsageError
from streambayes.snapshot.store import BaseSnapshotStore, SnapshotStore

SCHEMES = ("kafka", "s3")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
Location = Path | str


def location(text: str | os.PathLike[str]) -> Location:
    """A local directory as a Path, a store URI as a checked string; UsageError for any other
    scheme (so ``kafka://...`` never becomes a directory named ``kafka:``)."""
    if isinstance(text, Path):
        return text
    text = os.fspath(text)
    m = _SCHEME.match(text)
    if m is None:
        return Path(text)
    scheme = m.group(1).lower()
    if scheme == "file":
        return Path(text[len("file://"):])
    if scheme not in SCHEMES:
        raise UsageError(f"unsupported snapshot store {text!r} (expected a directory, "
                         "kafka://HOST:PORT/TOPIC or s3://BUCKET/PREFIX)")
    if scheme == "kafka":
        _kafka_uri(text)
    else:
        _s3_parts(text)
    return text


def is_local(where: Location) -> bool:
    """True for a directory (what per-key spill files and ``snapshot ls`` paths need)."""
    return isinstance(where, Path)


def split_locations(text: str) -> tuple[str, ...]:
    """``DIR,kafka://H1:P,H2:P/TOPIC,s3://B/P`` -> its locations (a Kafka URI's host list keeps
    its commas: a piece after ``kafka://HOST:PORT`` with no topic yet continues it)."""
    out: list[str] = []
    for piece in (p.strip() for p in text.split(",")):
        if not piece:
            continue
        if out and out[-1].lower().startswith("kafka://") and "/" not in out[-1][len("kafka://"):]:
            out[-1] += "," + piece
        else:
            out.append(piece)
    return tuple(out)


def open_store(where: str | os.PathLike[str], settings: Any = None, *, keep: int = 5) -> BaseSnapshotStore:
    """The store at ``where`` (a directory or a URI), with the read limits and signing key of
    ``settings`` (defaults when None) and keep-K ``keep``."""
    from streambayes.runtime.loops.shards import store_options

    target = location(where)
    options = store_options(settings)
    if isinstance(target, Path):
        return SnapshotStore(target, keep, **options)
    if target.lower().startswith("kafka://"):
        from streambayes.runtime.stores.kafka_topic import KafkaSnapshotStore, TopicLog

        uri = _kafka_uri(target)
        if settings is not None:
            from streambayes.runtime.kafka.connect import wait_for_broker

            wait_for_broker(uri.bootstrap, settings)
        timeout = settings.kafka_delivery_deadline if settings is not None else 30.0
        client = settings.kafka_client if settings is not None else None
        log = TopicLog(uri.bootstrap, uri.topic, kafka_options(settings), timeout=timeout,
                       client=client)
        return KafkaSnapshotStore(log, keep, **options)
    from streambayes.runtime.stores.s3 import S3SnapshotStore

    bucket, prefix = _s3_parts(target)
    return S3SnapshotStore(bucket, prefix, keep, **options)


def kafka_options(settings: Any) -> dict[str, dict[str, Any]]:
    """kafka-python options per role for the state topic's writer: the security settings, plus
    the ``STREAMBAYES_KAFKA_*OPTIONS`` when they are kafka-python's (``STREAMBAYES_KAFKA_CLIENT``);
    and ``reader``: the configured client's consumer options (security and its options)."""
    if settings is None:
        return {}
    from streambayes.runtime.kafka.kafka_python import client_options
    from streambayes.runtime.kafka.options import split

    out = {}
    for role, specific in (("consumer", settings.kafka_consumer_options),
                           ("producer", settings.kafka_producer_options),
                           ("admin", settings.kafka_admin_options)):
        extra = (split("kafka-python", settings.kafka_options, specific, role)
                 if settings.kafka_client == "kafka-python" else {})
        out[role] = client_options(settings.kafka_security(), extra)
    from streambayes.runtime.kafka.connect import client_options as configured

    out["reader"] = configured(settings, "consumer")
    return out


def _kafka_uri(text: str) -> Any:
    from streambayes.runtime.records.uri import KafkaURI, parse_uri

    uri = parse_uri(text, allowed_query=())
    assert isinstance(uri, KafkaURI)
    return uri


def _s3_parts(text: str) -> tuple[str, str]:
    parts = urlsplit(text)
    if parts.query or parts.fragment or not _BUCKET.fullmatch(parts.netloc or ""):
        raise UsageError(f"s3 URI {text!r}: expected s3://BUCKET[/PREFIX] (a bucket name of 3-63 "
                         "lower-case letters, digits, '.' and '-'; no query)")
    return parts.netloc, parts.path.strip("/")
