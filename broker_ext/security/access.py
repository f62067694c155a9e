"""Who is on a connection and what it may ask: authentication and the right each broker method needs.

A connection authenticates once (``AUTHENTICATE`` with a principal's token); the broker keeps the
token's digest and looks the principal up again at every request, so a rotated or removed token stops
working as soon as the broker learns the new table. Outside dev mode any other first request gets
``UNAUTHORIZED``; a request beyond the principal's rights gets ``FORBIDDEN`` naming the right. In dev
mode a connection without a (valid) token acts as ``dev`` with every right.

A consumer client id belongs to the principal whose connection registered it: another principal can
neither heartbeat nor unregister it while it is connected (an admin can unregister it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from graymq.broker_ext.groups.consumer_manager import ConsumerManager
from graymq.broker_ext.security.principal_refresh import PrincipalRefresh
from graymq.broker_ext.security.principals import DEV_PRINCIPAL, Principal, PrincipalTable, token_digest
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.acl import Rights, group_of_topic
from graymq.protocol.connection import Connection
from graymq.protocol.errors import ForbiddenError, UnauthorizedError
from graymq.protocol.remoting import method_name, response_envelope
from graymq.protocol.retry import ThrottledLog
from graymq.protocol.throttle import FailedAuthThrottle

log = logging.getLogger(__name__)

_DIGEST = "principal_digest"  # connection attribute: the digest of the token it authenticated with

FAILED_AUTH_LIMIT = 20  # failed AUTHENTICATE calls an address may make in FAILED_AUTH_WINDOW_S
FAILED_AUTH_WINDOW_S = 60.0

# A method's right (broker_ext/processors/methods.py): (access control, principal, request, connection), raising
# FORBIDDEN
Right = Callable[["AccessControl", Principal, Any, Connection], None]

def _forbid(principal: Principal, action: str) -> None:
    raise ForbiddenError(f"principal {principal.name} may not {action}")


class AccessControl:
    def __init__(self, principals: PrincipalTable, consumers: ConsumerManager, *, dev_mode: bool,
                 topics_from_nameserver: bool) -> None:
        self.principals = principals
        self.consumers = consumers
        self.dev_mode = dev_mode
        self.topics_from_nameserver = topics_from_nameserver
        self.throttle = FailedAuthThrottle(FAILED_AUTH_LIMIT, FAILED_AUTH_WINDOW_S)
        self.refresh: PrincipalRefresh | None = None  # set while a name server can be asked
        self.refused = 0  # requests answered UNAUTHORIZED or FORBIDDEN
        self._log = ThrottledLog(log, 10.0)
    # -- authentication ------------------------------------------------------------------------
    async def authenticate(self, conn: Connection, req: pb.AuthenticateRequest) -> bytes:
        """Bind the connection to the token's principal. A token the broker does not know makes it read the
        principals again first (``refresh``: a principal added a moment ago works at once), unless the peer's
        address failed with it lately (a peer retrying a stale token costs no reads); a wrong token then counts
        against the address (once per window: see ``FailedAuthThrottle``)."""
        address = conn.peer.rpartition(":")[0]
        if (wait := self.throttle.retry_after(address)) is not None and not self.dev_mode:
            raise UnauthorizedError(f"too many failed authentications from {address}: retry in {wait} s")
        digest = token_digest(req.token)
        principal = self.principals.get(digest)
        if (principal is None and not self.dev_mode and self.refresh is not None
                and not self.throttle.failed_before(address, digest)):
            await self.refresh()
            principal = self.principals.get(digest)
        if principal is None:
            if self.dev_mode:
                return response_envelope(pb.AUTHENTICATE, pb.AuthenticateResponse(principal=DEV_PRINCIPAL.name))
            self.throttle.failed(address, digest)
            self.refused += 1
            self._log.log(logging.WARNING, ("auth", address), "refused a connection from %s: invalid token", conn.peer)
            known = "" if len(self.principals) else " (the broker has not learned any principal from a name server yet)"
            raise UnauthorizedError(f"invalid token{known}: send a principal's token (GRAYMQ_TOKEN)")
        conn.attributes[_DIGEST] = digest
        return response_envelope(pb.AUTHENTICATE, pb.AuthenticateResponse(principal=principal.name))

    async def stop(self) -> None:
        if self.refresh is not None:
            await self.refresh.stop()

    def is_authenticated(self, conn: Connection) -> bool:
        return self.dev_mode or _DIGEST in conn.attributes

    def principal(self, conn: Connection) -> Principal:
        """The connection's principal as the table has it now; ``UnauthorizedError`` without one."""
        digest = conn.attributes.get(_DIGEST)
        if digest is not None:
            principal = self.principals.get(digest)  # type: ignore[arg-type]
            if principal is not None:
                return principal
            if not self.dev_mode:
                raise UnauthorizedError("the token of this connection is no longer valid (rotated or removed)")
        if self.dev_mode:
            return DEV_PRINCIPAL
        raise UnauthorizedError("not authenticated: the first request on a connection is AUTHENTICATE with a "
                                "principal's token (GRAYMQ_TOKEN)")

    # -- authorization -------------------------------------------------------------------------
    def check(self, conn: Connection, method: int, right: Right, request: Any) -> Principal:
        """The principal, if it has the ``right`` (broker_ext/processors/methods.py) ``method``'s ``request``
        needs; raises ``UNAUTHORIZED`` / ``FORBIDDEN`` otherwise."""
        try:
            principal = self.principal(conn)
            right(self, principal, request, conn)
        except UnauthorizedError as exc:
            self.refused += 1
            self._log.log(logging.WARNING, ("refused", conn.peer, method), "refused %s from %s: %s",
                          method_name(method), conn.peer, exc.message)
            raise
        return principal

    def owner_of(self, conn: Connection | None) -> str | None:
        """The principal name a connection acts as (``None``: none)."""
        if conn is None:
            return None
        if conn.attributes.get(_DIGEST) is not None:
            principal = self.principals.get(conn.attributes[_DIGEST])  # type: ignore[arg-type]
            return principal.name if principal else None
        return DEV_PRINCIPAL.name if self.dev_mode else None

    def produce(self, p: Principal, topic: str) -> None:
        rights = p.rights
        if not (rights.may_produce(topic) or _own_group_topic(rights, topic)):
            _forbid(p, f"produce to topic {topic}")

    def consume(self, p: Principal, group: str, topic: str | None = None) -> None:
        if topic is None:
            if not p.rights.may_consume(group):
                _forbid(p, f"consume group {group}")
        elif not p.rights.may_consume_topic(group, topic):
            _forbid(p, f"consume topic {topic} in group {group}")

    def use_topic(self, p: Principal, topic: str) -> None:
        if not p.rights.may_use_topic(topic):
            _forbid(p, f"produce to or consume topic {topic}")

    def read_topic(self, p: Principal, topic: str) -> None:
        if not p.rights.may_read_topic(topic):
            _forbid(p, f"read messages of topic {topic} (a consume right covering it is needed)")

    def admin(self, p: Principal, action: str) -> None:
        if not p.rights.admin:
            _forbid(p, f"{action} (an admin right is needed)")

    def replicate(self, p: Principal, req: pb.ReplicaFetchRequest) -> None:
        if not p.rights.may_act_as_broker(req.broker_name, req.replica_id):
            _forbid(p, f"copy the log of broker {req.broker_name} as replica {req.replica_id} (a broker right "
                       "covering that name and replica id is needed: another replica of its set)")

    def update_topic(self, p: Principal, req: pb.UpdateTopicRequest) -> None:
        if self.topics_from_nameserver and not self.dev_mode:
            raise ForbiddenError(f"topic {req.config.topic}: topics are created and changed through the name server "
                                 "(graymq topic create), not on a broker")
        self.admin(p, f"create or change topic {req.config.topic}")

    def heartbeat(self, p: Principal, req: pb.HeartbeatRequest, conn: Connection) -> None:
        for data in req.consumers:
            self.consume(p, data.group)
            for sub in data.subscriptions:
                self.consume(p, data.group, sub.topic)
            self._own_client(p, data.group, data.client_id or req.client_id, conn)
        if req.producers and not (p.rights.produce or p.rights.admin):
            _forbid(p, f"produce as group {req.producers[0].group} (no produce right)")

    def queue_leases(self, p: Principal, req: pb.LockQueuesRequest | pb.UnlockQueuesRequest,
                      conn: Connection | None = None) -> None:
        for topic in {q.topic for q in req.queues}:
            self.consume(p, req.consumer_group, topic)
        self._own_client(p, req.consumer_group, req.client_id, conn)

    def consume_as_client(self, p: Principal, req: pb.PullRequest | pb.UpdateConsumerOffsetRequest) -> None:
        """A pull or a commit names its client: one registered by another principal is not the caller's to use
        (its queue lease would let the caller read or move that client's queues)."""
        self.consume(p, req.consumer_group, req.topic)
        self._own_client(p, req.consumer_group, req.client_id, None)

    def unregister(self, p: Principal, req: pb.UnregisterRequest) -> None:
        if req.consumer_group:
            self.consume(p, req.consumer_group)
            self._own_client(p, req.consumer_group, req.client_id, None)

    def _own_client(self, p: Principal, group: str, client_id: str, conn: Connection | None) -> None:
        """A client id registered over another principal's live connection is not this principal's to use."""
        info = self.consumers.get(group)
        client = info.clients.get(client_id) if info is not None else None
        if client is None or client.connection is conn or client.connection is None or client.connection.is_closed:
            return
        owner = self.owner_of(client.connection)
        if owner is not None and owner != p.name and not p.rights.admin:
            _forbid(p, f"act as client {client_id} of group {group}: it belongs to principal {owner}")

    def backlog(self, p: Principal, req: pb.GroupBacklogRequest) -> None:
        self.consume(p, req.consumer_group)
        if req.topic and not _sees_backlog(p.rights, req.consumer_group, req.topic):
            _forbid(p, f"see the backlog of topic {req.topic} in group {req.consumer_group}")

    def backlog_topics(self, conn: Connection, req: pb.GroupBacklogRequest) -> Callable[[str], bool]:
        """For GET_GROUP_BACKLOG: which of the group's topics the connection may see the backlog of (those it may
        consume in the group or produce to; an admin every one)."""
        rights = self.principal(conn).rights
        return lambda topic: _sees_backlog(rights, req.consumer_group, topic)

    def send_back_topic_check(self, conn: Connection, group: str) -> Callable[[str], None]:
        """For CONSUMER_SEND_BACK: raises unless the connection may consume the stored message's topic."""
        principal = self.principal(conn)

        def check(topic: str) -> None:
            self.consume(principal, group, topic)

        return check


def _own_group_topic(rights: Rights, topic: str) -> bool:
    """A consumer writes its own group's retry and dead-letter topics."""
    group = group_of_topic(topic)
    return group is not None and rights.may_consume(group)


def _sees_backlog(rights: Rights, group: str, topic: str) -> bool:
    return rights.may_consume_topic(group, topic) or rights.may_produce(topic)
