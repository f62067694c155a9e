"""A queue lease is its client's: another principal naming that client's id in a pull or a commit is refused
(FORBIDDEN), as it already was for heartbeats, queue locks and unregistering."""

from __future__ import annotations

import pytest

from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import ForbiddenError
from tests.integration.test_broker_trust import as_principal, secure  # noqa: F401
from tests.support.broker import heartbeat, pull_request

pytestmark = pytest.mark.integration


def test_a_pull_or_a_commit_naming_another_principals_client_on_its_leased_queue_is_refused(
    secure: dict[str, str],  # noqa: F811
) -> None:
    address = secure["address"]

    async def hold_then_spoof(client: BrokerClient) -> None:
        await heartbeat(client, address, "c1", "billing", {"ORDER_PAID": "*"}, gray=False)
        locked = await client.lock_queues(address, "billing", "c1", [("ORDER_PAID", 3)])
        assert [(q.topic, q.queue_id) for q in locked.locked] == [("ORDER_PAID", 3)]
        spoofer = BrokerClient(token=secure["billing2"], tls=False)
        try:
            with pytest.raises(ForbiddenError, match="client c1 of group billing: it belongs to principal billing"):
                await spoofer.pull(address, pull_request("billing", "c1", "ORDER_PAID", 3))
            with pytest.raises(ForbiddenError, match="client c1 of group billing: it belongs to principal billing"):
                await spoofer.update_offset(address, "billing", "ORDER_PAID", 3, 0, client_id="c1")
        finally:
            await spoofer.close()
        await client.pull(address, pull_request("billing", "c1", "ORDER_PAID", 3))  # its own client: served
        await client.update_offset(address, "billing", "ORDER_PAID", 3, 0, client_id="c1")

    as_principal(secure["billing"], hold_then_spoof)
