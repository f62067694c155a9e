"""The gRPC server: ``apache.rocketmq.v2.MessagingService`` on grpc.aio, on the broker's event loop.

The table of RPCs is built from the service's descriptor, so every RPC of the vendored protocol answers: the
served ones authenticate the call (``credentials``) and run their concern's handler; every other one answers
``NOT_IMPLEMENTED`` in its response's status at once (a streaming one in its single response). A handler's
refusal (``RocketMQStatusError``) is answered the same way, with its code. A request larger than
``max_request_size`` is refused by gRPC itself (``RESOURCE_EXHAUSTED``) before it is read.

Requests are parsed here, before authentication: one that is not its method's protobuf is answered
``BAD_REQUEST``, counted (``malformed``) and logged once per peer address and window, without a traceback. Telemetry
streams and ReceiveMessage long polls are held in their principal's and their connection's budgets
(``budgets``). The port itself (``ConnectionLimits``) accepts at most ``max_connections`` connections (``front_door``:
the broker's own listener, piping each to the gRPC server on loopback, so one refused is counted and logged), and
gRPC closes one that has not finished its HTTP/2 handshake within ``handshake_timeout_s`` and one without a call for
``idle_timeout_s``: the broker port's limits.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import DecodeError, Message

from graymq.broker_ext.grpc_endpoint.ack import AckService
from graymq.broker_ext.grpc_endpoint.assignment import AssignmentService
from graymq.broker_ext.grpc_endpoint.budgets import Budget, Budgets
from graymq.broker_ext.grpc_endpoint.clients import ClientTable, first_command_heard
from graymq.broker_ext.grpc_endpoint.credentials import Caller, Credentials
from graymq.broker_ext.grpc_endpoint.front_door import INNER_HOST, FrontDoor
from graymq.broker_ext.grpc_endpoint.memory import MemoryTrim
from graymq.broker_ext.grpc_endpoint.receive import ReceiveService
from graymq.broker_ext.grpc_endpoint.route import RouteService
from graymq.broker_ext.grpc_endpoint.send import SendService
from graymq.broker_ext.grpc_endpoint.status import RocketMQStatusError, status
from graymq.protocol.retry import ThrottledLog
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s

log = logging.getLogger(__name__)

SERVICE = v2s.DESCRIPTOR.services_by_name["MessagingService"]
Unary = Callable[[Any, Caller], Awaitable[Message]]
M = TypeVar("M", bound=Message)


def _message_class(descriptor: Any) -> type[Message]:
    return getattr(v2s, descriptor.name)  # type: ignore[no-any-return]


def _metadata(context: grpc.aio.ServicerContext) -> dict[str, str]:
    return {key: value for key, value in context.invocation_metadata() or () if isinstance(value, str)}


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The port's connections: how many at once (the front door's), how soon one must finish its handshake, how long
    one may idle (gRPC's options)."""

    max_connections: int = 4096
    handshake_timeout_s: float = 5.0
    idle_timeout_s: float = 180.0

    def server_options(self) -> list[tuple[str, int]]:
        return [("grpc.server_handshake_timeout_ms", int(self.handshake_timeout_s * 1000)),
                ("grpc.max_connection_idle_ms", int(self.idle_timeout_s * 1000))]


class GrpcEndpoint:
    """``await start(host, port)`` → the bound port; ``await stop()``."""

    def __init__(self, credentials: Credentials, routes: RouteService, clients: ClientTable, sends: SendService,
                 *, max_request_size: int, budgets: Budgets, connections: ConnectionLimits = ConnectionLimits(),
                 malformed: Counter[str] | None = None, tls: tuple[bytes, bytes] | None = None,
                 refused_connection: Callable[[], None] = lambda: None) -> None:
        self.credentials = credentials
        self.routes = routes
        self.clients = clients
        self.max_request_size = max_request_size
        self.budgets = budgets
        self.connections = connections
        self.malformed: Counter[str] = Counter() if malformed is None else malformed  # method -> requests (a metric)
        self._tls = tls  # (private key, certificate chain), PEM: the port speaks TLS only
        self._refusals = ThrottledLog(log, 10.0)  # a misconfigured client retrying logs once per peer and window
        self.trim = MemoryTrim()  # after a wave of streams closed, their memory goes back to the system
        self.door = FrontDoor(connections.max_connections, refused_connection)
        self._unary: dict[str, Unary] = {
            "QueryRoute": routes.query_route,
            "Heartbeat": clients.heartbeat,
            "SendMessage": sends.send_message,
            "NotifyClientTermination": clients.terminate,
            "QueryAssignment": AssignmentService(routes, clients.consumers.queues).query_assignment,
        }
        self._server: grpc.aio.Server | None = None
        self._receives: ReceiveService | None = None

    def serve_pop(self, receives: ReceiveService, acks: AckService) -> None:
        """Serve pop consumption: ReceiveMessage, and the RPCs on what it delivered (call before ``start``)."""
        self._receives = receives
        self._unary.update(AckMessage=acks.ack_message, ChangeInvisibleDuration=acks.change_invisible_duration,
                           ForwardMessageToDeadLetterQueue=acks.forward_message_to_dead_letter_queue)

    async def start(self, host: str, port: int) -> int:
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", self.max_request_size),
                                          *self.connections.server_options()])
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            SERVICE.full_name, {method.name: self._handler(method) for method in SERVICE.methods}),))
        inner = f"{INNER_HOST}:0"  # reached through the front door only
        if self._tls is None:
            inner_port = server.add_insecure_port(inner)
        else:
            inner_port = server.add_secure_port(inner, grpc.ssl_server_credentials([self._tls]))
        await server.start()
        self._server = server
        bound = await self.door.start(host, port, inner_port)
        self.clients.sides.start()
        self.clients.consumers.start()
        if self._receives is not None:
            self._receives.renewals.start()
        return bound

    async def stop(self, grace_s: float = 1.0) -> None:
        self.trim.cancel()
        self.door.close()
        if self._server is not None:
            await self._server.stop(grace_s)  # its calls end, and with its connections their pipes
            self._server = None
        await self.door.stop()
        if self._receives is not None:
            await self._receives.renewals.stop()
            await self._receives.pop.close()
        await self.clients.sides.stop()
        await self.clients.consumers.stop()
        await self.routes.close()

    def _handler(self, method: MethodDescriptor) -> grpc.RpcMethodHandler:
        """Requests are read as bytes (no deserializer): ``_parsed`` parses them, so a malformed one is answered."""
        request_type, response_type = _message_class(method.input_type), _message_class(method.output_type)
        codec = {"response_serializer": response_type.SerializeToString}
        if method.name == "Telemetry":
            return grpc.stream_stream_rpc_method_handler(self._telemetry, **codec)
        if method.name == "ReceiveMessage" and self._receives is not None:
            return grpc.unary_stream_rpc_method_handler(self._receive, **codec)
        serve = self._unary.get(method.name)
        if serve is not None:
            return grpc.unary_unary_rpc_method_handler(self._unary_call(method.name, serve, request_type,
                                                                        response_type), **codec)
        answer = response_type(status=status(v2.NOT_IMPLEMENTED, f"{method.name} is not implemented by graymq's "
                                                                   "gRPC endpoint yet"))
        if method.server_streaming:
            async def not_implemented_stream(request: bytes, context: grpc.aio.ServicerContext
                                             ) -> AsyncIterator[Message]:
                yield answer
            return grpc.unary_stream_rpc_method_handler(not_implemented_stream, **codec)

        async def not_implemented(request: bytes, context: grpc.aio.ServicerContext) -> Message:
            return answer
        return grpc.unary_unary_rpc_method_handler(not_implemented, **codec)

    def _parsed(self, method: str, request_type: type[M], raw: bytes, peer: str) -> M:
        """``raw`` as ``request_type``; else counted, logged once per address and window, and ``BAD_REQUEST``."""
        try:
            return request_type.FromString(raw)
        except DecodeError as exc:
            self.malformed[method] += 1
            self._refusals.log(logging.WARNING, ("malformed", peer.rpartition(":")[0]),
                               "refused a malformed %s request from %s: %s (%d malformed requests so far)", method,
                               peer, exc, sum(self.malformed.values()))
            raise RocketMQStatusError(v2.BAD_REQUEST, f"the request is not a {request_type.__name__}: {exc}"
                                      ) from None

    def _unary_call(self, method: str, serve: Unary, request_type: type[Message], response_type: type[Message]
                    ) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[Message]]:
        async def call(raw: bytes, context: grpc.aio.ServicerContext) -> Message:
            peer = self.door.peer(context.peer())
            try:
                request = self._parsed(method, request_type, raw, peer)
                return await serve(request, await self.credentials.authenticate(_metadata(context), peer))
            except RocketMQStatusError as refused:
                if refused.code == v2.UNAUTHORIZED:
                    self._log_refusal(peer, refused)
                return response_type(status=refused.to_status())
        return call

    def _log_refusal(self, peer: str, refused: RocketMQStatusError) -> None:
        self._refusals.log(logging.WARNING, ("refused", peer.rpartition(":")[0]), "refused a gRPC call from %s: %s",
                           peer, refused.message)

    async def _commands(self, raw_commands: AsyncIterator[bytes], peer: str) -> AsyncIterator[v2s.TelemetryCommand]:
        async for raw in raw_commands:
            yield self._parsed("Telemetry", v2s.TelemetryCommand, raw, peer)

    async def _telemetry(self, raw_commands: AsyncIterator[bytes], context: grpc.aio.ServicerContext
                         ) -> AsyncIterator[v2s.TelemetryCommand]:
        """A refusal (credentials, budgets, a malformed command) is the stream's last response."""
        peer = self.door.peer(context.peer())
        try:
            caller = await self.credentials.authenticate(_metadata(context), peer)
        except RocketMQStatusError as refused:
            self._log_refusal(peer, refused)
            await first_command_heard(raw_commands)
            yield v2s.TelemetryCommand(status=refused.to_status())
            return
        claims = ((Budget.STREAMS_PER_PRINCIPAL, caller.principal.name), (Budget.STREAMS_PER_CONNECTION, peer))
        commands = self._commands(raw_commands, peer)
        try:
            with self.budgets.holding(*claims):
                async for command in self.clients.telemetry(commands, caller):
                    yield command
        except RocketMQStatusError as refused:
            if refused.code == v2.TOO_MANY_REQUESTS:  # refused before it read anything: its first command heard
                await first_command_heard(commands)
            yield v2s.TelemetryCommand(status=refused.to_status())
        finally:
            self.trim.released()

    async def _receive(self, raw: bytes, context: grpc.aio.ServicerContext
                       ) -> AsyncIterator[v2s.ReceiveMessageResponse]:
        """A refusal is the stream's only response, as for a unary call."""
        assert self._receives is not None
        peer = self.door.peer(context.peer())
        try:
            request = self._parsed("ReceiveMessage", v2s.ReceiveMessageRequest, raw, peer)
            caller = await self.credentials.authenticate(_metadata(context), peer)
            with self.budgets.holding((Budget.RECEIVES_PER_PRINCIPAL, caller.principal.name),
                                      (Budget.RECEIVES_PER_CONNECTION, peer)):
                async for response in self._receives.receive_message(request, caller, context.time_remaining()):
                    yield response
        except RocketMQStatusError as refused:
            if refused.code == v2.UNAUTHORIZED:
                self._log_refusal(peer, refused)
            yield v2s.ReceiveMessageResponse(status=refused.to_status())
