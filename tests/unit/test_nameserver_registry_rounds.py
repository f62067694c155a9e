"""The broker's name-server loops: a malformed answer or a failed file write fails one round with a WARNING, an
unexpected error restarts the loop, and stopping never raises."""

from __future__ import annotations

import asyncio
import errno
import logging
from typing import Any

import httpx
import pytest

import graymq.broker_ext.nameserver_registry as registry_module
from graymq.broker_ext.broker_controller import BrokerController
from graymq.broker_ext.config import BrokerSettings
from graymq.broker_ext.nameserver_registry import NameServerRegistry

pytestmark = pytest.mark.unit

URL = "http://ns.test"


def make_registry(tmp_path, answer: Any) -> tuple[NameServerRegistry, list[int]]:
    settings = BrokerSettings(name="broker-a", store_dir=tmp_path, segment_size=1 << 16, cq_units_per_file=64)
    broker = BrokerController(settings)
    registry = NameServerRegistry(broker, [URL], interval_s=0.01)
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if request.url.path.endswith("/watch"):
            return httpx.Response(503)
        return httpx.Response(200, json=answer)

    registry._client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return registry, calls


@pytest.mark.parametrize("answer", [
    [1, 2], "text", {"deletions": ["T"]}, {"topics": [["T", 4]]}, {"deletions": {"kind": "topic"}},
], ids=["list", "string", "deletion-not-object", "topic-not-object", "deletions-not-list"])
def test_an_answer_of_the_wrong_shape_fails_the_round_with_a_warning(tmp_path, caplog, answer):
    registry, _ = make_registry(tmp_path, answer)

    async def main() -> None:
        await registry.register_once()
        await registry.stop()

    asyncio.run(main())
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.levelno == logging.WARNING and f"registering with name server {URL} failed" in warning.getMessage()


def test_a_file_the_broker_cannot_write_fails_the_round_with_a_warning(tmp_path, caplog, monkeypatch):
    registry, _ = make_registry(tmp_path, {"deletions": [], "last_deletion_id": 7, "topics": []})

    def disk_full(path, obj) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(registry_module, "write_json_atomic", disk_full)

    async def main() -> None:
        await registry.register_once()
        await registry.stop()

    asyncio.run(main())
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.levelno == logging.WARNING and "No space left on device" in warning.getMessage()


def test_an_unexpected_error_restarts_the_loop_and_stop_does_not_raise(tmp_path, caplog, monkeypatch):
    registry, calls = make_registry(tmp_path, {"topics": []})
    registry._supervisor.RESTART = (0.01, 0.02)
    failures: list[int] = []

    def broken_apply(url: str, answer: dict[str, Any]) -> None:
        failures.append(1)
        raise RuntimeError("a bug while applying")

    monkeypatch.setattr(registry, "_apply", broken_apply)

    async def main() -> None:
        registry.start()
        deadline = asyncio.get_running_loop().time() + 10
        while len(failures) < 3:  # the loop came back after each failure
            assert asyncio.get_running_loop().time() < deadline, "the registration loop was not restarted"
            await asyncio.sleep(0.01)
        await registry.stop()

    asyncio.run(main())
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and "nameserver-registry failed unexpectedly (RuntimeError: a bug while applying)" in (
        errors[0].getMessage())


def test_the_principals_are_read_again_each_round_but_sent_only_when_their_version_changed(tmp_path):
    """The broker names the version it has (``If-None-Match``); the name server answers 304 while it is current."""
    settings = BrokerSettings(name="broker-a", store_dir=tmp_path, segment_size=1 << 16, cq_units_per_file=64)
    broker = BrokerController(settings)
    registry = NameServerRegistry(broker, [URL], interval_s=0.01)
    listed = {"version": "v1", "principals": [{"name": "app", "token_sha256": "d1", "consume": ["G:T"]}]}
    asked: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/digests"):
            return httpx.Response(200, json={"deletions": [], "last_deletion_id": 0, "topics": []})
        asked.append(request.headers.get("If-None-Match"))
        if request.headers.get("If-None-Match") == f'"{listed["version"]}"':
            return httpx.Response(304)
        return httpx.Response(200, json=listed)

    registry._client = httpx.AsyncClient(transport=httpx.MockTransport(handler))

    async def main() -> None:
        await registry.register_once()
        await registry.register_once()  # unchanged: 304, the table kept
        assert (broker.principals.version, broker.principals.get("d1") is not None) == ("v1", True)
        listed.update(version="v2", principals=[{"name": "app", "token_sha256": "d2", "consume": ["G:T"]}])
        await registry.register_once()
        await registry.stop()

    asyncio.run(main())
    assert asked == [None, '"v1"', '"v1"']
    assert (broker.principals.version, broker.principals.get("d1"), broker.principals.get("d2") is not None) == (
        "v2", None, True)
