"""HTTP client of the name server: several addresses with failover, typed errors, admin calls.

A failing address is demoted (tried last for ``demote_s`` seconds); when every address
fails the call raises ``NameServerError`` and callers keep their cached state.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx

from graymq.core.queue_layout import GRAY_LANE
from graymq.core.route import TopicRoute
from graymq.nameserver_api.lane_records import GroupLane, LaneRule, TopicLanes
from graymq.nameserver_api.records import (
    AuditRecord,
    BrokerRecord,
    CutoverRecord,
    FlagResult,
    GrayRule,
    GroupClients,
    GroupDetail,
    GroupSettings,
    GroupSummary,
    HeartbeatAnswer,
    PrincipalRecord,
    PrincipalToken,
    TopicPutResult,
)
from graymq.protocol.errors import (
    BadRequestError,
    ConfigError,
    ForbiddenError,
    GrayMQError,
    NameServerError,
    TopicNotExistError,
    UnauthorizedError,
)
from graymq.protocol.tls import https_verify, untrusted_certificate

WATCH_GRACE_S = 5.0  # beyond a watch's own timeout, for the answer to arrive
RETRY_AFTER_MAX_S = 2.0  # the longest pause before an idempotent write is sent again after a 503
ROUTES_PATH = "/v1/topic-routes"
MAX_ROUTES = 500  # topics a request (the name server's limit)


class NotFoundError(GrayMQError):
    """The name server does not know the group, client, topic or operation."""


class ConflictError(GrayMQError):
    """The name server refused a change that conflicts with a running operation."""

    def __init__(self, message: str, detail: Any = None) -> None:
        super().__init__(message)
        self.detail = detail


def parse_urls(urls: str | Sequence[str]) -> list[str]:
    """The name server URLs of ``urls`` (a list, or comma-separated), each checked."""
    items = urls.split(",") if isinstance(urls, str) else urls
    result = [u.strip().rstrip("/") for u in items if u.strip()]
    for url in result:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"name server URL {url!r} must start with http:// or https://")
    if not result:
        raise ConfigError("no name server given: pass --nameserver URL or set GRAYMQ_NAMESERVER")
    return result


def _retry_after(response: httpx.Response) -> float:
    """The pause a 503's ``Retry-After`` asks for, in seconds, at most ``RETRY_AFTER_MAX_S`` (1 s when unreadable)."""
    try:
        return min(max(float(response.headers.get("Retry-After", "1")), 0.0), RETRY_AFTER_MAX_S)
    except ValueError:
        return 1.0


async def _server_hint(url: str, exc: httpx.HTTPError) -> str:
    """A plain-HTTP request a server hangs up on reads as "Server disconnected": say what it likely is, a name
    server speaking TLS (it completes a TLS handshake) or no name server at all (a broker's port hangs up too)."""
    if not (url.startswith("http://") and isinstance(exc, httpx.RemoteProtocolError)):
        return ""
    address = httpx.URL(url)
    if await _speaks_tls(address.host, address.port or 80):
        return f" (a name server speaking TLS: use https://{url.removeprefix('http://')})"
    return (f" ({address.host}:{address.port} is not a name server: a broker's port? the name server's is the one "
            "`graymq up` or `graymq nameserver` printed, 9876 by default)")


async def _speaks_tls(host: str, port: int) -> bool:
    """Whether ``host:port`` completes a TLS handshake (its certificate not checked: only the protocol is asked)."""
    import ssl

    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=context), 2.0)
    except (TimeoutError, OSError, ssl.SSLError):
        return False
    writer.close()
    return True


class NameServerClient:
    """``token`` authenticates client calls, ``admin_token`` only the admin calls; unset tokens send nothing
    (enough in dev mode). Everything is given by the caller (``ClientConfig.from_env()`` for a client, the CLI's
    ``admin_nameserver_client``): this never reads the environment. ``max_connections`` (None: no limit) bounds
    the connections open at once; more calls wait for one."""

    def __init__(self, urls: str | Sequence[str], *, token: str | None = None,
                 admin_token: str | None = None, timeout_s: float = 3.0, demote_s: float = 10.0,
                 max_connections: int | None = 100) -> None:
        self.urls = parse_urls(urls)
        self.token = token
        self.admin_token = admin_token
        self._demoted: dict[str, float] = {}
        self._demote_s = demote_s
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 2.0)),
                                       verify=https_verify(), limits=httpx.Limits(max_connections=max_connections,
                                                                                  max_keepalive_connections=20))

    async def close(self) -> None:
        await self._http.aclose()

    def _ordered(self) -> list[str]:
        now = time.monotonic()
        return sorted(self.urls, key=lambda u: self._demoted.get(u, 0.0) > now)

    async def request(self, method: str, path: str, *, json: Any = None, admin: bool = False,
                      params: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                      timeout_s: float | None = None) -> Any:
        """One call, tried on each address in turn; returns the decoded JSON body. ``timeout_s`` replaces the
        client's read timeout for this call (a long poll).

        ``path`` holds raw names (``/v1/topics/{topic}``): each segment is percent-encoded here, and an
        empty segment is refused before anything is sent. A token no HTTP header can carry is a
        ``ConfigError``, not an outage of every name server.
        """
        if "" in path.split("/")[1:]:
            raise BadRequestError(f"{method} {path}: a name in the path is empty")
        all_headers = dict(headers or {})
        token, variable = (self.admin_token, "GRAYMQ_ADMIN_TOKEN") if admin else (self.token, "GRAYMQ_TOKEN")
        if token is not None:
            all_headers["Authorization"] = f"Bearer {_checked_token(token, variable)}"
        timeout = self._http.timeout
        if timeout_s is not None:
            timeout = httpx.Timeout(timeout_s, connect=timeout.connect)
        encoded = quote(path, safe="/")
        errors = []
        untrusted = 0  # name servers whose certificate did not verify: no retry can fix that
        # an idempotent read gets a second round: a connection the server just closed is not an outage
        rounds = 2 if method == "GET" else 1
        plan, answered_again = self._ordered() * rounds, False
        while plan:
            url = plan.pop(0)
            try:
                response = await self._http.request(method, url + encoded, json=json, params=params,
                                                    headers=all_headers, timeout=timeout)
            except httpx.InvalidURL as exc:
                raise ConfigError(f"name server URL {url!r} is not a valid URL: {exc}") from exc
            except httpx.HTTPError as exc:
                error = f"{url}: {type(exc).__name__} {exc}{await _server_hint(url, exc)}"
                if error not in errors:  # a GET's second round failing alike says nothing new
                    errors.append(error)
                    untrusted += untrusted_certificate(exc)
                self._demoted[url] = time.monotonic() + self._demote_s
                continue
            if response.status_code >= 500:
                errors.append(f"{url}: HTTP {response.status_code} {_error_text(response)}")
                self._demoted[url] = time.monotonic() + self._demote_s
                if not plan and not answered_again and response.status_code == 503 and method in ("PUT", "DELETE"):
                    # An idempotent write the last name server answered 503 was rolled back there (a database
                    # deadlock victim, a pool timeout): one more round after the pause it asks for.
                    answered_again, plan = True, self._ordered()
                    await asyncio.sleep(_retry_after(response))
                continue
            self._demoted.pop(url, None)
            return _result(response, method, path, "GRAYMQ_ADMIN_TOKEN" if admin else "GRAYMQ_TOKEN")
        if untrusted == len(errors):
            raise ConfigError(f"{method} {path}: no name server's TLS certificate verifies (the CA is GRAYMQ_TLS_CA, "
                              "else the system's): " + "; ".join(errors))
        raise NameServerError(f"{method} {path} failed on every name server: " + "; ".join(errors))

    # -- routes and heartbeats ---------------------------------------------------------------
    async def get_route(self, topic: str) -> TopicRoute:
        try:
            return TopicRoute.from_json(await self.request("GET", f"/v1/topics/{topic}/route"))
        except NotFoundError as exc:
            raise TopicNotExistError(f"no route for topic {topic}: {exc.message}") from exc

    async def get_routes(self, topics: Sequence[str]) -> dict[str, TopicRoute | GrayMQError]:
        """Several topics' routes in as few requests as the name server takes (``POST /v1/topic-routes``): each
        topic's route, or the error ``get_route`` raises for it alone. ``NotFoundError`` when the name server has no
        such route (one from before it: ask topic by topic)."""
        routes: dict[str, TopicRoute | GrayMQError] = {}
        for first in range(0, len(topics), MAX_ROUTES):
            asked = list(topics[first:first + MAX_ROUTES])
            answer = await self.request("POST", ROUTES_PATH, json={"topics": asked})
            for topic, result in zip(asked, answer["results"], strict=True):
                route = result.get("route")
                routes[topic] = TopicRoute.from_json(route) if route is not None else _route_error(topic, result)
        return routes

    async def client_heartbeat(self, body: dict[str, Any]) -> HeartbeatAnswer:
        return HeartbeatAnswer.from_json(await self.request("POST", "/v1/clients/heartbeat", json=body))

    async def watch_client(self, body: dict[str, Any], timeout_s: float) -> HeartbeatAnswer:
        """Long poll: the heartbeat answer once the desired flag, switch or orphan policy differs from
        ``body["known"]``, or after ``timeout_s``."""
        return HeartbeatAnswer.from_json(await self.request("POST", "/v1/clients/watch",
                                                            json={**body, "timeout_s": timeout_s},
                                                            timeout_s=timeout_s + WATCH_GRACE_S))

    async def group_clients(self, group: str, role: str | None = None, *, limit: int | None = None,
                            offset: int = 0) -> GroupClients:
        """The group's settings and registered clients (of ``role`` only, when given): every one, or the page of
        ``limit`` from ``offset`` (its ``next_offset`` names the next)."""
        params: dict[str, Any] = {"role": role} if role else {}
        if limit is not None:
            params |= {"limit": limit, "offset": offset}
        return GroupClients.from_json(await self.request("GET", f"/v1/groups/{group}/clients",
                                                         params=params or None))

    async def unregister_client(self, group: str, client_id: str, role: str) -> None:
        """Leave the group at once (a clean stop); idempotent."""
        await self.request("DELETE", f"/v1/groups/{group}/clients/{client_id}", params={"role": role})

    # -- admin -------------------------------------------------------------------------------
    async def put_topic(self, topic: str, queue_nums: int, gray_queue_nums: int, perm: int = 6,
                        wait_s: float = 0.0) -> TopicPutResult:
        """Create or change a topic; ``wait_s``: until every live broker serves it (``brokers_pending`` lists
        those that do not yet)."""
        body = {"queue_nums": queue_nums, "gray_queue_nums": gray_queue_nums, "perm": perm}
        return TopicPutResult.from_json(await self.request("PUT", f"/v1/topics/{topic}", json=body, admin=True,
                                                           params={"wait_s": wait_s} if wait_s else None,
                                                           timeout_s=wait_s + WATCH_GRACE_S if wait_s else None))

    async def delete_topic(self, topic: str, reason: str = "") -> None:
        """Delete a topic no live client uses (``ConflictError`` naming them otherwise)."""
        await self.request("DELETE", f"/v1/topics/{topic}", params={"reason": reason} if reason else None, admin=True)

    async def get_group(self, group: str) -> GroupDetail:
        """The group's settings, rules and running cutover; ``NotFoundError`` for a group the name server lacks."""
        return GroupDetail.from_json(await self.request("GET", f"/v1/groups/{group}"))

    async def list_groups(self) -> list[GroupSummary]:
        return [GroupSummary.from_json(group) for group in await self.request("GET", "/v1/groups")]

    async def delete_group(self, group: str, reason: str = "") -> None:
        """Delete a group without live clients or a running cutover (``ConflictError`` otherwise)."""
        await self.request("DELETE", f"/v1/groups/{group}", params={"reason": reason} if reason else None, admin=True)

    async def list_audit(self, group: str | None = None, limit: int = 100) -> list[AuditRecord]:
        """Audit entries, newest first (of one group, when given)."""
        params: dict[str, Any] = {"limit": limit}
        if group is not None:
            params["group"] = group
        return [AuditRecord.from_json(entry) for entry in await self.request("GET", "/v1/audit", params=params)]

    async def set_flag(self, group: str, client_id: str, gray: bool | None, reason: str = "",
                       operation_id: int | None = None) -> FlagResult:
        """Set (or, with None, clear) the client's explicit flag; ``operation_id``: the promote or rollback doing it."""
        headers = {"X-Graymq-Operation": str(operation_id)} if operation_id is not None else None
        return FlagResult.from_json(await self.request("PUT", f"/v1/groups/{group}/clients/{client_id}/flag",
                                                       json={"gray": gray, "reason": reason}, admin=True,
                                                       headers=headers))

    async def set_switch(self, group: str, enabled: bool, reason: str = "") -> GroupSettings:
        return GroupSettings.from_json(await self.request("PUT", f"/v1/groups/{group}/switch",
                                                          json={"enabled": enabled, "reason": reason}, admin=True))

    async def set_orphan_policy(self, group: str, policy: str, reason: str = "") -> GroupSettings:
        return GroupSettings.from_json(await self.request("PUT", f"/v1/groups/{group}/orphan-policy",
                                                          json={"policy": policy, "reason": reason}, admin=True))

    async def set_weight(self, group: str, weight: int, reason: str = "") -> GroupSettings:
        """The group's weight (0..100): the share of each topic's normal queues its gray consumers take."""
        return GroupSettings.from_json(await self.request("PUT", f"/v1/groups/{group}/weight",
                                                          json={"weight": weight, "reason": reason}, admin=True))

    async def set_consumption(self, group: str, fifo: bool | None, max_attempts: int | None,
                              reason: str = "") -> GroupSettings:
        """How the group's stock pop consumers consume: FIFO, and deliveries before the DLQ (None: unchanged)."""
        body = {"fifo": fifo, "max_attempts": max_attempts, "reason": reason}
        return GroupSettings.from_json(await self.request("PUT", f"/v1/groups/{group}/consumption", json=body,
                                                          admin=True))

    async def list_brokers(self) -> list[BrokerRecord]:
        """Live brokers, each with its broker set (``replica_set``: leader, epoch, in-sync, replicas) if it has one."""
        return [BrokerRecord.from_json(broker) for broker in await self.request("GET", "/v1/brokers")]

    async def set_retired(self, group: str, retired: bool, reason: str = "") -> GroupSettings:
        """Retire the group's gray side (its consumers hold and consume nothing) or bring it back."""
        return GroupSettings.from_json(await self.request("PUT", f"/v1/groups/{group}/retired",
                                                          json={"retired": retired, "reason": reason}, admin=True))

    async def list_rules(self, group: str) -> list[GrayRule]:
        return [GrayRule.from_json(rule) for rule in await self.request("GET", f"/v1/groups/{group}/rules")]

    async def add_rule(self, group: str, selector: dict[str, str], gray: bool) -> GrayRule:
        return GrayRule.from_json(await self.request("POST", f"/v1/groups/{group}/rules",
                                                     json={"selector": selector, "gray": gray}, admin=True))

    async def delete_rule(self, group: str, rule_id: int) -> None:
        await self.request("DELETE", f"/v1/groups/{group}/rules/{rule_id}", admin=True)

    async def start_cutover(self, group: str, kind: str, mode: str, producer_groups: list[str],
                            lane: str = GRAY_LANE) -> CutoverRecord:
        """Record a RUNNING promote, rollback or rollout of ``lane`` (409 while one of that lane runs)."""
        body = {"kind": kind, "mode": mode, "producer_groups": producer_groups,
                **({"lane": lane} if lane != GRAY_LANE else {})}
        return CutoverRecord.from_json(await self.request("POST", f"/v1/groups/{group}/cutovers", json=body,
                                                          admin=True))

    async def list_cutovers(self, group: str, state: str | None = None) -> list[CutoverRecord]:
        """The group's operations, newest first (those in ``state`` only, when given)."""
        params = {"state": state} if state else None
        return [CutoverRecord.from_json(op)
                for op in await self.request("GET", f"/v1/groups/{group}/cutovers", params=params)]

    async def add_principal(self, name: str, produce: list[str], consume: list[str], admin: bool,
                            broker: bool, broker_names: list[str] | None = None, access_key: bool = False
                            ) -> PrincipalToken:
        """Create a principal; the answer holds its token, shown this once. ``broker_names``
        (with ``broker``): the broker names it may register as; ``None``: the name server's default (its own).
        ``access_key``: also issue an access key and secret key for stock RocketMQ 5 clients (in the answer)."""
        body: dict[str, Any] = {"name": name, "produce": produce, "consume": consume, "admin": admin,
                                "broker": broker, "access_key": access_key}
        if broker_names is not None:
            body["broker_names"] = broker_names
        return PrincipalToken.from_json(await self.request("POST", "/v1/principals", json=body, admin=True))

    async def list_principals(self) -> list[PrincipalRecord]:
        return [PrincipalRecord.from_json(p) for p in await self.request("GET", "/v1/principals", admin=True)]

    async def remove_principal(self, name: str) -> None:
        await self.request("DELETE", f"/v1/principals/{name}", admin=True)

    async def rotate_principal(self, name: str) -> PrincipalToken:
        """A new token for the principal (and a new secret key for its access key); the old ones stop working at
        once."""
        return PrincipalToken.from_json(await self.request("POST", f"/v1/principals/{name}/rotate", admin=True))

    async def update_cutover(self, operation_id: int, **fields: Any) -> CutoverRecord:
        """Record ``state``, ``step`` and/or ``result``; ``ConflictError`` for a state change the name server
        refuses (``CutoverState.is_transition_valid``)."""
        return CutoverRecord.from_json(await self.request("PATCH", f"/v1/cutovers/{operation_id}", json=fields,
                                                          admin=True))

    # -- lanes (docs/lanes.md) ---------------------------------------------------------------
    async def set_lane_flag(self, group: str, client_id: str, lane: str | None, reason: str = "",
                            operation_id: int | None = None) -> dict[str, Any]:
        """Put every role of a client in ``lane`` (``None``: base, an explicit off); ``set_flag`` clears a flag."""
        headers = {"X-Graymq-Operation": str(operation_id)} if operation_id is not None else None
        body = {"gray": lane is not None, "lane": lane, "reason": reason}
        return dict(await self.request("PUT", f"/v1/groups/{group}/clients/{client_id}/flag", json=body,
                                       admin=True, headers=headers))

    async def put_topic_lanes(self, topic: str, queue_nums: int, gray_queue_nums: int, lane_slots: int,
                              perm: int = 6, wait_s: float = 0.0) -> dict[str, Any]:
        """``put_topic`` with room for ``lane_slots`` lanes (grow only: ``ConflictError`` for fewer)."""
        body = {"queue_nums": queue_nums, "gray_queue_nums": gray_queue_nums, "perm": perm, "lane_slots": lane_slots}
        return dict(await self.request("PUT", f"/v1/topics/{topic}", json=body, admin=True,
                                       params={"wait_s": wait_s} if wait_s else None,
                                       timeout_s=wait_s + WATCH_GRACE_S if wait_s else None))

    async def add_lane_rule(self, group: str, selector: dict[str, str], lane: str | None) -> LaneRule:
        """A rule of the group putting matching clients in ``lane`` (``None``: base)."""
        body = {"selector": selector, "gray": lane is not None, "lane": lane}
        return LaneRule.from_json(await self.request("POST", f"/v1/groups/{group}/rules", json=body, admin=True))

    async def list_all_groups_rules(self) -> list[LaneRule]:
        return [LaneRule.from_json(rule) for rule in await self.request("GET", "/v1/rules")]

    async def add_all_groups_rule(self, selector: dict[str, str], lane: str | None, reason: str = ""
                                  ) -> LaneRule:
        """A rule of every group (after each group's own) putting matching clients in ``lane`` (``None``: base)."""
        body = {"selector": selector, "gray": lane is not None, "lane": lane, "reason": reason}
        return LaneRule.from_json(await self.request("POST", "/v1/rules", json=body, admin=True))

    async def delete_all_groups_rule(self, rule_id: int, reason: str = "") -> None:
        await self.request("DELETE", f"/v1/rules/{rule_id}", params={"reason": reason} if reason else None,
                           admin=True)

    async def group_lanes(self, group: str) -> list[GroupLane]:
        """Each lane of the group: its clients, taking part, orphan policy, slots per topic."""
        return [GroupLane.from_json(lane) for lane in await self.request("GET", f"/v1/groups/{group}/lanes")]

    async def set_lane_orphan_policy(self, group: str, lane: str, policy: str | None, reason: str = "") -> GroupLane:
        """Hold or adopt ``lane``'s queues no consumer of the lane in the group serves (``None``: the default)."""
        return GroupLane.from_json(await self.request("PUT", f"/v1/groups/{group}/lanes/{lane}/orphan-policy",
                                                      json={"policy": policy, "reason": reason}, admin=True))

    async def set_lane_weight(self, group: str, lane: str, weight: int, reason: str = "") -> GroupLane:
        """The percent (0..100) of each topic's base queues the group's consumers of ``lane`` take (``gray``: the
        group's weight); ``ConflictError`` when the group's lanes' weights would add up to more than 100 %."""
        return GroupLane.from_json(await self.request("PUT", f"/v1/groups/{group}/lanes/{lane}/weight",
                                                      json={"weight": weight, "reason": reason}, admin=True))

    async def take_lane_slot(self, topic: str, lane: str) -> TopicLanes:
        """``lane`` takes a slot of the topic (idempotent); ``ConflictError`` with the one-line refusal when full.
        A producer of the topic may, as may an admin (sent with the client token, as reads are)."""
        return TopicLanes.from_json(await self.request("POST", f"/v1/topics/{topic}/lanes/{lane}"))

    async def free_lane_slot(self, topic: str, lane: str, reason: str = "") -> TopicLanes:
        """Give ``lane``'s slot of the topic back (idempotent); ``ConflictError`` while a client is in the lane."""
        return TopicLanes.from_json(await self.request("DELETE", f"/v1/topics/{topic}/lanes/{lane}", admin=True,
                                                       params={"reason": reason} if reason else None))


def _checked_token(token: str, variable: str) -> str:
    token = token.strip()
    if not token:
        raise ConfigError(f"{variable} is set but empty: set it to a token (or unset it in dev mode)")
    if not (token.isascii() and token.isprintable()):
        raise ConfigError(f"{variable} holds characters an HTTP header cannot carry (only printable ASCII is allowed)")
    return token


def http_error_text(exc: httpx.HTTPError) -> str:
    """An HTTP failure in one line: ``HTTP 403 FORBIDDEN: <the name server's detail>`` for an error answer (not
    httpx's text, which is two lines and points at a web page), the exception's first line otherwise."""
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code} {_error_text(exc.response)}"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _error_text(response: httpx.Response) -> str:
    """The name server's error body in one line: ``error: detail``, a validation failure as ``field: message``."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    return _body_text(body) if isinstance(body, dict) else str(body)


def _body_text(body: dict[str, Any]) -> str:
    """An error body (or a batch result's error) in one line: ``error: detail``."""
    error, detail = body.get("error", ""), body.get("detail")
    if isinstance(detail, list) and all(isinstance(d, dict) and "msg" in d for d in detail):
        detail = "; ".join(_field_error(d) for d in detail)
    return f"{error}: {detail}" if error and detail else str(error or detail or body)


def _field_error(error: dict[str, Any]) -> str:
    """One pydantic error as ``field: message``; the location's ``body``/``path``/``query`` part is left out."""
    loc = [str(part) for part in error.get("loc") or []]
    if loc and loc[0] in ("body", "path", "query", "header"):
        loc = loc[1:] or ["request body" if loc[0] == "body" else loc[0]]
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{'.'.join(loc)}: {message}" if loc else message


def _result(response: httpx.Response, method: str, path: str, variable: str) -> Any:
    status = response.status_code
    if status < 300:
        return response.json() if response.content else None
    detail = response.json().get("detail") if status == 409 and response.content else None
    raise status_error(status, f"{method} {path}", _error_text(response), detail, variable)


def _route_error(topic: str, result: dict[str, Any]) -> GrayMQError:
    """What ``get_route`` raises for a topic whose result in a batch is an error."""
    error = status_error(int(result.get("status_code") or 500), f"GET /v1/topics/{topic}/route",
                         _body_text(result), result.get("detail"))
    if isinstance(error, NotFoundError):
        return TopicNotExistError(f"no route for topic {topic}: {error.message}")
    return error


def status_error(status: int, call: str, text: str, detail: Any = None, variable: str = "GRAYMQ_TOKEN") -> GrayMQError:
    """The error of a name server's answer ``status`` (>= 400) to ``call`` (``METHOD PATH``), its body's ``text``."""
    if status == 401 or status == 403:
        error = UnauthorizedError if status == 401 else ForbiddenError
        return error(f"{call}: {text} (HTTP {status}; check {variable})")
    if status == 404:
        return NotFoundError(f"{call}: {text}")
    if status == 409:
        return ConflictError(f"{call}: {text}", detail)
    if status == 422:
        return BadRequestError(f"{call}: {text}")
    return BadRequestError(f"{call}: HTTP {status} {text}")
