"""Snapshots in S3-compatible object storage (``s3://BUCKET/PREFIX``), through boto3.

Objects are ``PREFIX/snapshot-000042.sbs``; a child store is ``PREFIX/NAME/``. A PUT is atomic
(readers see the whole object or none), so a crashed write leaves nothing behind. Each object is
written with an S3 SHA-256 checksum (the server refuses a damaged upload) and read with checksum
validation, on top of the snapshot's own checksum; an object over ``STREAMBAYES_SNAPSHOT_MAX_BYTES``
is refused from its listed size before it is downloaded.

The client is boto3's: credentials, region and endpoint come from its usual chain (environment
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL`` for MinIO, Ceph, moto...; profiles; instance and pod roles). The bucket must
exist: the store does not create buckets.
"""

from __future__ import annotations

import re
from typing import Any

from streambayes.errors import CorruptSnapshot, SnapshotError, UsageError
from streambayes.snapshot.payload import ReadLimits
from streambayes.snapshot.store import _CHILD, BaseSnapshotStore, format_id

_NAME = re.compile(r"snapshot-(\d{6,})\.sbs")


def s3_client(endpoint_url: str | None = None) -> Any:
    """A boto3 S3 client (endpoint from the argument, else boto3's configuration)."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise UsageError("s3:// snapshot stores need boto3 (pip install 'streambayes[s3]')") from None
    config = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=10,
                    read_timeout=60)
    return boto3.session.Session().client("s3", endpoint_url=endpoint_url, config=config)


class S3SnapshotStore(BaseSnapshotStore):
    """Snapshots as objects ``s3://BUCKET/PREFIX/snapshot-000042.sbs``."""

    def __init__(self, bucket: str, prefix: str = "", keep: int = 5, *, client: Any = None,
                 limits: ReadLimits | None = None, key: bytes | None = None) -> None:
        super().__init__(keep, limits=limits, key=key)
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.client = client if client is not None else s3_client()

    def __repr__(self) -> str:
        return f"S3SnapshotStore('s3://{self.bucket}/{self.prefix}', keep={self.keep})"

    def _object(self, number: int) -> str:
        return f"{self.prefix}snapshot-{format_id(number)}.sbs"

    def _list(self) -> tuple[dict[str, int], list[str]]:
        """(object name -> size, child prefixes) directly under the prefix."""
        from botocore.exceptions import BotoCoreError, ClientError

        sizes: dict[str, int] = {}
        dirs: list[str] = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix, Delimiter="/")
            for page in pages:
                for item in page.get("Contents", ()):
                    sizes[item["Key"][len(self.prefix):]] = int(item.get("Size", 0))
                dirs.extend(p["Prefix"][len(self.prefix):].rstrip("/")
                            for p in page.get("CommonPrefixes", ()))
        except (ClientError, BotoCoreError) as exc:
            raise SnapshotError(f"cannot list {self}: {exc}") from exc
        return sizes, dirs

    def _numbers(self) -> list[int]:
        found = (_NAME.fullmatch(name) for name in self._list()[0])
        return sorted({int(m.group(1)) for m in found if m} - {0})

    def _read(self, number: int) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        name = self._object(number)
        try:
            reply = self.client.get_object(Bucket=self.bucket, Key=name, ChecksumMode="ENABLED")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise SnapshotError(f"no snapshot {format_id(number)} in {self}") from None
            raise SnapshotError(f"cannot read s3://{self.bucket}/{name}: {exc}") from exc
        except BotoCoreError as exc:
            raise SnapshotError(f"cannot read s3://{self.bucket}/{name}: {exc}") from exc
        body = reply["Body"]
        try:
            size = int(reply.get("ContentLength", 0))
            if size > self.limits.max_bytes:
                raise CorruptSnapshot(f"{name} is {size} bytes, over the limit of {self.limits.max_bytes} "
                                      "(STREAMBAYES_SNAPSHOT_MAX_BYTES)")
            return body.read()
        except (ClientError, BotoCoreError) as exc:  # includes a failed checksum validation
            raise CorruptSnapshot(f"cannot read s3://{self.bucket}/{name}: {exc}") from exc
        finally:
            body.close()

    def _put(self, number: int, data: bytes) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        name = self._object(number)
        try:
            self.client.put_object(Bucket=self.bucket, Key=name, Body=data, ChecksumAlgorithm="SHA256")
        except (ClientError, BotoCoreError) as exc:
            raise SnapshotError(f"cannot write s3://{self.bucket}/{name}: {exc}") from exc

    def _remove(self, number: int) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._object(number))
        except (ClientError, BotoCoreError) as exc:
            raise SnapshotError(f"cannot delete from {self}: {exc}") from exc

    def _child(self, name: str) -> S3SnapshotStore:
        return S3SnapshotStore(self.bucket, self.prefix + name, self.keep, client=self.client,
                               limits=self.limits, key=self.key)

    def _children(self) -> list[str]:
        return [name for name in self._list()[1] if _CHILD.fullmatch(name)]
