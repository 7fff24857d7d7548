"""Client credentials (flight_server.client.credentials and HudiFlightClient): PEM from bytes, text or
a path, errors naming the option and never the value; TLS + static token and the basic-auth login
against real servers; a TLS client never follows a plaintext location."""

from __future__ import annotations

import pyarrow.flight as flight
import pytest

from catalog import HudiTable
from flight_server.client.credentials import pem, tls_client_kwargs
from flight_server.client.session import HudiFlightClient, PlannedEndpoint
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from tests.support.compare import assert_same_rows
from tests.support.credentials import add_login_users, allow_token_user, token_settings
from tests.support.servers import running_server

TABLE = "sample_table/cow/v9_txns_simple_meta"
IDENT = "sample_table_cow.v9_txns_simple_meta"
TOKEN = "tls-test-token-0123456789abcdef"
SECRET_LOOKING = "hunter2-not-a-path-and-not-pem"
USERS = {"ada": "ada-password-1"}


@pytest.fixture(scope="module")
def registry(fixture_table) -> Registry:
    reg = Registry("sqlite://")
    reg.register_table(IDENT, fixture_table(TABLE))
    return reg


@pytest.fixture(scope="module")
def tls_token_server(registry, pki, tmp_path_factory):
    """TLS + a static token."""
    ca, _ = pki
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("state")), tls_cert=str(ca.server_cert),
                          tls_key=str(ca.server_key), **token_settings(TOKEN))
    with running_server(config, registry=registry) as server:
        allow_token_user(server)
        yield server


@pytest.fixture(scope="module")
def login_server(registry, pki, tmp_path_factory):
    """TLS + the basic-auth handshake of user ``ada``."""
    ca, _ = pki
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("state")), tls_cert=str(ca.server_cert),
                          tls_key=str(ca.server_key))
    with running_server(config, registry=registry) as server:
        add_login_users(server, USERS)
        yield server


# -- PEM sources -------------------------------------------------------------------------------


def test_pem_from_bytes_text_and_path(pki):
    ca, _ = pki
    data = ca.ca_cert.read_bytes()
    assert pem(data, "x") == data
    assert pem(data.decode(), "x") == data
    assert pem(str(ca.ca_cert), "x") == data
    assert pem(ca.ca_cert, "x") == data
    assert pem(None, "x") is None and pem("", "x") is None


def test_pem_errors_name_the_option_not_the_value(tmp_path):
    with pytest.raises(ValueError, match="private_key: neither PEM text nor a readable PEM file") as err:
        tls_client_kwargs(private_key=SECRET_LOOKING)
    assert SECRET_LOOKING not in str(err.value)
    (tmp_path / "x.txt").write_text(SECRET_LOOKING)
    with pytest.raises(ValueError, match="tls_root_certs: not PEM data") as err:
        tls_client_kwargs(tls_root_certs=str(tmp_path / "x.txt"))
    assert SECRET_LOOKING not in str(err.value)


def test_client_certificate_needs_its_key(pki):
    ca, _ = pki
    with pytest.raises(ValueError, match="both cert_chain and private_key"):
        tls_client_kwargs(cert_chain=str(ca.client_cert))


def test_tls_settings_need_a_tls_uri(pki):
    ca, _ = pki
    with pytest.raises(ValueError, match="need a grpc\\+tls:// URI"):
        HudiFlightClient("grpc://127.0.0.1:1", tls_root_certs=str(ca.ca_cert))


def test_token_and_user_are_exclusive():
    with pytest.raises(ValueError, match="either token or user"):
        HudiFlightClient("grpc://127.0.0.1:1", token="t", user="u", password="p")


# -- against servers -----------------------------------------------------------------------------


def test_tls_and_static_token_read(tls_token_server, pki, fixture_table):
    ca, _ = pki
    uri = f"grpc+tls://127.0.0.1:{tls_token_server.port}"
    with HudiFlightClient(uri, token=TOKEN, tls_root_certs=str(ca.ca_cert)) as client:
        assert_same_rows(client.read(IDENT), HudiTable.open(fixture_table(TABLE)).read())
    with HudiFlightClient(uri, tls_root_certs=str(ca.ca_cert)) as client:
        with pytest.raises(PermissionError):
            client.tables()
    with HudiFlightClient(uri, token="wrong", tls_root_certs=str(ca.ca_cert)) as client:
        with pytest.raises(PermissionError):
            client.tables()
        with pytest.raises(PermissionError, match="schema of"):  # pyarrow raises a bare OSError here
            client.schema(IDENT)


def test_user_password_login_then_bearer_on_every_call(login_server, pki, fixture_table):
    ca, _ = pki
    uri = f"grpc+tls://127.0.0.1:{login_server.port}"
    with HudiFlightClient(uri, user="ada", password=USERS["ada"], tls_root_certs=str(ca.ca_cert)) as client:
        (bearer,) = [value for key, value in client.options.headers if key == b"authorization"]
        assert bearer.startswith(b"Bearer ") and len(bearer) > len(b"Bearer ")
        assert_same_rows(client.read(IDENT), HudiTable.open(fixture_table(TABLE)).read())


def test_wrong_password_is_permission_error(login_server, pki):
    ca, _ = pki
    with pytest.raises(PermissionError, match="logging in as 'ada'") as err:
        HudiFlightClient(f"grpc+tls://127.0.0.1:{login_server.port}", user="ada", password="nope",
                         tls_root_certs=str(ca.ca_cert))
    assert "nope" not in str(err.value)


def test_tls_client_reads_a_plaintext_location_from_its_own_server(tls_token_server, pki):
    """An endpoint naming a plaintext location is read from the (TLS) server instead: the bearer
    token never crosses the network in the clear."""
    ca, _ = pki
    uri = f"grpc+tls://127.0.0.1:{tls_token_server.port}"
    with HudiFlightClient(uri, token=TOKEN, tls_root_certs=str(ca.ca_cert)) as client:
        plan = client.plan(IDENT)
        other = f"grpc+tls://127.0.0.1:{tls_token_server.port + 1}"
        mixed = PlannedEndpoint(plan.endpoints[0].ticket, ("grpc+tcp://127.0.0.1:1", other), 1.0, {})
        assert client._targets(mixed) == [other, uri]
        plain_only = PlannedEndpoint(plan.endpoints[0].ticket, ("grpc://127.0.0.1:1",), 1.0, {})
        assert client._targets(plain_only) == [uri, uri]
        assert sum(b.num_rows for b in client.fetch(plain_only)) == sum(
            b.num_rows for b in client.fetch(plan.endpoints[0]))
        assert {target for target, _lane in client._clients} == {uri}


def test_plaintext_client_keeps_its_locations():
    client = HudiFlightClient("grpc://127.0.0.1:1")
    endpoint = PlannedEndpoint(b"t", ("grpc://127.0.0.1:2", "grpc+tls://127.0.0.1:3"), 1.0, {})
    assert client._targets(endpoint) == ["grpc://127.0.0.1:2", "grpc+tls://127.0.0.1:3", "grpc://127.0.0.1:1"]
    client.close()


def test_tls_settings_apply_to_other_locations(tls_token_server, pki):
    """A second location gets its own FlightClient with the same TLS settings and token."""
    ca, _ = pki
    with HudiFlightClient(f"grpc+tls://localhost:{tls_token_server.port}", token=TOKEN,
                          tls_root_certs=str(ca.ca_cert)) as client:
        plan = client.plan(IDENT)
        elsewhere = f"grpc+tls://127.0.0.1:{tls_token_server.port}"  # same server, another channel
        endpoint = PlannedEndpoint(plan.endpoints[0].ticket, (elsewhere,), 1.0, {})
        assert sum(b.num_rows for b in client.fetch(endpoint)) > 0
        assert (elsewhere, 0) in client._clients
        assert isinstance(client._clients[(elsewhere, 0)], flight.FlightClient)
