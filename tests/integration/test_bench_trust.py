"""The ``trust`` benchmark part measures what its cases are named for: ``dev`` takes a client without a token,
``auth`` refuses one, ``auth+tls`` speaks only TLS with the throwaway CA's certificate; and the runner reports
every case with its cost against ``dev``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from graymq.bench import bench_trust, runner
from graymq.bench.bench_broker import produce
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import ConnectionClosedError, UnauthorizedError
from graymq.protocol.tls import client_context

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[bench_trust.TrustSetup]:
    root = tmp_path_factory.mktemp("trust")
    with bench_trust.trust_setup(root, root) as trust:
        yield trust


def send_one(client: BrokerClient, address: str) -> None:
    async def go() -> None:
        try:
            await produce(client, address, 1, batched=False)
        finally:
            await client.close()

    asyncio.run(go())


@pytest.mark.parametrize("config", bench_trust.CONFIGS)
def test_each_configuration_sends_with_its_own_client_and_refuses_what_it_excludes(
        setup: bench_trust.TrustSetup, tmp_path: Path, config: str) -> None:
    broker = bench_trust.start_broker(setup, tmp_path, tmp_path, config)
    try:
        send_one(bench_trust.client_for(setup, config), broker.address)
        tokenless_plain = BrokerClient(timeout_s=5, token="", tls=False)
        if config == "dev":
            send_one(tokenless_plain, broker.address)
        elif config == "auth":
            with pytest.raises(UnauthorizedError, match="not authenticated"):
                send_one(tokenless_plain, broker.address)
        else:
            with pytest.raises(ConnectionClosedError):
                send_one(BrokerClient(timeout_s=5, token=setup.client_token, tls=False), broker.address)
            with pytest.raises(UnauthorizedError, match="not authenticated"):
                send_one(BrokerClient(timeout_s=5, token="", tls=client_context(setup.tls.ca)), broker.address)
    finally:
        broker.stop()


def test_the_trust_part_reports_every_case_with_its_cost_against_dev(tmp_path: Path) -> None:
    out_json, out_md = tmp_path / "results.json", tmp_path / "RESULTS.md"
    code = runner.main(["trust", "--count", "300", "--repeat", "1", "--no-install", "--json", str(out_json),
                        "--markdown", str(out_md), "--baseline", str(tmp_path / "none.json")])
    assert code == 0
    cases = json.loads(out_json.read_text())["parts"]["trust"]
    assert sorted(cases) == sorted(f"{c}/{m}" for c, m in bench_trust.CASES)
    for case, entry in cases.items():
        assert "error" not in entry["median"], (case, entry["median"])
        assert entry["median"]["produce_msgs_s"] > 0 and entry["median"]["consume_msgs_s"] > 0
    section = out_md.read_text().split("### Authentication and TLS on the broker path")[1].split("###")[0]
    rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| ")}
    assert rows["auth+tls/batch"].count(" %") == 4  # produce, consume, CPU produce, CPU consume costs
    assert " %" not in rows["dev/single"]
