"""Namespaces are walls, tokens die with their account, passwords cannot be guessed quickly
(issue 20: probes of the landed server by a hostile client, each failing before the fix)."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.protocol import pack, sql
from flight_server.protocol.retry import decode
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.security.budgets import ServerBusyError
from flight_server.server.security.logins import LoginThrottle
from flight_server.server.security.policy import StoragePolicy, StoragePolicyError
from flight_server.server.security.users import Grant
from tests.support.auth import add_user, user_client
from tests.support.servers import running_server

SIMPLE = "sample_table/cow/v6_nonpartitioned"
PASSWORD = "correct horse battery"


def _action(client: flight.FlightClient, name: str, body: dict | None = None):
    results = list(client.do_action(flight.Action(name, json.dumps(body or {}).encode())))
    return json.loads(results[0].body.to_pybytes())


@pytest.fixture()
def walled(tmp_path, fixture_table):
    """Namespaces ``sec`` and ``evil`` with folders of their own; ``evil-admin`` administers evil."""
    for ns in ("sec", "evil", "open"):
        (tmp_path / "wh" / ns).mkdir(parents=True)
    secret = shutil.copytree(fixture_table(SIMPLE), tmp_path / "wh" / "sec" / "secret_t")
    mine = shutil.copytree(fixture_table(SIMPLE), tmp_path / "wh" / "evil" / "mine")
    registry = Registry("sqlite://")
    registry.register_table("sec.secret_t", str(secret))
    config = ServerConfig(
        port=0, state_dir=str(tmp_path / "s"), allowed_roots=[str(tmp_path / "wh")],
        namespace_roots={"sec": [str(tmp_path / "wh" / "sec")], "evil": [str(tmp_path / "wh" / "evil")]},
    )
    with running_server(config, registry=registry) as srv:
        for user, (right, ns) in {"evil-admin": ("admin", "evil"), "open-admin": ("admin", "open")}.items():
            add_user(srv, user, PASSWORD)
            srv.app.users.grant(user, Grant.parse(right, ns))
        add_user(srv, "root", PASSWORD, admin=True)
        srv.app.access.forget()
        yield srv, secret, mine


def test_a_namespace_admin_cannot_register_another_namespaces_folder(walled):
    srv, secret, mine = walled
    with user_client(srv.port, "evil-admin", PASSWORD) as evil:
        with pytest.raises(pa.ArrowInvalid, match="not under a root of namespace evil") as refused:
            _action(evil, "register-table", {"table": "evil.stolen", "uri": str(secret)})
        assert str(secret) not in str(refused.value)
        assert _action(evil, "register-table", {"table": "evil.mine", "uri": str(mine)})["table"] == "evil.mine"
    with user_client(srv.port, "open-admin", PASSWORD) as other:  # a namespace without roots of its own
        with pytest.raises(pa.ArrowInvalid, match="namespace open has no roots of its own"):
            _action(other, "register-table", {"table": "open.stolen", "uri": str(secret)})
    with user_client(srv.port, "root", PASSWORD) as root:  # the wall holds for a catalog admin too
        with pytest.raises(pa.ArrowInvalid, match="not under a root of namespace evil"):
            _action(root, "register-table", {"table": "evil.stolen", "uri": str(secret)})
        assert _action(root, "register-table", {"table": "open.t", "uri": str(mine)})["table"] == "open.t"


def test_a_row_outside_its_namespace_roots_is_refused_when_opened(walled):
    srv, secret, _ = walled
    srv.app.registry.register_table("evil.smuggled", str(secret))  # e.g. written before the walls
    with user_client(srv.port, "root", PASSWORD) as root:
        with pytest.raises(pa.ArrowInvalid, match="an admin must register it again"):
            root.get_flight_info(flight.FlightDescriptor.for_path("evil", "smuggled"))


def test_namespace_roots_may_not_overlap(tmp_path):
    with pytest.raises(ValueError, match="overlap"):
        StoragePolicy(namespace_roots={"a": [str(tmp_path)], "b": [str(tmp_path / "x")]})
    policy = StoragePolicy(roots=[str(tmp_path)], namespace_roots={"a": [str(tmp_path / "a")]})
    with pytest.raises(StoragePolicyError):
        policy.check_in_namespace("a", str(tmp_path / "b" / "t"), None, catalog_admin=True)


def test_missing_and_not_yours_get_one_answer(walled):
    srv, _, _ = walled
    answers = []
    with user_client(srv.port, "evil-admin", PASSWORD) as evil:
        for table in ("sec.secret_t", "sec.no_such_table"):
            path = flight.FlightDescriptor.for_path(*table.split("."))
            for call, arg in ((evil.get_flight_info, path), (evil.get_schema, path),
                              (lambda body: _action(evil, "table-info", body), {"table": table})):
                with pytest.raises(Exception) as refused:
                    call(arg)
                answers.append((type(refused.value), str(refused.value).split(". Detail")[0].replace(table, "T")))
    assert answers[:3] == answers[3:]


def test_a_token_dies_with_its_account(walled):
    srv, _, _ = walled
    with flight.connect(f"grpc://127.0.0.1:{srv.port}") as plain:
        header = plain.authenticate_basic_token("evil-admin", PASSWORD)
        options = flight.FlightCallOptions(headers=[header])
        assert _list(plain, options) == []
        srv.app.users.remove_user("evil-admin")
        srv.app.users.add_user("evil-admin", PASSWORD)  # same name, same password: another account
        srv.app.users.grant("evil-admin", Grant.parse("admin", "evil"))
        srv.app.access.forget()
        with pytest.raises(flight.FlightUnauthenticatedError, match="earlier account"):
            _list(plain, options)
        fresh = flight.FlightCallOptions(headers=[plain.authenticate_basic_token("evil-admin", PASSWORD)])
        assert _list(plain, fresh) == []


def _list(client: flight.FlightClient, options: flight.FlightCallOptions) -> list:
    return json.loads(list(client.do_action(flight.Action("list-tables", b"{}"), options))[0].body.to_pybytes())


def test_wrong_passwords_make_the_next_attempts_wait(walled):
    srv, _, _ = walled
    with flight.connect(f"grpc://127.0.0.1:{srv.port}") as plain:
        refusals = []
        for _ in range(8):
            try:
                plain.authenticate_basic_token("root", "not the password")
            except flight.FlightUnavailableError as err:
                refusals.append(err)
            except flight.FlightUnauthenticatedError:
                pass
        assert len(refusals) >= 4  # after the free failures: refused fast, not checked
        hint = decode(refusals[-1].extra_info)
        assert hint is not None and hint.limit == "login_attempts_per_user" and hint.retry_after > 0
        with pytest.raises(flight.FlightUnavailableError):  # even the right password waits its turn
            plain.authenticate_basic_token("root", PASSWORD)
        plain.authenticate_basic_token("evil-admin", PASSWORD)  # other users are not locked out


def test_login_throttle_grows_and_clears():
    now = [0.0]
    throttle = LoginThrottle(free_failures=2, first_delay=1.0, longest_delay=8.0, failures_per_second=0,
                             clock=lambda: now[0])
    for _ in range(2):  # the free failures
        throttle.check("u")
        throttle.failed("u")
    with pytest.raises(ServerBusyError) as wait:
        throttle.check("u")
    assert wait.value.retry_after == 1.0
    now[0] += 1.0
    throttle.check("u")
    throttle.failed("u")
    now[0] += 1.9
    with pytest.raises(ServerBusyError) as wait:  # the delay doubles
        throttle.check("u")
    assert wait.value.retry_after == pytest.approx(0.1)
    now[0] += 0.1
    throttle.check("u")
    throttle.succeeded("u")
    throttle.check("u")


def test_process_wide_failures_are_bounded():
    now = [0.0]
    throttle = LoginThrottle(free_failures=100, failures_per_second=2, clock=lambda: now[0])
    for user in ("a", "b", "c", "d"):
        throttle.check(user)
        throttle.failed(user)
    with pytest.raises(ServerBusyError, match="login_failures_per_second"):
        throttle.check("e")
    now[0] += 0.5
    throttle.check("e")


def test_describe_answers_missing_and_not_yours_alike(walled):
    srv, _, _ = walled
    answers = []
    with user_client(srv.port, "evil-admin", PASSWORD) as evil:
        for table in ("sec.secret_t", "sec.no_such_table"):
            descriptor = flight.FlightDescriptor.for_command(pack(sql.CommandStatementQuery(query=f"DESCRIBE {table}")))
            with pytest.raises(flight.FlightError) as refused:
                evil.get_flight_info(descriptor)
            answers.append((type(refused.value), str(refused.value).split(". Detail")[0].replace(table, "T")))
    assert answers[0] == answers[1] and answers[0][0] is flight.FlightUnauthorizedError
    with user_client(srv.port, "root", PASSWORD) as root:  # who may read it is told what is missing
        with pytest.raises(pa.ArrowKeyError, match="not found"):
            root.get_flight_info(flight.FlightDescriptor.for_command(
                pack(sql.CommandStatementQuery(query="DESCRIBE sec.no_such_table"))))


def test_a_ticket_dies_with_its_account(walled):
    srv, _, _ = walled
    add_user(srv, "reader", PASSWORD)
    srv.app.users.grant("reader", Grant.parse("read", "sec"))
    srv.app.access.forget()
    with user_client(srv.port, "reader", PASSWORD) as reader:
        info = reader.get_flight_info(flight.FlightDescriptor.for_path("sec", "secret_t"))
        statement = reader.get_flight_info(flight.FlightDescriptor.for_command(
            pack(sql.CommandStatementQuery(query="SELECT count(*) + 1 AS n FROM sec.secret_t"))))
        assert reader.do_get(info.endpoints[0].ticket).read_all().num_rows > 0  # the account's own
    srv.app.users.remove_user("reader")
    srv.app.users.add_user("reader", PASSWORD)  # same name, same password: another account
    srv.app.users.grant("reader", Grant.parse("read", "sec"))
    srv.app.access.forget()
    with user_client(srv.port, "reader", PASSWORD) as again:
        for ticket in (info.endpoints[0].ticket, statement.endpoints[0].ticket):
            with pytest.raises(flight.FlightUnauthorizedError, match="earlier account"):
                again.do_get(ticket).read_all()
        fresh = again.get_flight_info(flight.FlightDescriptor.for_path("sec", "secret_t"))
        assert again.do_get(fresh.endpoints[0].ticket).read_all().num_rows > 0
