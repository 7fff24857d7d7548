"""A worker's registration with its coordinator: a signed heartbeat every interval.

The worker itself is an ordinary server (it verifies tickets with the shared secret and opens
tables from the shared catalog database, as ``do_get`` always does); this loop only tells the
coordinator that it is alive and where it can be reached (``advertise``). A missed heartbeat is
logged and retried at the next tick: a coordinator restart needs nothing from the worker.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

import pyarrow.flight as flight

from flight_server.protocol.wire import CLUSTER_HEARTBEAT
from flight_server.server.cluster.membership import HEARTBEAT_PURPOSE, check_uri, heartbeat_token
from flight_server.server.config import ServerConfig
from flight_server.server.security.auth import TokenIssuer
from flight_server.server.security.tickets import TicketSigner
from flight_server.server.security.users import CLUSTER_MEMBER

log = logging.getLogger(__name__)
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")  # listening on every address


def advertised_uri(config: ServerConfig, port: int) -> str:
    """Where clients reach this server: ``advertise``, else its host (the machine's name when it
    listens on every address) and bound ``port``."""
    if config.cluster.advertise:
        return check_uri(config.cluster.advertise, "advertise")
    host = socket.gethostname() if config.host in WILDCARD_HOSTS else config.host
    return f"grpc+tcp://{host}:{port}"


class Registration:
    """Sends heartbeats of ``advertise`` to ``coordinator`` on a daemon thread.

    Args:
        config: the worker's settings (coordinator, heartbeat interval and timeout, tokens).
        advertise: this worker's URI as clients must dial it.
        signer: the ticket signer of the cluster secret (its heartbeat key is derived from it).
        **client_kwargs: passed to the :class:`pyarrow.flight.FlightClient` of the coordinator
            (e.g. TLS roots).
    """

    def __init__(self, config: ServerConfig, advertise: str, signer: TicketSigner, **client_kwargs: Any):
        if not config.cluster.coordinator:
            raise ValueError("a worker needs --coordinator URI")
        self.coordinator = check_uri(config.cluster.coordinator, "coordinator")
        self.advertise = advertise
        self.interval = config.cluster.heartbeat_interval_seconds
        self.ttl = config.cluster.heartbeat_timeout_seconds
        self.signer = signer.derived(HEARTBEAT_PURPOSE)
        # Heartbeats pass the coordinator's authentication with a token of the shared secret
        # naming the cluster member (no rights beyond the heartbeat itself).
        member = TokenIssuer(signer, config.token_ttl_seconds).issue(CLUSTER_MEMBER)
        headers = [(b"authorization", f"Bearer {member}".encode())]
        self._options = flight.FlightCallOptions(timeout=max(self.interval, 1.0), headers=headers)
        self._client_kwargs = client_kwargs
        self._client: flight.FlightClient | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self, leave: bool = False) -> bool:
        """Send one heartbeat; ``True`` when the coordinator accepted it."""
        token = heartbeat_token(self.signer, self.advertise, self.ttl, leave)
        action = flight.Action(CLUSTER_HEARTBEAT, f'{{"token":"{token}"}}'.encode())
        try:
            if self._client is None:
                self._client = flight.FlightClient(self.coordinator, **self._client_kwargs)
            list(self._client.do_action(action, self._options))
            return True
        except (flight.FlightError, OSError) as err:
            log.warning("heartbeat to coordinator %s failed: %s", self.coordinator, str(err).splitlines()[0])
            return False

    def _run(self) -> None:
        while True:
            self.beat()
            if self._stop.wait(self.interval):
                return

    def start(self) -> "Registration":
        self._thread = threading.Thread(target=self._run, name="hudi-flight-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the heartbeats and tell the coordinator this worker leaves (best effort)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.interval + 2)
        self.beat(leave=True)
        if self._client is not None:
            self._client.close()


__all__ = ["WILDCARD_HOSTS", "Registration", "advertised_uri"]
