"""Running a server until interrupted: one process, N processes on one port (``--processes N``),
as a cluster coordinator or as a worker registering with one (``--role``)."""

from __future__ import annotations

from typing import Callable, Protocol

from flight_server.server.cluster import ROLES, check_uri
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.tickets import configured_signer
from flight_server.server.worker import Registration, advertised_uri


class Serving(Protocol):
    """What a start-up callback can see of a running server (one process or a supervisor)."""

    port: int
    registry: Registry | None


def check_topology(config: ServerConfig) -> None:
    """Refuse an inconsistent role, coordinator or processes setting (a clear message, at start)."""
    if config.role is not None and config.role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, got {config.role!r}")
    if config.role == "worker":
        if not config.coordinator:
            raise ValueError("--role worker needs --coordinator URI")
        check_uri(config.coordinator, "coordinator")
    elif config.coordinator:
        raise ValueError("--coordinator is only for --role worker")
    if config.advertise:
        check_uri(config.advertise, "advertise")
    if config.processes < 1:
        raise ValueError("processes must be at least 1")
    if config.heartbeat_interval_seconds <= 0 or config.heartbeat_timeout_seconds <= config.heartbeat_interval_seconds:
        raise ValueError("heartbeat_timeout_seconds must exceed heartbeat_interval_seconds (> 0)")


def serve(config: ServerConfig, ready: Callable[[Serving], None] | None = None) -> None:
    """Run a server until interrupted (KeyboardInterrupt; the CLI turns SIGTERM into one).

    Workers do not scan warehouses (the coordinator keeps the shared catalog); they register
    with the coordinator once listening and tell it when they leave.
    """
    check_topology(config)
    discover = config.role != "worker"
    registration: Registration | None = None
    if config.processes > 1:
        from flight_server.server.supervisor import Supervisor

        supervisor = Supervisor(config, discover=discover)
        try:
            supervisor.start()
            if config.role == "worker":
                signer = configured_signer(config.secret, config.resolved_secret_file, config.ticket_ttl_seconds)
                registration = Registration(config, advertised_uri(config, supervisor.port), signer).start()
            if ready is not None:
                ready(supervisor)
            supervisor.run()
        finally:
            if registration is not None:
                registration.stop()
            supervisor.close()
        return

    from flight_server.server.service import HudiFlightServer

    server = HudiFlightServer(config, discover=discover)
    try:
        if config.role == "worker":
            registration = Registration(config, advertised_uri(config, server.port), server.signer).start()
        if ready is not None:
            ready(server)
        server.serve()
    finally:
        if registration is not None:
            registration.stop()
        server.shutdown()


__all__ = ["Serving", "check_topology", "serve"]
