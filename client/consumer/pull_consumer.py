"""PullConsumer: the application chooses queues and offsets; graymq gives it the gray or normal queue set.

Used directly by batch jobs and by the Spark data source. It registers in the name server
(role ``consumer`` or ``spark``) so the controller sees it, but does no rebalance; ``stop()``
unregisters it at once. A pulled record that does not decode is skipped (logged at ERROR with
its topic, queue and offset, counted in ``skipped_records``): ``pull`` returns the others, and
its ``next_begin_offset`` is past the damaged one. ``config=`` (a ``ClientConfig``) replaces ``nameserver``
and ``token`` and shares that config's name-server client, route cache and broker connections. ``lane=``
names the lane it is in (``gray=True`` alone is the lane ``gray``): its pulls carry it, so the brokers let it
read that lane's slot.
"""

from __future__ import annotations

from typing import Any

from graymq.client.config import ClientConfig, client_config
from graymq.client.consumer.pulled_records import decode_pulled, log_damaged
from graymq.client.instance import ClientInstance
from graymq.client.message import MessageQueue, PullResult, PullStatus
from graymq.core.queue_layout import GRAY_LANE
from graymq.core.route import TopicRoute
from graymq.nameserver_api.membership import Membership, new_client_id
from graymq.nameserver_api.records import HeartbeatAnswer
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.constants import parse_sub_expression
from graymq.protocol.membership import ClientState, Role

_PULL_STATUS = {pb.FOUND: PullStatus.FOUND, pb.NO_NEW_MSG: PullStatus.NO_NEW_MSG,
                pb.NO_MATCHED_MSG: PullStatus.NO_MATCHED_MSG, pb.OFFSET_ILLEGAL_STATUS: PullStatus.OFFSET_ILLEGAL}


class PullConsumer:
    def __init__(self, group: str, nameserver: str | list[str] | None = None, *, client_id: str | None = None,
                 gray: bool = False, labels: dict[str, str] | None = None, role: Role = "consumer",
                 heartbeat_interval_s: float = 2.0, register: bool = True, token: str | None = None,
                 config: ClientConfig | None = None, lane: str | None = None) -> None:
        self.group = group
        self.client_id = client_id or new_client_id(role)
        self.gray = gray or lane is not None
        self.lane = None if lane == GRAY_LANE else lane  # with ``gray``: its lane (None: ``gray``)
        self.state = ClientState.settled(self.gray)
        self.desired_gray = self.gray
        self.desired_lane = self.in_lane
        self.gray_switch = True
        self.client = ClientInstance.of(client_config(config, nameserver, token))
        self.nameserver, self.brokers = self.client.nameserver, self.client.brokers
        self.routes = self.client.route_view()
        self._left = False
        self.queues: list[MessageQueue] = []
        self.skipped_records = 0
        self._register = register
        self.membership = Membership(
            self.client.session, group=group, client_id=self.client_id, role=role, labels=dict(labels or {}),
            declared_gray=self.lane or self.gray, interval_s=heartbeat_interval_s, report=self._report,
            on_update=self._on_update, aligned=True, log_failures=False,  # the instance's session logs failures
        )

    @property
    def in_lane(self) -> str | None:
        """The lane it is in (``gray`` for a gray consumer naming none); None for base."""
        return (self.lane or GRAY_LANE) if self.gray else None

    def _report(self) -> dict[str, Any]:
        return {"gray": self.gray, "state": self.state, "topics": self.routes.topics(),
                "queues": [str(q) for q in self.queues], "lane": self.in_lane}

    async def _on_update(self, response: HeartbeatAnswer) -> None:
        self.desired_gray = response.desired_gray
        self.desired_lane = response.desired_lane
        self.gray_switch = response.gray_switch

    async def start(self) -> None:
        if self._register:
            await self.membership.beat(first=True)
            self.client.start_membership(self.membership)

    async def stop(self) -> None:
        """Stop heartbeating, leave the group in the name server (when registered) and close."""
        await self.client.stop_membership(self.membership)
        await self.membership.unregister()
        await self.routes.close()
        if not self._left:
            self._left = True
            await self.client.leave()

    async def route(self, topic: str) -> TopicRoute:
        return await self.routes.get(topic)

    async def fetch_queues(self, topic: str, gray: bool | None = None) -> list[MessageQueue]:
        """The queues of ``topic`` on this side (gray or normal; every queue when the switch is off)."""
        route = await self.routes.get(topic)
        queues = route.queues(readable=True)
        side = self.gray if gray is None else gray
        if not self.gray_switch:
            return queues
        return [mq for mq in queues if route.is_gray(mq) == side]

    async def _address(self, mq: MessageQueue) -> str:
        route = await self.routes.get(mq.topic)
        address = route.address_of(mq.broker_name)
        if address is None:
            route = await self.routes.get(mq.topic, refresh=True)
            address = route.address_of(mq.broker_name)
        if address is None:
            raise LookupError(f"broker {mq.broker_name} of {mq} is not in the route")
        return address

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: str = "*",
                   suspend_s: float = 0.0, adopted: bool = False) -> PullResult:
        """Up to ``max_nums`` messages of ``mq`` from ``offset``; ``adopted``: a base consumer reading a lane's queue
        its group adopted (the broker refuses a base pull of a lane's queue otherwise)."""
        request = pb.PullRequest(
            consumer_group=self.group, client_id=self.client_id, topic=mq.topic, queue_id=mq.queue_id,
            queue_offset=offset, max_msg_nums=max_nums, suspend_timeout_ms=int(suspend_s * 1000),
            gray_flag=self.gray, commit_offset=-1, sub_expression=expression,
            lane=(self.lane or "") if self.gray else "", adopted=adopted,
        )
        address = await self._address(mq)
        response = await self.brokers.pull(address, request)
        messages, damaged = decode_pulled(response.records, mq.broker_name, parse_sub_expression(expression), offset,
                                          response.next_begin_offset)
        if damaged:
            self.skipped_records += len(damaged)
            log_damaged(mq, address, damaged)
        return PullResult(_PULL_STATUS[response.status], response.next_begin_offset, response.min_offset,
                          response.max_offset, messages)

    async def committed_offset(self, mq: MessageQueue) -> int:
        return await self.brokers.query_offset(await self._address(mq), self.group, mq.topic, mq.queue_id)

    async def commit(self, mq: MessageQueue, offset: int) -> None:
        await self.brokers.update_offset(await self._address(mq), self.group, mq.topic, mq.queue_id, offset)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self.brokers.min_offset(await self._address(mq), mq.topic, mq.queue_id)

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self.brokers.max_offset(await self._address(mq), mq.topic, mq.queue_id)
