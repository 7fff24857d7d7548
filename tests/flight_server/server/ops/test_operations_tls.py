"""Metrics and health of a TLS server are served over TLS (issue 20: they were plaintext even on a
TLS server), can opt out, and can listen on an address of their own."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from flight_server.server.config import ServerConfig
from tests.support.certs import make_pki
from tests.support.servers import free_port, running_server


def _check(channel: grpc.Channel) -> int:
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status


@pytest.fixture()
def pki(tmp_path):
    return make_pki(tmp_path / "pki")


def test_metrics_and_health_follow_the_servers_tls(tmp_path, pki):
    metrics, health = free_port(), free_port()
    config = ServerConfig(port=0, state_dir=str(tmp_path / "s"), tls_cert=str(pki.server_cert),
                          tls_key=str(pki.server_key), metrics_port=metrics, health_port=health)
    with running_server(config):
        context = ssl.create_default_context(cafile=str(pki.ca_cert))
        with urllib.request.urlopen(f"https://127.0.0.1:{metrics}/metrics", timeout=10, context=context) as resp:
            assert resp.status == 200
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5).read()
        credentials = grpc.ssl_channel_credentials(pki.ca_cert.read_bytes())
        serving = health_pb2.HealthCheckResponse.SERVING
        assert _check(grpc.secure_channel(f"127.0.0.1:{health}", credentials)) == serving
        with pytest.raises(grpc.RpcError):
            _check(grpc.insecure_channel(f"127.0.0.1:{health}"))


def test_plaintext_opt_out_and_own_address(tmp_path, pki):
    """Tests listen on 127.0.0.1 only, so "an address of its own" is shown twice over: the health
    service answers at the name it was given, and an address this machine does not have (a
    documentation address, RFC 5737) fails its start, where the server's own host would not."""
    metrics, health = free_port(), free_port()
    tls = {"tls_cert": str(pki.server_cert), "tls_key": str(pki.server_key)}
    config = ServerConfig(port=0, state_dir=str(tmp_path / "s"), metrics_port=metrics, health_port=health,
                          health_tls=False, metrics_tls=False, health_host="localhost", **tls)
    with running_server(config):
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10) as resp:
            assert resp.status == 200
        assert _check(grpc.insecure_channel(f"localhost:{health}")) == health_pb2.HealthCheckResponse.SERVING
    elsewhere = ServerConfig(port=0, state_dir=str(tmp_path / "s2"), health_port=free_port(), health_tls=False,
                             health_host="192.0.2.1", **tls)
    with pytest.raises((OSError, RuntimeError), match="192.0.2.1"):  # grpcio raises, or returns port 0
        with running_server(elsewhere):
            pass


def test_tls_for_operations_needs_the_servers_certificate(tmp_path):
    with pytest.raises(ValueError, match="metrics_tls needs tls_cert"):
        ServerConfig(metrics_tls=True).operations_tls("metrics")
