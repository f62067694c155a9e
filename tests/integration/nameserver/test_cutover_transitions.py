"""The name server refuses a cutover state change its transition table does not allow (409, one line), on a real
name server process, and keeps the record as it was."""

from __future__ import annotations

import pytest

from graymq.nameserver_api.client import ConflictError, NameServerClient
from graymq.nameserver_api.records import CutoverRecord
from graymq.protocol.operations import CutoverKind, CutoverMode, CutoverState

pytestmark = pytest.mark.integration


async def _register(ns: NameServerClient, group: str) -> None:
    await ns.client_heartbeat({"group": group, "client_id": f"{group}-c1", "role": "consumer"})


def test_a_promote_cannot_be_recorded_aborted_and_stays_running(cluster) -> None:
    async def go(ns: NameServerClient) -> tuple[str, CutoverRecord]:
        await _register(ns, "G_ABORT")
        op = await ns.start_cutover("G_ABORT", "promote", "drain", ["G_ABORT"])
        with pytest.raises(ConflictError) as refused:
            await ns.update_cutover(op.id, state="ABORTED", step="rollback")
        [after] = await ns.list_cutovers("G_ABORT")
        return refused.value.message, after

    message, after = cluster.ns_call(go)
    assert "cannot go from RUNNING to ABORTED" in message and "promote" in message and "\n" not in message
    assert (after.state, after.step, after.finished_at) == ("RUNNING", None, None)


def test_a_rollout_ends_aborted_and_then_is_final(cluster) -> None:
    async def go(ns: NameServerClient) -> tuple[CutoverRecord, str]:
        await _register(ns, "G_ROLL")
        op = await ns.start_cutover("G_ROLL", "rollout", "hold", ["G_ROLL"])
        done = await ns.update_cutover(op.id, state="ABORTED", step="done")
        with pytest.raises(ConflictError) as refused:
            await ns.update_cutover(op.id, state="RUNNING")
        return done, refused.value.message

    done, message = cluster.ns_call(go)
    assert (done.state, done.step) == ("ABORTED", "done") and done.finished_at is not None
    assert "already finished (ABORTED)" in message


def test_cutover_records_are_typed_and_give_back_the_name_servers_json(cluster) -> None:
    async def go(ns: NameServerClient) -> tuple[list, list[CutoverRecord]]:
        await _register(ns, "G_TYPED")
        first = await ns.start_cutover("G_TYPED", "rollback", "adopt", ["G_TYPED", "P_TYPED"])
        await ns.update_cutover(first.id, state="FAILED", step="adopt", result={"message": "timed out", "n": 1})
        await ns.start_cutover("G_TYPED", "promote", "drain", ["G_TYPED"])
        raw = await ns.request("GET", "/v1/groups/G_TYPED/cutovers")
        return raw, await ns.list_cutovers("G_TYPED")

    raw, records = cluster.ns_call(go)
    assert [(r.kind, r.mode, r.state) for r in records] == [
        (CutoverKind.PROMOTE, CutoverMode.DRAIN, CutoverState.RUNNING),
        (CutoverKind.ROLLBACK, CutoverMode.ADOPT, CutoverState.FAILED)]
    assert records[1].finished_at is not None and records[1].finished_at >= records[1].started_at
    assert [r.to_json() for r in records] == raw  # what `graymq gray history --json` prints, unchanged
