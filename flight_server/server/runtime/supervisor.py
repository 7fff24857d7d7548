"""``serve --processes N``: N serving processes behind one port, supervised.

Every process is a whole server (plans, answers catalog calls, streams): they share the catalog
database, the ticket secret and the state directory (hence the on-disk caches), so a ticket one
planned is served by any other. The supervisor (this process) owns the public port
(:class:`~flight_server.server.runtime.relay.Relay`), starts process 0 first (it creates the state files
and scans the warehouses, and keeps the re-scan timer), then the others; a process that dies is
started again (with a growing delay if it keeps dying at start-up) and connections go to the
others meanwhile. :meth:`Supervisor.close` (SIGTERM, Ctrl-C) stops them all.

The relay copies every byte it carries, so a scan's bulk does not go through it when the clients
can reach the processes themselves (:func:`process_host`): each process then listens on a port of
its own next to the public one, the supervisor tells every process the live processes' locations
(over its pipe, again whenever one restarts), and endpoints name the process that streams them
(:meth:`~flight_server.server.query.placement.Placement.serve_from`), as a coordinator names its
workers. Tickets, bearer tokens and TLS certificates are the same on every port (one secret, one
configuration); a client that cannot reach a process's port reads the endpoint through the public
port instead (the next location).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
import time
from multiprocessing.connection import Connection, wait
from typing import Any
from urllib.parse import urlsplit

from flight_server.protocol.wire import TCP_SCHEME
from flight_server.server.cluster.membership import check_uri
from flight_server.server.cluster.worker import WILDCARD_HOSTS
from flight_server.server.config import ServerConfig
from flight_server.server.query.placement import Placement
from flight_server.server.registry import Registry
from flight_server.server.runtime.relay import Relay

log = logging.getLogger(__name__)
START_SECONDS = 120.0  # a serving process must be listening this soon after it was started
QUICK_DEATH_SECONDS = 5.0  # dying sooner than this after start-up doubles the restart delay
MAX_RESTART_DELAY = 10.0


def _bracketed(host: str) -> str:
    """``host`` as a URI spells it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def process_host(config: ServerConfig) -> str | None:
    """The host clients reach the serving processes' own ports at: ``advertise``'s host, else
    the listening host; ``None`` (every byte through the relay) when ``process_endpoints`` is
    off or the server listens on every address with nothing advertised (no name to give)."""
    if not config.cluster.process_endpoints:
        return None
    if config.cluster.advertise:
        return urlsplit(check_uri(config.cluster.advertise, "advertise")).netloc.rsplit(":", 1)[0]
    return None if config.host in WILDCARD_HOSTS else _bracketed(config.host)


def _follow_parent(conn: Connection, placement: Placement) -> None:
    """Name the processes the supervisor sends in endpoints; when it closes its end of ``conn``
    (or dies), leave at once."""
    try:
        while True:
            placement.serve_from(conn.recv())
    except (EOFError, OSError):
        pass
    os._exit(0)


def _serve_child(config: ServerConfig, discover: bool, conn: Connection, listen: str, tls_in_front: bool) -> None:
    """Body of one serving process: listen at ``listen`` (in cleartext when the relay ends TLS:
    ``tls_in_front``), report the bound port, serve."""
    from flight_server.server.app import compose
    from flight_server.server.ops.logs import configure_logging
    from flight_server.server.service import HudiFlightServer

    configure_logging(config.ops.log_format)
    app = compose(config, discover=discover)
    server = HudiFlightServer(location=listen, app=app, tls_in_front=tls_in_front)
    conn.send(server.port)
    threading.Thread(target=_follow_parent, args=(conn, app.queries.placement), name="hudi-flight-parent",
                     daemon=True).start()
    server.serve()


class _Child:
    def __init__(self, process: Any, conn: Connection, started: float):
        self.process = process
        self.conn = conn
        self.started = started


class Supervisor:
    """Runs ``config.processes`` serving processes on ``config.host:config.port``.

    Attributes:
        port: the public port (the bound one when ``config.port`` is 0).
        registry: the shared catalog (for the start-up message).
    """

    def __init__(self, config: ServerConfig, discover: bool = True):
        if config.cluster.processes < 2:
            raise ValueError("a supervisor runs two or more serving processes")
        self._host = process_host(config)
        # the processes listen beside the public port when endpoints name them, else on loopback
        self._listen_host = "127.0.0.1" if self._host is None or config.host in WILDCARD_HOSTS else config.host
        # the relay ends TLS unless clients also reach the processes' own ports (those serve TLS)
        tls = config.tls.files() if self._host is None else None
        self._tls_in_front = tls is not None
        self.relay = Relay(config.host, config.port, config.relay_limits(), backend_host=self._listen_host.strip("[]"),
                           tls=tls.ssl_context() if tls else None)
        self.port = self.relay.port
        # every process reports the public address; only process 0 scans the warehouses
        self._config = config.updated({"port": self.port, "processes": 1})
        self._count = config.cluster.processes
        self._discover = discover
        self._ctx = multiprocessing.get_context("spawn")
        self._children: dict[int, _Child] = {}
        self._ports: dict[int, int] = {}  # slot -> own port of its live process
        self._scheme = config.location.split("://", 1)[0]
        self._delay: dict[int, float] = {}
        self._stop = threading.Event()
        self.registry: Registry | None = None

    # -- processes -------------------------------------------------------------------------
    def _config_for(self, slot: int) -> ServerConfig:
        """Settings of serving process ``slot``: the same for all but for what one process owns
        on behalf of the machine (process 0 scans the warehouses; ports of per-machine services,
        such as health or metrics, belong there too)."""
        return self._config if slot == 0 else self._config.without_operation_ports()

    def _listen_at(self, slot: int) -> str:
        """Where process ``slot`` listens: on the public port's address when endpoints name it,
        else on loopback (reached through the relay only)."""
        host = (self._config.host or "0.0.0.0") if self._host is not None else self._listen_host
        port = self._config.cluster.process_ports[slot] if self._config.cluster.process_ports else 0
        return f"{TCP_SCHEME if self._tls_in_front else self._scheme}://{_bracketed(host)}:{port}"

    def locations(self) -> list[str]:
        """The locations endpoints name: the own ports of the live processes (empty: the relay)."""
        if self._host is None:
            return []
        return [f"{self._scheme}://{self._host}:{port}" for _, port in sorted(self._ports.items())]

    def _announce(self) -> None:
        """Tell every live process where the live processes are."""
        locations = self.locations()
        for slot in self._ports:
            with contextlib.suppress(OSError):  # dead meanwhile: its restart announces again
                self._children[slot].conn.send(locations)

    def _spawn(self, slot: int) -> _Child:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(
            target=_serve_child,
            args=(self._config_for(slot), self._discover and slot == 0, child, self._listen_at(slot),
                  self._tls_in_front),
            name=f"hudi-flight-{slot}",
            daemon=True,
        )
        process.start()
        child.close()
        return _Child(process, parent, time.monotonic())

    def _await_ready(self, slot: int, child: _Child) -> None:
        """Wait for ``child`` to report its private port, then route connections to it."""
        deadline = time.monotonic() + START_SECONDS
        while not child.conn.poll(0):
            if not child.process.is_alive():
                code = child.process.exitcode
                raise RuntimeError(f"serving process {slot} exited during start-up (exit code {code})")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"serving process {slot} did not start within {START_SECONDS:.0f} s")
            wait([child.conn, child.process.sentinel], min(remaining, 1.0))
        port = child.conn.recv()
        self._ports[slot] = port
        self.relay.set_backend(slot, port)

    def start(self) -> "Supervisor":
        """Start every serving process (process 0 first) and the relay; returns once all listen."""
        try:
            self._children[0] = self._spawn(0)
            self._await_ready(0, self._children[0])
            for slot in range(1, self._count):
                self._children[slot] = self._spawn(slot)
            for slot in range(1, self._count):
                self._await_ready(slot, self._children[slot])
            self._announce()
        except BaseException:
            self.close()
            raise
        self.registry = Registry(self._config.resolved_catalog_url)
        self.relay.start()
        return self

    def pids(self) -> list[int]:
        """Process ids of the serving processes, by slot."""
        return [c.process.pid for _, c in sorted(self._children.items())]

    def _restart(self, slot: int) -> None:
        old = self._children[slot]
        self.relay.set_backend(slot, None)
        self._ports.pop(slot, None)
        self._announce()
        old.conn.close()
        quick = time.monotonic() - old.started < QUICK_DEATH_SECONDS
        delay = min(MAX_RESTART_DELAY, max(0.5, 2 * self._delay.get(slot, 0.25))) if quick else 0.0
        self._delay[slot] = delay
        log.warning("serving process %d (pid %s) exited with %s; restarting in %.1f s",
                    slot, old.process.pid, old.process.exitcode, delay)
        if self._stop.wait(delay):
            return
        child = self._children[slot] = self._spawn(slot)
        try:
            self._await_ready(slot, child)
        except RuntimeError as err:  # dies again: the next turn of run() sees its sentinel
            log.error("%s", err)
            return
        self._announce()

    def run(self) -> None:
        """Supervise until :meth:`close` (or an exception such as KeyboardInterrupt)."""
        while not self._stop.is_set():
            sentinels = {c.process.sentinel: slot for slot, c in self._children.items()}
            for sentinel in wait(list(sentinels), timeout=1.0):
                if not self._stop.is_set():
                    self._restart(sentinels[sentinel])  # type: ignore[index]

    def close(self) -> None:
        """Stop accepting, stop every serving process (SIGTERM, then SIGKILL after 5 s)."""
        self._stop.set()
        self.relay.close()
        for child in self._children.values():
            if child.process.is_alive():
                child.process.terminate()
        deadline = time.monotonic() + 5
        for child in self._children.values():
            child.process.join(max(0.0, deadline - time.monotonic()))
            if child.process.is_alive():
                child.process.kill()
                child.process.join(5)
            child.conn.close()
        if self.registry is not None:
            self.registry.close()


__all__ = ["Supervisor", "process_host"]
