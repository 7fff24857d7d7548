"""TLS and mutual TLS of the server (docs/flight.md, "TLS and mutual TLS"), with certificates made in the test
(tests/support/certs.py): reads over TLS equal HudiTable.read; plaintext clients, untrusted
servers and (with mTLS) clients without the right certificate are refused; bad certificate
files stop the server at startup with a message naming the option."""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

import pyarrow.flight as flight
import pytest

from catalog import HudiTable
from flight_server.cli.main import main
from flight_server.client.session import HudiFlightClient
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.service import HudiFlightServer
from tests.support.compare import rows
from tests.support.processes import ServeProcess
from tests.support.servers import free_port, running_server

TABLE = "sample_table/cow/v9_txns_simple_meta"
IDENT = "sample_table_cow.v9_txns_simple_meta"
REPO = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def registry(fixture_table) -> Registry:
    """A catalog of the one table these tests read."""
    reg = Registry("sqlite://")
    reg.register_table(IDENT, fixture_table(TABLE))
    return reg


def _config(tmp_path_factory, **tls) -> ServerConfig:
    return ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("state")), **tls)


@pytest.fixture(scope="module")
def tls_server(registry, pki, tmp_path_factory):
    ca, _ = pki
    config = _config(tmp_path_factory, tls_cert=str(ca.server_cert), tls_key=str(ca.server_key))
    with running_server(config, registry=registry) as server:
        yield server


@pytest.fixture(scope="module")
def mtls_server(registry, pki, tmp_path_factory):
    ca, _ = pki
    config = _config(tmp_path_factory, tls_cert=str(ca.server_cert), tls_key=str(ca.server_key),
                     tls_client_ca=str(ca.ca_cert))
    with running_server(config, registry=registry) as server:
        yield server


def _expected(fixture_table) -> list:
    return rows(HudiTable.open(fixture_table(TABLE)).read())


def test_tls_read_equals_library(tls_server, pki, fixture_table):
    ca, _ = pki
    assert tls_server.app.config.location.startswith("grpc+tls://")
    with HudiFlightClient(f"grpc+tls://127.0.0.1:{tls_server.port}", tls_root_certs=str(ca.ca_cert)) as client:
        got = client.read(IDENT)
    assert rows(got) == _expected(fixture_table)


def test_tls_root_cert_as_bytes_and_localhost_name(tls_server, pki):
    ca, _ = pki
    with HudiFlightClient(f"grpc+tls://localhost:{tls_server.port}", tls_root_certs=ca.ca_cert.read_bytes()) as client:
        assert IDENT in {t["table"] for t in client.tables()}


def test_plaintext_client_is_refused(tls_server):
    with HudiFlightClient(f"grpc://127.0.0.1:{tls_server.port}", timeout=10) as client:
        with pytest.raises(ConnectionError, match="may require TLS"):
            client.tables()


def test_wrong_root_cert_is_refused(tls_server, pki):
    _, other = pki
    with HudiFlightClient(f"grpc+tls://127.0.0.1:{tls_server.port}", tls_root_certs=str(other.ca_cert),
                          timeout=10) as client:
        with pytest.raises(ConnectionError, match="TLS certificate is not trusted: give its CA"):
            client.read(IDENT)


def test_mtls_refuses_a_client_without_certificate(mtls_server, pki):
    ca, _ = pki
    with HudiFlightClient(f"grpc+tls://127.0.0.1:{mtls_server.port}", tls_root_certs=str(ca.ca_cert),
                          timeout=10) as client:
        with pytest.raises(ConnectionError, match="client certificate"):
            client.tables()


def test_mtls_refuses_a_certificate_of_another_ca(mtls_server, pki):
    ca, other = pki
    with HudiFlightClient(f"grpc+tls://127.0.0.1:{mtls_server.port}", tls_root_certs=str(ca.ca_cert),
                          cert_chain=str(other.client_cert), private_key=str(other.client_key), timeout=10) as client:
        with pytest.raises(ConnectionError):
            client.tables()


def test_mtls_reads_with_the_right_client_certificate(mtls_server, pki, fixture_table):
    ca, _ = pki
    with HudiFlightClient(f"grpc+tls://127.0.0.1:{mtls_server.port}", tls_root_certs=str(ca.ca_cert),
                          cert_chain=str(ca.client_cert), private_key=ca.client_key.read_bytes()) as client:
        assert rows(client.read(IDENT)) == _expected(fixture_table)


# -- startup errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"tls_cert": "server_cert"}, "--tls-key"),
        ({"tls_key": "server_key"}, "--tls-cert"),
        ({"tls_client_ca": "ca_cert"}, "--tls-client-ca"),
        ({"tls_cert": "missing", "tls_key": "server_key"}, r"--tls-cert \(tls_cert\): cannot read"),
        ({"tls_cert": "server_cert", "tls_key": "not_pem"}, r"--tls-key \(tls_key\): .* is not a PEM file"),
        ({"tls_cert": "server_cert", "tls_key": "client_key"}, "does not belong to the certificate"),
        ({"tls_cert": "server_cert", "tls_key": "server_key", "tls_client_ca": "not_pem"}, "--tls-client-ca"),
    ],
)
def test_bad_tls_settings_stop_the_server(settings, message, pki, tmp_path):
    ca, _ = pki
    (tmp_path / "not.pem").write_text("hello\n")
    files = {"server_cert": ca.server_cert, "server_key": ca.server_key, "client_key": ca.client_key,
             "ca_cert": ca.ca_cert, "missing": tmp_path / "missing.pem", "not_pem": tmp_path / "not.pem"}
    config = ServerConfig(port=0, state_dir=str(tmp_path / "state"), **{k: str(files[v]) for k, v in settings.items()})
    with pytest.raises(ValueError, match=message):
        HudiFlightServer(config)


def test_plaintext_locations_are_refused_with_tls(pki, tmp_path):
    ca, _ = pki
    config = ServerConfig(port=0, state_dir=str(tmp_path), tls_cert=str(ca.server_cert), tls_key=str(ca.server_key),
                          locations=["grpc+tcp://127.0.0.1:9999"])
    with pytest.raises(ValueError, match="locations must use grpc\\+tls://"):
        HudiFlightServer(config)


def test_cli_serve_reports_a_bad_key_in_one_line(pki, tmp_path, capsys):
    ca, _ = pki
    code = main(["serve", "--port", "0", "--state-dir", str(tmp_path), "--tls-cert", str(ca.server_cert),
                 "--tls-key", str(ca.client_key)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("hudi-flight: error: --tls-key (tls_key)") and err.count("\n") == 1
    assert "Traceback" not in err


def _two_free_ports() -> int:
    """A port P with P + 1 free too (``--processes 2`` listens on both)."""
    for _ in range(50):
        port = free_port()
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two consecutive free ports")


def _wait_until_serving(client: HudiFlightClient, deadline: float) -> None:
    while True:
        try:
            client.health()
            return
        except ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_processes_serve_tls_behind_one_port(pki, fixture_table, tmp_path):
    """``serve --processes 2`` with TLS: endpoints name the serving processes' own TLS ports (the
    same certificate), none a plaintext location, and a TLS client reads the whole table."""
    ca, _ = pki
    warehouse = tmp_path / "wh" / "fx"
    warehouse.mkdir(parents=True)
    shutil.copytree(fixture_table(TABLE), warehouse / "t")
    server = ServeProcess("--port", "0", "--warehouse", str(warehouse.parent), "--state-dir", str(tmp_path / "state"),
                          "--processes", "2", "--process-endpoints", "--tls-cert", str(ca.server_cert), "--tls-key", str(ca.server_key),
                          log=tmp_path / "serve.log")
    try:
        with HudiFlightClient(f"grpc+tls://127.0.0.1:{server.port}", tls_root_certs=str(ca.ca_cert)) as client:
            plan = client.plan("fx.t")
            assert plan.endpoints and all(ep.locations for ep in plan.endpoints)  # the processes' own ports
            assert all(loc.startswith("grpc+tls://") for ep in plan.endpoints for loc in ep.locations)
            assert rows(client.read("fx.t")) == _expected(fixture_table)
    finally:
        server.stop()


def test_processes_behind_the_relay_serve_tls_from_it(pki, fixture_table, tmp_path):
    """``serve --processes 2`` with mutual TLS and no ``--process-endpoints``: the relay ends
    TLS (the processes listen in cleartext on loopback), so endpoints name no location, a client
    with a certificate of the CA reads the whole table and one without is refused."""
    ca, _ = pki
    warehouse = tmp_path / "wh" / "fx"
    warehouse.mkdir(parents=True)
    shutil.copytree(fixture_table(TABLE), warehouse / "t")
    server = ServeProcess("--port", "0", "--warehouse", str(warehouse.parent), "--state-dir", str(tmp_path / "state"),
                          "--processes", "2", "--tls-cert", str(ca.server_cert), "--tls-key", str(ca.server_key),
                          "--tls-client-ca", str(ca.ca_cert), log=tmp_path / "serve.log")
    uri = f"grpc+tls://127.0.0.1:{server.port}"
    try:
        with HudiFlightClient(uri, tls_root_certs=str(ca.ca_cert), cert_chain=str(ca.client_cert),
                              private_key=str(ca.client_key)) as client:
            plan = client.plan("fx.t")
            assert plan.endpoints and not any(ep.locations for ep in plan.endpoints)
            assert rows(client.read("fx.t")) == _expected(fixture_table)
        with flight.connect(uri, tls_root_certs=ca.ca_cert.read_bytes()) as anonymous, \
                pytest.raises(flight.FlightUnavailableError):
            next(anonymous.list_flights(options=flight.FlightCallOptions(timeout=10)))
    finally:
        server.stop()


# -- stream compression (asked for by our client over TLS) ----------------------------------------


def test_streams_compressed_on_request_read_the_same(tls_server, pki, fixture_table):
    """A stock pyarrow client asking for zstd, for lz4, or for an unknown codec (ignored) reads
    the same rows; our client asks only when told to (``stream_compression``)."""
    import pyarrow.flight as flight

    from flight_server.protocol.headers import COMPRESSION_HEADER

    ca, _ = pki
    expected = _expected(fixture_table)
    class Lz4Client(HudiFlightClient):
        stream_compression = "lz4"

    with Lz4Client(f"grpc+tls://127.0.0.1:{tls_server.port}", tls_root_certs=str(ca.ca_cert)) as client:
        assert (COMPRESSION_HEADER.encode(), b"lz4") in client.options.headers
        plan = client.plan(IDENT)
        assert rows(client.read(IDENT)) == expected
    raw = flight.FlightClient(f"grpc+tls://127.0.0.1:{tls_server.port}", tls_root_certs=ca.ca_cert.read_bytes())
    for codec in (b"zstd", b"lz4", b"brotli-9000"):
        options = flight.FlightCallOptions(headers=[(COMPRESSION_HEADER.encode(), codec)])
        tables = [raw.do_get(flight.Ticket(ep.ticket), options).read_all() for ep in plan.endpoints]
        assert sorted(r for t in tables for r in rows(t)) == expected
    raw.close()
    with HudiFlightClient(f"grpc+tls://127.0.0.1:{tls_server.port}", tls_root_certs=str(ca.ca_cert)) as default:
        assert not any(k == COMPRESSION_HEADER.encode() for k, _ in default.options.headers)


def test_write_options_follow_the_request():
    import pyarrow.ipc as ipc

    from flight_server.server.query.streams import COMPRESSION_KEY, CompressionMiddlewareFactory, write_options

    factory = CompressionMiddlewareFactory()

    class Context:
        def __init__(self, headers):
            self.middleware = factory.start_call(None, headers)

        def get_middleware(self, key):
            return self.middleware if key == COMPRESSION_KEY else None

    default = ipc.IpcWriteOptions(compression="zstd")  # the server's stream_compression
    assert write_options(Context({"x-hudi-flight-compression": ["lz4"]}), default).compression == "lz4"
    assert write_options(Context({"x-hudi-flight-compression": ["ZSTD"]}), default).compression == "zstd"
    assert write_options(Context({"x-hudi-flight-compression": ["yes"]}), default) is default
    # a client that does not ask is never sent compressed buffers (the JDBC driver cannot read them)
    assert write_options(Context({}), default).compression is None
    assert write_options(Context({"x-hudi-flight-compression": [" "]}), default).compression is None


def test_stream_compression_setting_is_checked(tmp_path):
    assert ServerConfig(stream_compression="zstd").ipc_options().compression == "zstd"
    with pytest.raises(ValueError, match="stream_compression must be lz4, zstd or unset"):
        ServerConfig(stream_compression="snappy").ipc_options()
