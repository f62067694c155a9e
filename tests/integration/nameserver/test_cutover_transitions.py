"""The name server refuses a cutover state change its transition table does not allow (409, one line), on a real
name server process, and keeps the record as it was."""

from __future__ import annotations

import pytest

from graymq.client.nameserver_client import ConflictError, NameServerClient

pytestmark = pytest.mark.integration


async def _register(ns: NameServerClient, group: str) -> None:
    await ns.client_heartbeat({"group": group, "client_id": f"{group}-c1", "role": "consumer"})


def test_a_promote_cannot_be_recorded_aborted_and_stays_running(cluster) -> None:
    async def go(ns: NameServerClient) -> tuple[str, dict]:
        await _register(ns, "G_ABORT")
        op = await ns.start_cutover("G_ABORT", "promote", "drain", ["G_ABORT"])
        with pytest.raises(ConflictError) as refused:
            await ns.update_cutover(op["id"], state="ABORTED", step="rollback")
        [after] = await ns.list_cutovers("G_ABORT")
        return refused.value.message, after

    message, after = cluster.ns_call(go)
    assert "cannot go from RUNNING to ABORTED" in message and "promote" in message and "\n" not in message
    assert (after["state"], after["step"], after["finished_at"]) == ("RUNNING", None, None)


def test_a_rollout_ends_aborted_and_then_is_final(cluster) -> None:
    async def go(ns: NameServerClient) -> tuple[dict, str]:
        await _register(ns, "G_ROLL")
        op = await ns.start_cutover("G_ROLL", "rollout", "hold", ["G_ROLL"])
        done = await ns.update_cutover(op["id"], state="ABORTED", step="done")
        with pytest.raises(ConflictError) as refused:
            await ns.update_cutover(op["id"], state="RUNNING")
        return done, refused.value.message

    done, message = cluster.ns_call(go)
    assert (done["state"], done["step"]) == ("ABORTED", "done") and done["finished_at"]
    assert "already finished (ABORTED)" in message
