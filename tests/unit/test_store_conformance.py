"""The store conformance suite on the directory, memory and S3 (a local moto server) stores;
the Kafka topic store runs it in tests/integration/test_store_kafka.py."""

import pytest

from tests.store_conformance import (
    StoreConformance,
    dir_backend,
    memory_backend,
    s3_backend,
    s3_client,  # noqa: F401 (a fixture)
)


@pytest.fixture(params=["dir", "memory", "s3"])
def backend(request, tmp_path):
    if request.param == "dir":
        return dir_backend(tmp_path)
    if request.param == "memory":
        return memory_backend()
    return s3_backend(request.getfixturevalue("s3_client"))


class TestStores(StoreConformance):
    pass
