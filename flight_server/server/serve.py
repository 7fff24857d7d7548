"""Running a server until interrupted, optionally as several processes (``serve --processes N``)."""

from __future__ import annotations

import multiprocessing
from typing import Callable

from flight_server.server.call_log import configure_logging
from flight_server.server.config import ServerConfig
from flight_server.server.metrics import prepare_dir
from flight_server.server.service import HudiFlightServer


def _serve_data(config: ServerConfig) -> None:
    """Body of an extra data-serving process."""
    configure_logging(config.log_format)
    HudiFlightServer(config).serve()


def serve(config: ServerConfig, ready: Callable[[HudiFlightServer], None] | None = None) -> None:
    """Run a server until interrupted.

    With ``processes > 1`` the extra processes listen on the following ports and share the
    catalog and the ticket secret; the endpoints the main server plans name all of them (least
    loaded first, by split weight), so clients spread ``do_get`` over the processes.
    """
    configure_logging(config.log_format)
    if config.metrics_port is not None:  # before any child starts: they inherit the directory
        prepare_dir(config.state_path)
    extra: list[ServerConfig] = []
    if config.processes > 1:
        if config.port == 0:
            raise ValueError("--processes needs an explicit --port (the others use the following ports)")
        extra = [
            config.updated({"port": config.port + i, "warehouses": [], "locations": [], "processes": 1})
            .without_operation_ports()
            for i in range(1, config.processes)
        ]
        config = config.updated({"locations": config.locations or [config.location] + [c.location for c in extra]})
    server = HudiFlightServer(config)  # creates the catalog and the secret before the others start
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_serve_data, args=(c,), daemon=True) for c in extra]
    for proc in workers:
        proc.start()
    if ready is not None:
        ready(server)
    try:
        server.serve()
    finally:
        server.ops.stopping()  # health checks answer NOT_SERVING while the processes stop
        for proc in workers:
            proc.terminate()
        server.ops.close()


__all__ = ["serve"]
