"""The stock SDKs' tests: the Node.js SDK, installed once per session into a folder the tests own, and a module's
cluster whose broker serves the gRPC endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import node_sdk
from tests.support.cluster import Cluster, module_processes


@pytest.fixture(scope="session")
def node_sdk_dir() -> Path:
    """Where the Node.js SDK is installed (``npm ci`` of the pinned lock file, skipped while its stamp is current)."""
    return node_sdk.install()


@pytest.fixture(scope="module")
def grpc_cluster(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A name server and ``broker-a`` with ``--grpc-port 0``, shared by a module's tests."""
    with module_processes(tmp_path_factory.mktemp("grpc")) as start:
        cluster = Cluster(start, pg_url, tmp_path_factory.mktemp("grpc_stores"))
        cluster.start_nameserver()
        cluster.add_broker("broker-a", "--grpc-port", "0")
        yield cluster


@pytest.fixture(scope="module")
def grpc_endpoint(grpc_cluster: Cluster) -> str:
    """``broker-a``'s gRPC address, the stock SDKs' endpoint."""
    info = grpc_cluster.brokers["broker-a"].ready_info
    assert info is not None
    return str(info["grpc"])
