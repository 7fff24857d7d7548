"""Running a server until interrupted: one process, N processes on one port (``--processes N``),
as a cluster coordinator or as a worker registering with one (``--role``)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from flight_server.protocol.wire import TCP_SCHEME
from flight_server.server.cluster.membership import ROLES, check_uri
from flight_server.server.cluster.worker import Registration, advertised_uri
from flight_server.server.config import ServerConfig
from flight_server.server.ops.live import LIVE_DIR_ENV, prepare_folder
from flight_server.server.ops.logs import configure_logging
from flight_server.server.ops.metrics import prepare_dir
from flight_server.server.registry import Registry
from flight_server.server.security.tickets import TicketSigner, configured_signer

if TYPE_CHECKING:
    from flight_server.server.app import App


class Serving(Protocol):
    """What a start-up callback can see of a running server (one process or a supervisor)."""

    port: int
    registry: Registry | None


@dataclasses.dataclass
class Fronted:
    """A single serving process behind the relay: its public port, its catalog, its parts."""

    port: int
    registry: Registry | None
    app: "App"


PLACEHOLDER = "REPLACE"


def check_placeholders(config: ServerConfig) -> None:
    """Refuse to start with a deploy example's placeholder (a value starting with ``REPLACE``)
    still in place: a token or URL nobody chose must fail loudly, not serve."""
    for name, value in config.settings():
        if isinstance(value, dict):  # e.g. tokens: a placeholder may be the token or the user
            value = [*value.keys(), *value.values()]
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and v.startswith(PLACEHOLDER) for v in values):
            raise ValueError(f"configuration key {name} still holds a {PLACEHOLDER}... placeholder; set it")


def check_topology(config: ServerConfig) -> None:
    """Refuse an inconsistent role, coordinator or processes setting (a clear message, at start)."""
    cluster = config.cluster
    if cluster.role is not None and cluster.role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, got {cluster.role!r}")
    if cluster.role == "worker":
        if not cluster.coordinator:
            raise ValueError("--role worker needs --coordinator URI")
        check_uri(cluster.coordinator, "coordinator")
    elif cluster.coordinator:
        raise ValueError("--coordinator is only for --role worker")
    if cluster.advertise:
        check_uri(cluster.advertise, "advertise")
    if cluster.processes < 1:
        raise ValueError("processes must be at least 1")
    if cluster.process_ports and len(cluster.process_ports) != cluster.processes:
        raise ValueError(f"process_ports names {len(cluster.process_ports)} ports for {cluster.processes} processes")
    interval = cluster.heartbeat_interval_seconds
    if interval <= 0 or cluster.heartbeat_timeout_seconds <= interval:
        raise ValueError("heartbeat_timeout_seconds must exceed heartbeat_interval_seconds (> 0)")


def _register(config: ServerConfig, port: int, signer: TicketSigner) -> Registration:
    """Start a worker's heartbeats to its coordinator, advertising ``port``."""
    tls: dict[str, Any] = {}
    if config.cluster.coordinator_tls_root_certs:
        tls["tls_root_certs"] = Path(config.cluster.coordinator_tls_root_certs).read_bytes()
    return Registration(config, advertised_uri(config, port), signer, **tls).start()


def serve(config: ServerConfig, ready: Callable[[Serving], None] | None = None) -> None:
    """Run a server until interrupted (KeyboardInterrupt; the CLI turns SIGTERM into one).

    One process or many, the public port belongs to a relay (``runtime.relay``) that ends TLS
    and bounds every request's gRPC messages before they reach gRPC; the serving process
    listens in cleartext on loopback behind it.

    Workers do not scan warehouses (the coordinator keeps the shared catalog); they register
    with the coordinator once listening and tell it when they leave.
    """
    check_placeholders(config)
    check_topology(config)
    configure_logging(config.ops.log_format)
    if config.ops.metrics_port is not None:  # before any child starts: they share the directory
        prepare_dir(config.state_path)
    if config.ops.console_port is not None and config.cluster.processes > 1:  # each process publishes its calls there
        os.environ.setdefault(LIVE_DIR_ENV, str(prepare_folder(config.state_path)))
    discover = config.cluster.role != "worker"
    registration: Registration | None = None
    if config.cluster.processes > 1:
        from flight_server.server.runtime.supervisor import Supervisor

        supervisor = Supervisor(config, discover=discover)
        try:
            supervisor.start()
            if config.cluster.role == "worker":
                signer = configured_signer(config.secret, config.resolved_secret_file, config.ticket_ttl_seconds)
                registration = _register(config, supervisor.port, signer)
            if ready is not None:
                ready(supervisor)
            supervisor.run()
        finally:
            if registration is not None:
                registration.stop()
            supervisor.close()
        return

    from flight_server.server.app import compose
    from flight_server.server.runtime.relay import Relay
    from flight_server.server.service import HudiFlightServer

    # the relay owns the public port even for one process: it is the only place a request's
    # gRPC messages can be bounded before gRPC buffers them (runtime.h2_guard)
    tls = config.tls.files()
    try:
        relay = Relay(config.host, config.port, config.relay_limits(), tls=tls.ssl_context() if tls else None)
    except OSError as err:
        raise OSError(f"cannot listen on {config.location} (address in use?)") from err
    try:
        config = config.updated({"port": relay.port})  # what the process names as its address
        app = compose(config, discover=discover)
        server = HudiFlightServer(location=f"{TCP_SCHEME}://127.0.0.1:0", app=app, tls_in_front=True)
    except BaseException:
        relay.close()
        raise
    fronted = Fronted(relay.port, app.registry, app)
    try:
        relay.set_backend(0, server.port)
        relay.start()
        if config.cluster.role == "worker":
            registration = _register(config, relay.port, app.signer)
        if ready is not None:
            ready(fronted)
        server.serve()
    finally:
        app.ops.stopping()  # health checks answer NOT_SERVING while the server stops
        if registration is not None:
            registration.stop()
        relay.close()
        server.shutdown()
        app.close()


__all__ = ["Fronted", "Serving", "check_placeholders", "check_topology", "serve"]
