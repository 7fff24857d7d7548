"""Authentication and authorization, attacked through a real server on 127.0.0.1: the basic-auth
handshake, forged/expired/foreign bearer tokens, the read-grant matrix, admin-only actions,
tickets bound to their caller, anonymous access only where the defaults allow it, and the
refusal to expose a server without credentials."""

from __future__ import annotations

import base64
import json
import logging
import shutil
import time

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.client.session import connect
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.security.access import is_loopback
from flight_server.server.security.auth import TokenIssuer
from flight_server.server.security.budgets import CallKeys
from flight_server.server.security.tickets import TicketSigner
from flight_server.server.security.users import Grant, UserStore, verify_password
from flight_server.server.service import HudiFlightServer
from tests.support.auth import add_user, admin_client, user_client
from tests.support.certs import make_pki
from tests.support.servers import free_port, running_server

SECRET = "a1" * 32
SIMPLE = "sample_table/cow/v6_nonpartitioned"
TABLES = ["ns1.a", "ns1.b", "ns2.c"]
PASSWORD = "correct horse battery"
#: user -> grants; what each may read of TABLES
MATRIX = {
    "ns-reader": ([("read", "ns1")], ["ns1.a", "ns1.b"]),
    "table-reader": ([("read", "ns2.c")], ["ns2.c"]),
    "everything-reader": ([("read", "*")], TABLES),
    "ns-admin": ([("admin", "ns1")], ["ns1.a", "ns1.b"]),
    "nobody": ([], []),
}


def _action(client: flight.FlightClient, name: str, body: dict | None = None):
    results = list(client.do_action(flight.Action(name, json.dumps(body or {}).encode())))
    return json.loads(results[0].body.to_pybytes())


def _path(table: str) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_path(*table.split("."))


def _bearer(token: str) -> flight.FlightCallOptions:
    return flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {token}".encode())])


def _registry(fixture_table) -> Registry:
    registry = Registry("sqlite://")
    for table in TABLES:
        registry.register_table(table, fixture_table(SIMPLE))
    return registry


@pytest.fixture(scope="module")
def server(tmp_path_factory, fixture_table):
    # a stream over the per-user bound waits its turn this long before it is refused (not 30 s)
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("auth-state")), secret=SECRET,
                          stream_queue_seconds=1.0, allowed_roots=[str(tmp_path_factory.getbasetemp())],
                          namespace_roots={"ns1": [fixture_table(SIMPLE)]})
    with running_server(config, registry=_registry(fixture_table)) as srv:
        for user, (grants, _) in MATRIX.items():
            add_user(srv, user, PASSWORD)
            for right, target in grants:
                srv.app.users.grant(user, Grant.parse(right, target))
        yield srv


@pytest.fixture(scope="module")
def clients(server):
    made = {user: user_client(server.port, user, PASSWORD) for user in MATRIX}
    yield made
    for c in made.values():
        c.close()


# -- authentication --------------------------------------------------------------------------


def test_handshake_returns_a_bearer_token_naming_the_user(server):
    with flight.connect(f"grpc://127.0.0.1:{server.port}") as plain:
        key, value = plain.authenticate_basic_token("ns-reader", PASSWORD)
        assert key == b"authorization" and value.startswith(b"Bearer hft1.")
        token = value.decode()[len("Bearer "):]
        assert TokenIssuer(server.app.signer, 60).user_of(token) == "ns-reader"
        with pytest.raises(flight.FlightUnauthenticatedError, match="credentials required"):
            _action(plain, "list-tables")
        listed = list(plain.do_action(flight.Action("list-tables", b"{}"), _bearer(token)))
        assert {t["table"] for t in json.loads(listed[0].body.to_pybytes())} == {"ns1.a", "ns1.b"}


@pytest.mark.parametrize("user, password", [("ns-reader", "wrong password"), ("no-such-user", PASSWORD),
                                            ("ns-reader", ""), ("", PASSWORD)])
def test_wrong_password_or_unknown_user_is_unauthenticated(server, user, password):
    with flight.connect(f"grpc://127.0.0.1:{server.port}") as plain:
        with pytest.raises(flight.FlightUnauthenticatedError) as info:
            plain.authenticate_basic_token(user, password)
    assert password not in str(info.value) or not password


def test_basic_credentials_only_on_the_handshake(server):
    basic = base64.b64encode(f"ns-reader:{PASSWORD}".encode())
    options = flight.FlightCallOptions(headers=[(b"authorization", b"Basic " + basic)])
    with flight.connect(f"grpc://127.0.0.1:{server.port}") as plain:
        with pytest.raises(flight.FlightUnauthenticatedError, match="handshake only"):
            plain.get_flight_info(_path("ns1.a"), options)


def _token_of(server, user: str) -> str:
    with flight.connect(f"grpc://127.0.0.1:{server.port}") as plain:
        return plain.authenticate_basic_token(user, PASSWORD)[1].decode()[len("Bearer "):]


def _forged_tokens(server) -> dict[str, str]:
    real = _token_of(server, "ns-reader")
    head, payload, sig = real.split(".")
    other = TicketSigner(b"x" * 32)  # another server's secret
    ticket = server.app.signer.sign({"u": "ns-reader"}, time.time() + 60).decode()  # a ticket, not a token
    return {
        "expired": TokenIssuer(server.app.signer, 60).issue("ns-reader", now=time.time() - 120),
        "altered": f"{head}.{payload[:-2]}{'A' if payload[-2] != 'A' else 'B'}{payload[-1]}.{sig}",
        "re-signed for admin": TokenIssuer(other, 60).issue("ns-admin"),
        "foreign secret": TokenIssuer(other, 60).issue("ns-reader"),
        "ticket as token": ticket,
        "garbage": "hft1.e30.AAAA",
        "empty": "",
    }


def test_expired_altered_and_foreign_tokens_are_unauthenticated(server):
    with flight.connect(f"grpc://127.0.0.1:{server.port}") as plain:
        for name, token in _forged_tokens(server).items():
            with pytest.raises(flight.FlightUnauthenticatedError) as info:
                plain.get_flight_info(_path("ns1.a"), _bearer(token))
            assert "Traceback" not in str(info.value), name
            if name == "expired":
                assert "expired" in str(info.value)


def test_token_of_a_removed_user_stops_working(server):
    add_user(server, "leaver", PASSWORD)
    server.app.users.grant("leaver", Grant.parse("read", "*"))
    token = _token_of(server, "leaver")
    with flight.connect(f"grpc://127.0.0.1:{server.port}") as plain:
        assert plain.get_flight_info(_path("ns1.a"), _bearer(token)).endpoints
        server.app.users.remove_user("leaver")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # visible within auth_cache_seconds
            try:
                plain.get_flight_info(_path("ns1.a"), _bearer(token))
            except flight.FlightUnauthenticatedError as err:
                assert "does not exist" in str(err)
                return
            time.sleep(0.05)
        pytest.fail("a removed user's token kept working")


# -- authorization ---------------------------------------------------------------------------


@pytest.mark.parametrize("user", list(MATRIX))
def test_read_grant_matrix(clients, user):
    client = clients[user]
    readable = MATRIX[user][1]
    for table in TABLES:
        if table in readable:
            info = client.get_flight_info(_path(table))
            assert client.do_get(info.endpoints[0].ticket).read_all().num_rows > 0
            assert _action(client, "table-info", {"table": table})["table"] == table
            assert client.get_schema(_path(table)).schema.names
        else:
            with pytest.raises(flight.FlightUnauthorizedError, match=f"{user} has no read right on {table}"):
                client.get_flight_info(_path(table))
            with pytest.raises(flight.FlightUnauthorizedError):
                _action(client, "table-info", {"table": table})
            # pyarrow cannot send a Flight status from get_schema: a clean PermissionError instead
            with pytest.raises(OSError, match=f"has no read right on {table}") as info:
                client.get_schema(_path(table))
            assert "Traceback" not in str(info.value)
    assert sorted(t["table"] for t in _action(client, "list-tables")) == readable
    listed = sorted(f"{i.descriptor.path[0].decode()}.{i.descriptor.path[1].decode()}" for i in client.list_flights())
    assert listed == readable
    assert _action(client, "health")["status"] == "ok"  # anyone authenticated


def test_listed_namespaces_follow_the_grants(clients):
    assert _action(clients["ns-reader"], "list-namespaces") == ["ns1"]
    assert _action(clients["table-reader"], "list-namespaces") == ["ns2"]
    assert _action(clients["everything-reader"], "list-namespaces") == ["ns1", "ns2"]
    assert _action(clients["nobody"], "list-namespaces") == []


def test_unknown_tables_are_unauthorized_not_not_found(clients):
    with pytest.raises(flight.FlightUnauthorizedError):
        clients["ns-reader"].get_flight_info(_path("ns2.secret"))  # no existence oracle
    with pytest.raises(pa.ArrowKeyError, match="table ns1.missing not found"):
        clients["ns-reader"].get_flight_info(_path("ns1.missing"))


@pytest.mark.parametrize("user", ["ns-reader", "table-reader", "everything-reader", "nobody"])
def test_admin_actions_are_refused_for_readers(clients, fixture_table, user):
    client = clients[user]
    for name, body in [("register-table", {"table": "ns1.new", "uri": fixture_table(SIMPLE)}),
                       ("unregister-table", {"table": "ns1.a"}), ("refresh-table", {"table": "ns1.a"}),
                       ("refresh-table", {})]:
        with pytest.raises(flight.FlightUnauthorizedError, match="no admin right"):
            _action(client, name, body)


def test_namespace_admin_changes_only_its_namespace(clients, server, fixture_table):
    client = clients["ns-admin"]
    assert _action(client, "register-table", {"table": "ns1.extra", "uri": fixture_table(SIMPLE)})["table"] == "ns1.extra"
    assert _action(client, "refresh-table", {"table": "ns1.extra"})["table"] == "ns1.extra"
    assert _action(client, "unregister-table", {"table": "ns1.extra"})["unregistered"]
    with pytest.raises(flight.FlightUnauthorizedError):
        _action(client, "register-table", {"table": "ns2.extra", "uri": fixture_table(SIMPLE)})
    with pytest.raises(flight.FlightUnauthorizedError):
        _action(client, "refresh-table", {})  # every warehouse: catalog-wide admin only


def test_admin_may_do_everything(server, fixture_table):
    with admin_client(server) as client:
        assert sorted(t["table"] for t in _action(client, "list-tables")) == TABLES
        assert _action(client, "register-table", {"table": "ns3.x", "uri": fixture_table(SIMPLE)})["table"] == "ns3.x"
        assert _action(client, "unregister-table", {"table": "ns3.x"})["unregistered"]
        assert _action(client, "refresh-table", {})["tables"] == 0


# -- tickets name their caller ---------------------------------------------------------------


def test_ticket_of_one_user_is_refused_for_another(clients):
    info = clients["ns-reader"].get_flight_info(_path("ns1.a"))
    ticket = info.endpoints[0].ticket
    owner = TicketSigner(bytes.fromhex(SECRET)).verify(ticket.ticket)["u"]
    assert owner.startswith("ns-reader/")  # the user and its account (Access.owner)
    with pytest.raises(flight.FlightUnauthorizedError, match="another user"):
        clients["everything-reader"].do_get(ticket).read_all()  # may read ns1.a, but not with this ticket
    with pytest.raises(flight.FlightUnauthorizedError):
        clients["nobody"].do_get(ticket).read_all()


def test_revoke_takes_effect_on_the_next_do_get(server):
    add_user(server, "revoked", PASSWORD)
    server.app.users.grant("revoked", Grant.parse("read", "ns1.a"))
    with user_client(server.port, "revoked", PASSWORD) as client:
        info = client.get_flight_info(_path("ns1.a"))
        assert client.do_get(info.endpoints[0].ticket).read_all().num_rows > 0
        server.app.users.revoke("revoked", Grant.parse("read", "ns1.a"))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # visible within auth_cache_seconds
            try:
                client.do_get(info.endpoints[0].ticket).read_all()
            except flight.FlightUnauthorizedError as err:
                assert "no read right on ns1.a" in str(err)
                return
            time.sleep(0.05)
        pytest.fail("the ticket kept working after the revoke")


def test_streams_are_counted_per_user_not_per_token(server):
    """A fresh handshake (a new token) or a new connection does not buy more concurrent streams."""
    token = _token_of(server, "everything-reader")
    keys = [CallKeys("everything-reader", f"ipv4:10.0.0.1:{port}") for port in range(server.app.streams._bounds["user"])]
    for k in keys:  # the user's other streams, opened with other tokens on other connections
        server.app.streams.acquire(k)
    try:
        with flight.connect(f"grpc://127.0.0.1:{server.port}") as plain:
            info = plain.get_flight_info(_path("ns2.c"), _bearer(token))
            with pytest.raises(flight.FlightUnavailableError, match="max_streams_per_user"):
                plain.do_get(info.endpoints[0].ticket, _bearer(token)).read_all()
    finally:
        for k in keys:
            server.app.streams.release(k)


# -- anonymous callers and exposed servers ---------------------------------------------------


def test_anonymous_reads_only_on_a_loopback_server_without_users(tmp_path, fixture_table):
    registry = _registry(fixture_table)
    with running_server(ServerConfig(port=0, state_dir=str(tmp_path / "s")), registry=registry) as srv:
        with flight.connect(f"grpc://127.0.0.1:{srv.port}") as anonymous:
            info = anonymous.get_flight_info(_path("ns1.a"))
            assert anonymous.do_get(info.endpoints[0].ticket).read_all().num_rows > 0
            assert sorted(t["table"] for t in _action(anonymous, "list-tables")) == TABLES
            with pytest.raises(flight.FlightUnauthorizedError, match="anonymous has no admin right"):
                _action(anonymous, "unregister-table", {"table": "ns1.a"})  # not a local change
            # a client given no token that sends one anyway (flightsql-dbapi: "Bearer None") is anonymous
            assert anonymous.get_flight_info(_path("ns1.a"), _bearer("None")).endpoints
            factory = srv.app.auth
            call = flight.CallInfo(flight.FlightMethod.DO_GET)
            assert factory.start_call(call, {}) is None  # anonymous: no record, caller_name says so
            add_user(srv, "first-user", PASSWORD)  # from now on, credentials are required
            with pytest.raises(flight.FlightUnauthenticatedError, match="credentials required"):
                factory.start_call(call, {})
            with pytest.raises(flight.FlightUnauthenticatedError, match="credentials required"):
                anonymous.get_flight_info(_path("ns1.a"))
            with pytest.raises(flight.FlightUnauthenticatedError, match="credentials required"):
                anonymous.get_flight_info(_path("ns1.a"), _bearer("None"))
            with pytest.raises(flight.FlightUnauthenticatedError):
                anonymous.do_get(info.endpoints[0].ticket).read_all()


def test_anonymous_callers_of_a_loopback_server_refresh_and_register(tmp_path, fixture_table):
    warehouse = tmp_path / "warehouse"
    (warehouse / "lake").mkdir(parents=True)
    config = ServerConfig(port=0, state_dir=str(tmp_path / "s"), warehouses=[str(warehouse)],
                          allowed_roots=[str(warehouse)], refresh_interval_seconds=0)
    with running_server(config) as srv:
        with flight.connect(f"grpc://127.0.0.1:{srv.port}") as anonymous:
            with pytest.raises(pa.ArrowKeyError):
                anonymous.get_flight_info(_path("lake.trips"))
            shutil.copytree(fixture_table(SIMPLE), warehouse / "lake" / "trips")  # a new table folder
            assert _action(anonymous, "refresh-table", {})["tables"] == 1
            info = anonymous.get_flight_info(_path("lake.trips"))  # served at the next request
            assert anonymous.do_get(info.endpoints[0].ticket).read_all().num_rows > 0
            assert _action(anonymous, "refresh-table", {"table": "lake.trips"})["latest_instant"]
            shutil.copytree(fixture_table(SIMPLE), warehouse / "lake" / "more")  # refreshed by its name
            assert _action(anonymous, "refresh-table", {"table": "lake.more"})["latest_instant"]
            assert anonymous.get_flight_info(_path("lake.more")).endpoints
            uri = str(warehouse / "lake" / "trips")
            assert _action(anonymous, "register-table", {"table": "other.t", "uri": uri})["table"] == "other.t"
            with pytest.raises(pa.ArrowInvalid, match="not under a root"):  # still confined to the roots
                _action(anonymous, "register-table", {"table": "other.u", "uri": fixture_table(SIMPLE)})
            add_user(srv, "first-user", PASSWORD)  # users end anonymous calls, changes included
            with pytest.raises(flight.FlightUnauthenticatedError, match="credentials required"):
                _action(anonymous, "refresh-table", {})


def test_no_anonymous_access_when_tokens_are_configured(tmp_path, fixture_table):
    config = ServerConfig(port=0, state_dir=str(tmp_path / "s"), tokens={"a-static-token-0123456789": "bot"})
    with running_server(config, registry=_registry(fixture_table)) as srv:
        with flight.connect(f"grpc://127.0.0.1:{srv.port}") as anonymous:
            with pytest.raises(flight.FlightUnauthenticatedError, match="credentials required"):
                anonymous.get_flight_info(_path("ns1.a"))
            with pytest.raises(flight.FlightUnauthorizedError, match="bot has no read right"):
                anonymous.get_flight_info(_path("ns1.a"), _bearer("a-static-token-0123456789"))
            srv.app.users.grant("bot", Grant.parse("read", "ns1.a"))
            srv.app.access.forget()
            assert anonymous.get_flight_info(_path("ns1.a"), _bearer("a-static-token-0123456789")).endpoints


def test_short_static_tokens_are_refused(tmp_path):
    with pytest.raises(ValueError, match="at least 16 characters"):
        HudiFlightServer(ServerConfig(port=0, state_dir=str(tmp_path), tokens={"short": "bot"}))


def test_non_loopback_without_credentials_refuses_to_start(tmp_path):
    config = ServerConfig(host="0.0.0.0", port=free_port(), state_dir=str(tmp_path / "s"))
    with pytest.raises(ValueError, match="refusing to listen on 0.0.0.0 with no users and no tokens"):
        HudiFlightServer(config)
    insecure = config.updated({"insecure": True})
    with running_server(insecure) as srv:  # bound to every address: shut down at once
        with flight.connect(f"grpc://127.0.0.1:{srv.port}") as anonymous:
            assert _action(anonymous, "health")["status"] == "ok"
            with pytest.raises(flight.FlightUnauthorizedError, match="on a loopback server without users only"):
                _action(anonymous, "refresh-table", {})  # --insecure is not loopback: no anonymous changes
    UserStore(Registry(config.resolved_catalog_url).engine).add_user("ops", PASSWORD, admin=True)
    with pytest.raises(ValueError, match="refusing to listen on 0.0.0.0 without TLS"):  # passwords in clear
        HudiFlightServer(config)
    pki = make_pki(tmp_path / "pki")
    secure = config.updated({"tls_cert": str(pki.server_cert), "tls_key": str(pki.server_key)})
    with running_server(secure) as srv:  # credentials and TLS: it starts, anonymous callers are refused
        with flight.connect(f"grpc+tls://127.0.0.1:{srv.port}", tls_root_certs=pki.ca_cert.read_bytes()) as anonymous:
            with pytest.raises(flight.FlightUnauthenticatedError):
                _action(anonymous, "health")


def test_loopback_addresses():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.9.9.9", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "", "10.0.0.1", "example.com", "localhost.evil"))


# -- passwords at rest and in logs -----------------------------------------------------------


def test_password_hashes_are_salted_and_no_secret_reaches_db_or_logs(tmp_path, fixture_table, caplog):
    state = tmp_path / "s"
    config = ServerConfig(port=0, state_dir=str(state))
    caplog.set_level(logging.DEBUG)
    with running_server(config) as srv:
        srv.app.users.add_user("twin-a", PASSWORD)
        srv.app.users.add_user("twin-b", PASSWORD)
        with srv.app.registry.engine.connect() as conn:
            hashes = dict(conn.exec_driver_sql("SELECT name, password_hash FROM hudi_flight_users").all())
        assert hashes["twin-a"] != hashes["twin-b"] and all(h.startswith("scrypt$16384$8$1$") for h in hashes.values())
        assert verify_password(PASSWORD, hashes["twin-a"]) and not verify_password(PASSWORD + "x", hashes["twin-a"])
        with connect(f"127.0.0.1:{srv.port}", user="twin-a", password=PASSWORD) as client:
            token = client.options.headers[0][1].decode()
            client.health()
        with pytest.raises(PermissionError, match="wrong user name or password"):
            connect(f"127.0.0.1:{srv.port}", user="twin-a", password="a wrong password")
    assert PASSWORD.encode() not in (state / "catalog.db").read_bytes()
    logged = caplog.text
    assert PASSWORD not in logged and "a wrong password" not in logged and token.split()[-1] not in logged
