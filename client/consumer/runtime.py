"""What the parts of a push consumer share: who it is, its tuning and connections, the group's gray settings, and
how a failure is reported (retried with a rate-limited warning, or ending the consumer)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from graymq.client.consumer.settings import ConsumerSettings
from graymq.client.route_cache import SharedRouteCache
from graymq.core.consumer_side import ConsumerSide
from graymq.core.gray_flip import GrayFlip
from graymq.core.group_gray import GroupGray
from graymq.core.queue_layout import GRAY_LANE
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import GrayMQError
from graymq.protocol.retry import ThrottledLog
from graymq.protocol.supervisor import Supervisor

log = logging.getLogger(__name__)


@dataclass
class ConsumerRuntime(ConsumerSide):
    """One consumer's shared context; ``fail`` ends the consumer (set by its owner), ``rebalance_now`` wakes the
    rebalancer."""

    group: str
    client_id: str
    broadcasting: bool
    settings: ConsumerSettings
    brokers: BrokerClient
    routes: SharedRouteCache
    flip: GrayFlip
    tasks: Supervisor
    fail: Callable[[GrayMQError, str], None]
    subscriptions: dict[str, str] = field(default_factory=dict)
    group_gray: GroupGray = field(default_factory=GroupGray)
    failure: GrayMQError | None = field(default=None, init=False)
    rebalance_now: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    warnings: ThrottledLog = field(default_factory=lambda: ThrottledLog(log), init=False)

    @property
    def wire_lane(self) -> str:
        """The lane as requests to brokers carry it: "" for base and the ``gray`` lane (the gray flag says which)."""
        lane = self.lane
        return "" if lane in (None, GRAY_LANE) else lane

    def retry_later(self, exc: GrayMQError, what: str, key: Hashable) -> bool:
        """After a failed broker call: fail the consumer when ``exc`` is permanent (False), else warn (True).

        The warning names ``what`` failed and is rate-limited by ``key`` (the same failure repeating).
        """
        if exc.permanent:
            self.fail(exc, what)
            return False
        self.warnings.warning(key, "%s failed: %s (%s); retrying", what, exc.message, exc.code_name)
        return True

    def broker_addresses(self) -> set[str]:
        """The brokers of the subscribed topics, as the cached routes list them."""
        return {b.address for topic in self.subscriptions if (r := self.routes.cached(topic)) for b in r.brokers}
