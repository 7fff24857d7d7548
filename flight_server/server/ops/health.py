"""gRPC health checking (``grpc.health.v1.Health``) on its own port, for Kubernetes probes.

The Flight service answers on its own port through pyarrow; the health service is a small
separate gRPC server (grpcio-health-checking) that reports SERVING once the server has loaded
its catalog and NOT_SERVING from the moment it shuts down. Both the overall status (service
``""``) and the Flight service's name are reported.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from flight_server.server.security.tls import TlsFiles

FLIGHT_SERVICE = "arrow.flight.protocol.FlightService"


class HealthServer:
    """A gRPC health service listening on ``host:port`` (``port`` 0: any free port), over TLS
    with the server's certificate when ``tls`` is given."""

    def __init__(self, host: str, port: int, tls: TlsFiles | None = None):
        self._servicer = health.HealthServicer()
        self._server = grpc.server(ThreadPoolExecutor(max_workers=2, thread_name_prefix="hudi-health"))
        health_pb2_grpc.add_HealthServicer_to_server(self._servicer, self._server)
        if tls is None:
            self.port = self._server.add_insecure_port(f"{host}:{port}")
        else:
            pair = tls.server_kwargs()["tls_certificates"][0]
            credentials = grpc.ssl_server_credentials([(pair.key, pair.cert)])
            self.port = self._server.add_secure_port(f"{host}:{port}", credentials)
        if not self.port:
            raise OSError(f"cannot listen on {host}:{port} for health checks (address in use?)")
        self._set(health_pb2.HealthCheckResponse.NOT_SERVING)
        self._server.start()

    def _set(self, status: int) -> None:
        for service in ("", FLIGHT_SERVICE):
            self._servicer.set(service, status)

    def serving(self) -> None:
        self._set(health_pb2.HealthCheckResponse.SERVING)

    def not_serving(self) -> None:
        """NOT_SERVING from now on (probes see it while the Flight server drains its calls)."""
        self._servicer.enter_graceful_shutdown()

    def stop(self) -> None:
        self.not_serving()
        self._server.stop(grace=1.0).wait(2.0)


__all__ = ["FLIGHT_SERVICE", "HealthServer"]
