"""The stock SDKs' tests share the Node.js SDK, installed once per session into a folder the tests own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import node_sdk


@pytest.fixture(scope="session")
def node_sdk_dir() -> Path:
    """Where the Node.js SDK is installed (``npm ci`` of the pinned lock file, skipped while its stamp is current)."""
    return node_sdk.install()
