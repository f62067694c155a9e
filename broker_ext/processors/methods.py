"""The broker's methods, each declared once: how it is served, the right it needs, whether only a leader takes it.

RocketMQ registers each request code once with its processor; here each ``BrokerMethod`` names its processor call
(``serve``), the check of the caller's right (``right``: raises ``FORBIDDEN`` naming the right) and whether it
changes what the broker holds (``writes``: only the leader of a broker set takes it, inside its lease, see
``ReplicaRole.fence``). The TCP server, access control and the replica role all read this table; the request and
response types of each code are the wire's (``protocol/remoting.py``), shared with the clients.

``AUTHENTICATE`` is the TCP server's own (``serve`` and ``right`` None); ``NOTIFY_GROUP_CHANGED`` is a push from
broker to client and not served here (``NOT_SERVED``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graymq.broker_ext.security.access import Right
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.connection import Connection, HandlerResult

if TYPE_CHECKING:
    from graymq.broker_ext.broker_controller import BrokerController

Serve = Callable[["BrokerController", Connection, Any, bytes], HandlerResult]


@dataclass(frozen=True, slots=True)
class BrokerMethod:
    code: int  # pb.Method
    serve: Serve | None  # (broker, connection, typed request, the body as received) -> the answer
    right: Right | None  # raises ForbiddenError
    writes: bool = False  # leader only, inside its lease


METHODS: dict[int, BrokerMethod] = {m.code: m for m in (
    # served by the TCP server itself, before any right can be checked: it binds the connection to a principal
    BrokerMethod(pb.AUTHENTICATE, None, None),
    BrokerMethod(pb.SEND_MESSAGE, lambda b, c, r, body: b.send_processor.send(r),
                 lambda a, p, r, c: a.produce(p, r.message.topic), writes=True),
    # its messages are read from the body as received; they may only name the batch's topic (refused whole)
    BrokerMethod(pb.SEND_BATCH, lambda b, c, r, body: b.send_processor.send_batch(r, body),
                 lambda a, p, r, c: a.produce(p, r.topic), writes=True),
    BrokerMethod(pb.PULL_MESSAGE, lambda b, c, r, body: b.pull_processor.pull(r),
                 lambda a, p, r, c: a.consume_as_client(p, r)),
    BrokerMethod(pb.HEARTBEAT, lambda b, c, r, body: b.client_processor.heartbeat(c, r),
                 lambda a, p, r, c: a.heartbeat(p, r, c)),
    BrokerMethod(pb.UNREGISTER_CLIENT, lambda b, c, r, body: b.client_processor.unregister(r),
                 lambda a, p, r, c: a.unregister(p, r)),
    BrokerMethod(pb.GET_CONSUMER_LIST, lambda b, c, r, body: b.client_processor.consumer_list(r),
                 lambda a, p, r, c: a.consume(p, r.consumer_group)),
    BrokerMethod(pb.QUERY_CONSUMER_OFFSET, lambda b, c, r, body: b.admin_processor.query_offset(r),
                 lambda a, p, r, c: a.consume(p, r.consumer_group, r.topic)),
    BrokerMethod(pb.UPDATE_CONSUMER_OFFSET, lambda b, c, r, body: b.admin_processor.update_offset(r),
                 lambda a, p, r, c: a.consume_as_client(p, r), writes=True),
    BrokerMethod(pb.GET_MIN_OFFSET, lambda b, c, r, body: b.admin_processor.min_offset(r),
                 lambda a, p, r, c: a.use_topic(p, r.topic)),
    BrokerMethod(pb.GET_MAX_OFFSET, lambda b, c, r, body: b.admin_processor.max_offset(r),
                 lambda a, p, r, c: a.use_topic(p, r.topic)),
    BrokerMethod(pb.SEARCH_OFFSET_BY_TIME, lambda b, c, r, body: b.admin_processor.search_offset(r),
                 lambda a, p, r, c: a.use_topic(p, r.topic)),
    BrokerMethod(pb.GET_TOPIC, lambda b, c, r, body: b.admin_processor.get_topic(r),
                 lambda a, p, r, c: a.use_topic(p, r.topic)),
    BrokerMethod(pb.QUERY_MESSAGE_BY_KEY, lambda b, c, r, body: b.admin_processor.query_by_key(r),
                 lambda a, p, r, c: a.read_topic(p, r.topic)),
    BrokerMethod(pb.VIEW_MESSAGE_BY_OFFSET, lambda b, c, r, body: b.admin_processor.view_by_offset(r),
                 lambda a, p, r, c: a.admin(p, "read messages by commit log offset")),
    BrokerMethod(pb.UPDATE_TOPIC, lambda b, c, r, body: b.admin_processor.update_topic(r),
                 lambda a, p, r, c: a.update_topic(p, r), writes=True),
    BrokerMethod(pb.GET_GROUP_BACKLOG,
                 lambda b, c, r, body: b.admin_processor.group_backlog(r, b.access.backlog_topics(c, r)),
                 lambda a, p, r, c: a.backlog(p, r)),
    BrokerMethod(pb.LOCK_QUEUES, lambda b, c, r, body: b.lock_processor.lock(c, r),
                 lambda a, p, r, c: a.queue_leases(p, r, c), writes=True),
    BrokerMethod(pb.UNLOCK_QUEUES, lambda b, c, r, body: b.lock_processor.unlock(r),
                 lambda a, p, r, c: a.queue_leases(p, r, None), writes=True),
    BrokerMethod(pb.CONSUMER_SEND_BACK,
                 lambda b, c, r, body: b.send_back_processor.send_back(
                     r, b.access.send_back_topic_check(c, r.consumer_group)),
                 lambda a, p, r, c: a.consume(p, r.consumer_group), writes=True),
    BrokerMethod(pb.REPLICA_FETCH, lambda b, c, r, body: b.feed.fetch(r),
                 lambda a, p, r, c: a.replicate(p, r)),
)}

NOT_SERVED = {pb.NOTIFY_GROUP_CHANGED: "a push from the broker to its clients"}

WRITES = frozenset(code for code, method in METHODS.items() if method.writes)
