"""Run a broker until SIGTERM/SIGINT: load and recover the store, serve, register, then stop cleanly.

A fatal store failure (a failed fsync, store/fatal.py) stops it too: logged at ERROR, pending sends
failed, and ``serve`` raises it (the command exits non-zero) with the store's ``abort`` marker left.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
from collections.abc import Callable
from contextlib import suppress

from graymq.broker_ext import profiling
from graymq.broker_ext.broker_controller import BrokerController
from graymq.broker_ext.config import BrokerSettings
from graymq.broker_ext.metrics import MetricsServer
from graymq.broker_ext.nameserver_registry import NameServerRegistry
from graymq.broker_ext.remoting_server import RemotingServer
from graymq.broker_ext.replication.leader_lease import ReplicaLease
from graymq.broker_ext.security.principal_refresh import PrincipalRefresh
from graymq.broker_ext.store.fatal import StoreFatalError
from graymq.broker_ext.store.layout import written_cq_units_per_file, written_segment_size
from graymq.protocol.tls import server_context

log = logging.getLogger(__name__)


def with_store_layout(settings: BrokerSettings) -> BrokerSettings:
    """``settings`` with the segment and consume-queue file sizes of an existing store, which win over the
    configured ones (those apply to a new store); a difference is logged."""
    written = {"segment_size": written_segment_size(settings.store_dir),
               "cq_units_per_file": written_cq_units_per_file(settings.store_dir)}
    kept = {key: value for key, value in written.items() if value is not None and value != getattr(settings, key)}
    for key, value in kept.items():
        log.warning("store %s was written with %s=%d: keeping it (the configured %d applies to a new store)",
                    settings.store_dir, key, value, getattr(settings, key))
    return settings.model_copy(update=kept) if kept else settings


def refuse_taken_ports(settings: BrokerSettings) -> None:
    """Bind each configured port once and let it go, before the store loads: a port in use is then the only line
    the broker prints, not the last after the store's. Raises the bind's ``OSError``, naming the address as
    asyncio's own bind error does."""
    for port in (settings.port, settings.metrics_port, settings.grpc_port):
        if not port:
            continue
        with socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((settings.host, port))
            except OSError as exc:
                raise OSError(exc.errno, f"error while attempting to bind on address ('{settings.host}', {port}): "
                              f"{exc.strerror}") from exc


async def serve(settings: BrokerSettings, on_ready: Callable[[dict[str, str]], None]) -> None:
    settings.refuse_insecure()
    refuse_taken_ports(settings)
    settings = with_store_layout(settings)
    tls = server_context(settings.tls_cert, settings.tls_key) if settings.tls_cert and settings.tls_key else None
    broker = BrokerController(settings)
    broker.load()
    await broker.start()
    server = RemotingServer(broker)
    bound = await server.start(settings.host, settings.port, tls)
    broker.address = settings.advertised_address or bound
    metrics: MetricsServer | None = None
    info = {"kind": "broker", "name": broker.name, "address": broker.address}
    if settings.metrics_port is not None:
        metrics = MetricsServer(broker)
        info["metrics"] = await metrics.start(settings.host, settings.metrics_port)
    grpc_endpoint = None
    if settings.grpc_port is not None:
        from graymq.broker_ext.grpc_endpoint.wiring import start_grpc_endpoint  # grpcio: only when asked for

        grpc_endpoint, info["grpc"] = await start_grpc_endpoint(broker, settings, settings.grpc_port)
    registry, lease = await _start_nameserver_links(settings, broker, info.get("grpc"))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    profiling.install(loop)
    _log_serving(settings, broker, tls is not None, registry.refusal if registry is not None else None)
    # What start-up built (modules, protobuf descriptors, recovered tables) lives until exit: out of the
    # collector's sight, a full collection scans only what serving creates (a 10-25 ms pause otherwise).
    gc.collect()
    gc.freeze()
    on_ready(info)
    fatal = await _wait_stop_or_fatal(stop, broker)
    if fatal is not None:
        log.error("broker %s stopping: %s", broker.name, fatal.message)
    else:
        log.info("broker %s stopping", broker.name)
    try:
        if lease is not None:
            await lease.stop()
        if registry is not None:
            await broker.access.stop()
            await registry.stop()
        if grpc_endpoint is not None:
            await grpc_endpoint.stop()
        await server.stop()
        if metrics is not None:
            await metrics.stop()
    finally:
        await broker.stop()
    if fatal is not None:
        raise fatal
    log.info("broker %s stopped cleanly", broker.name)


async def _start_nameserver_links(settings: BrokerSettings, broker: BrokerController, grpc_address: str | None
                                  ) -> tuple[NameServerRegistry | None, ReplicaLease | None]:
    """Register with the name servers (principals refreshed from them; the gRPC endpoint's address, if any, listed
    in the routes) and, in a broker set, take part in its leader lease; neither without a name server."""
    registry: NameServerRegistry | None = None
    lease: ReplicaLease | None = None
    if settings.nameserver_urls:
        registry = NameServerRegistry(broker, settings.nameserver_urls, settings.register_interval_s, grpc_address)
        await registry.register_once()
        registry.start()
        broker.access.refresh = PrincipalRefresh(registry.read_principals)
    if settings.replication is not None:
        lease = ReplicaLease(broker, settings.nameserver_urls,
                             on_lead=registry.register_soon if registry is not None else lambda: None)
        lease.start()
    return registry, lease


def _log_serving(settings: BrokerSettings, broker: BrokerController, over_tls: bool, refusal: str | None) -> None:
    """The start-up line: serving on its address, or (every name server refused its registration: ``refusal``)
    listening there but in no route, so no client finds it until the registration is fixed."""
    if settings.dev_mode:
        log.warning("broker %s runs in dev mode: authentication is off, every connection has every right",
                    broker.name)
    replica = f", replica {settings.replica_id}, {settings.replication} replication" if settings.replication else ""
    details = (f"{' over TLS' if over_tls else ''} (store {settings.store_dir}, flush {settings.flush}, segments of "
               f"{settings.segment_size} bytes{replica})")
    if refusal is not None:
        log.error("broker %s listening on %s%s but not serving any route: no name server registered it (the refusal "
                  "above); it keeps trying every %s s", broker.name, broker.address, details,
                  settings.register_interval_s)
        return
    log.info("broker %s serving on %s%s", broker.name, broker.address, details)


async def _wait_stop_or_fatal(stop: asyncio.Event, broker: BrokerController) -> StoreFatalError | None:
    """Wait for the stop signal or a fatal store failure; the failure, if that came first."""
    stopping = asyncio.ensure_future(stop.wait())
    failing = asyncio.ensure_future(broker.store.fatal.wait())
    await asyncio.wait((stopping, failing), return_when=asyncio.FIRST_COMPLETED)
    for task in (stopping, failing):
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
    return broker.store.fatal.error
