"""The name-server client's typed answers read what the name server's own response models write (an answer passed
through ``nameserver.schemas``), give it back key for key where the CLI prints it, and ignore keys a newer name
server adds."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from graymq.nameserver import schemas
from graymq.nameserver_api import records
from graymq.protocol.membership import ClientState

pytestmark = pytest.mark.unit
AT = "2026-03-01T10:20:30.000500Z"
CLIENT = {"client_id": "v2a", "role": "consumer", "labels": {"version": "v2"}, "explicit_gray": None,
          "declared_gray": True, "desired_gray": True, "gray": True, "state": "DRAINING", "queues": ["b:T:0"],
          "topics": ["T"], "last_seen": AT, "principal": "app",
          "health": {"gray": {"consumed": 3, "failed": 1, "sent_back": 0, "dead_lettered": 0, "p50_ms": 1.0,
                              "p99_ms": 2.5}, "normal": {"consumed": 0, "failed": 0, "sent_back": 0,
                                                         "dead_lettered": 0, "p50_ms": 0.0, "p99_ms": 0.0}}}
REPLICA = {"replica_id": 1, "address": "127.0.0.1:2", "leader": False, "in_sync": True, "live": True,
           "log_end_offset": 900, "lag_bytes": 100, "last_heartbeat": AT}
REPLICA_SET = {"broker_name": "b", "replication": "sync", "epoch": 3, "leader_replica_id": 0,
               "leader_address": "127.0.0.1:1", "in_sync": [0, 1], "epoch_start_offset": 512, "lease_seconds": 6.0,
               "leader_lease_expires_at": AT, "replicas": [{**REPLICA, "replica_id": 0, "leader": True}, REPLICA]}


def served(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as the name server writes it, plus a key a later name server might add."""
    return {**model.model_validate(data).model_dump(mode="json"), "added_later": {"any": "value"}}


def without_extra(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "added_later"}


@pytest.mark.parametrize("model, record, data", [
    (schemas.ClientView, records.ClientRecord, CLIENT),
    (schemas.TopicPutResult, records.TopicPutResult,
     {"topic": "T", "queue_nums": 8, "gray_queue_nums": 2, "perm": 6, "created_at": AT, "updated_at": AT,
      "brokers_ready": ["a"], "brokers_pending": ["b"]}),
    (schemas.AuditView, records.AuditRecord,
     {"id": 4, "actor": "ops", "at": AT, "object_type": "group", "object_id": "G", "group_name": "G",
      "action": "set_weight", "before": {"gray_weight": 0}, "after": {"gray_weight": 30}, "reason": None}),
    (schemas.ReplicaSetView, records.ReplicaSetRecord, REPLICA_SET),
    (schemas.PrincipalView, records.PrincipalRecord,
     {"name": "app", "produce": ["ORDER_*"], "consume": [], "admin": False, "broker": True, "broker_names": ["e-*"],
      "access_key": "AK", "created_at": AT, "updated_at": AT}),
])
def test_a_printed_answer_is_the_name_servers_json_and_a_later_key_is_ignored(
        model: type[BaseModel], record: Any, data: dict[str, Any]) -> None:
    answer = served(model, data)
    assert record.from_json(answer).to_json() == without_extra(answer)


def test_a_groups_clients_and_a_flag_answer_are_typed() -> None:
    listing = records.GroupClients.from_json(served(schemas.GroupClients, {
        "group": "G", "gray_switch": True, "orphan_policy": "adopt", "gray_weight": 20, "clients": [CLIENT],
        "total": 3, "counts": [{"role": "consumer", "lane": "gray", "clients": 3, "stale": 0}], "next_offset": 1}))
    assert (listing.gray_switch, listing.orphan_policy, listing.gray_weight, listing.gray_retired) == (
        True, "adopt", 20, False)
    assert (listing.total, listing.next_offset) == (3, 1)
    older = {"group": "G", "gray_switch": True, "orphan_policy": "hold", "gray_weight": 0, "clients": []}
    assert (records.GroupClients.from_json(older).total, records.GroupClients.from_json(older).next_offset) == (
        None, None)  # a name server from before pages
    [client] = listing.clients
    assert (client.state, client.queues, client.stale, client.last_seen.microsecond) == (
        ClientState.DRAINING, ("b:T:0",), False, 500)
    flagged = records.FlagResult.from_json(served(schemas.FlagResult, {
        "group": "G", "client_id": "v2a", "explicit_gray": False, "clients": [CLIENT]}))
    assert (flagged.explicit_gray, [c.desired_gray for c in flagged.clients]) == (False, [True])
    assert records.GroupClients.unknown("G").clients == ()


def test_brokers_and_principal_tokens_are_typed() -> None:
    broker = records.BrokerRecord.from_json(served(schemas.BrokerView, {
        "broker_name": "b", "address": "127.0.0.1:1", "last_heartbeat": AT, "lease_expires_at": AT, "topics": ["T"],
        "replica_set": REPLICA_SET}))
    assert broker.replica_set is not None and broker.replica_set.to_json() == REPLICA_SET
    assert [r.leader for r in broker.replica_set.replicas] == [True, False] and broker.grpc_address is None
    plain = records.BrokerRecord.from_json({**without_extra(served(schemas.BrokerView, {
        "broker_name": "b", "address": "a:1", "last_heartbeat": AT, "lease_expires_at": AT, "topics": []}))})
    assert plain.replica_set is None
    token = records.PrincipalToken.from_json(served(schemas.PrincipalToken, {"name": "app", "token": "t0k"}))
    assert (token.name, token.token, token.access_key, token.secret_key) == ("app", "t0k", None, None)


def test_a_heartbeat_answer_is_typed_and_a_watch_compares_its_values() -> None:
    answer = records.HeartbeatAnswer.from_json(served(schemas.ClientHeartbeatResponse, {
        "group": "G", "client_id": "c1", "role": "producer", "gray_switch": True, "desired_gray": False,
        "explicit_gray": False, "gray": True, "state": "GRAY", "orphan_policy": "adopt", "gray_weight": 25,
        "gray_marks": False, "topics": {"T": {"queue_nums": 8, "gray_queue_nums": 2}}}))
    assert (answer.desired_gray, answer.state, answer.orphan_policy, answer.gray_weight, answer.gray_marks) == (
        False, ClientState.GRAY, "adopt", 25, False)
    assert (answer.gray_retired, answer.fifo, answer.max_attempts, answer.topics) == (False, False, 16, {"T": (8, 2)})
    older = records.HeartbeatAnswer.from_json({k: v for k, v in served(schemas.ClientHeartbeatResponse, {
        "group": "G", "client_id": "c1", "role": "producer", "gray_switch": True, "desired_gray": False,
        "explicit_gray": None, "gray": False, "state": "NORMAL", "orphan_policy": "hold", "gray_weight": 0,
        "topics": {}}).items() if k not in ("gray_marks", "gray_retired", "fifo", "max_attempts")})
    assert older.gray_marks is True  # a name server without the field lets producers honour marks
