"""Fair shares of the SQL engine: each user (anonymous callers: each connection) runs at most its
share of queries at once, so one user looping heavy SQL is refused with a retry hint while
another user's light queries all run; the process-wide budget is only the backstop."""

from __future__ import annotations

import json
import threading

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.protocol import pack, sql
from flight_server.protocol.retry import decode
from flight_server.server.engine.admission import MemoryBudget
from flight_server.server.engine.sandbox import SandboxedEngine, Views
from flight_server.server.engine.settings import EngineSettings
from flight_server.server.security.budgets import CallKeys, ServerBusyError
from tests.support.credentials import prepare_state
from tests.support.processes import ServeProcess, poll

ENDLESS = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT count(*) FROM r"
ALICE_TOKEN, BOB_TOKEN = "alice-token-" + "a" * 16, "bob-token-" + "b" * 16
ALICE, BOB = CallKeys("alice", "ipv4:127.0.0.1:1"), CallKeys("bob", "ipv4:127.0.0.1:2")


def test_a_user_past_their_share_is_refused_and_another_user_runs():
    settings = EngineSettings(memory_limit="64MB", memory_budget="128MB", threads=1,
                              timeout_seconds=3.0, admission_wait_seconds=0.2)
    sql_engine = SandboxedEngine(settings)
    errors: list[Exception] = []

    def run() -> None:
        try:
            list(sql_engine.run(ENDLESS, Views(), keys=ALICE)[1])
        except Exception as err:
            errors.append(err)

    heavy = threading.Thread(target=run, daemon=True)
    heavy.start()
    poll(lambda: sql_engine.watchdog.running() == 1, 10, "alice's query to run")
    with pytest.raises(ServerBusyError, match="sql_queries_per_user") as refused:
        sql_engine.run("SELECT 1", Views(), keys=CallKeys("alice", "ipv4:127.0.0.1:3"))  # another connection of hers
    assert refused.value.retry_after > 0
    # planning her next statement (its schema query over empty views) takes no share of hers
    assert sql_engine.result_schema("SELECT 5 AS five", {}).names == ["five"]
    # bob's query takes the budget's other slot: alice's share left it free
    assert list(sql_engine.run("SELECT 1 AS one", Views(), keys=BOB)[1])[0].to_pylist() == [{"one": 1}]
    heavy.join(15)  # its deadline ends it
    assert not heavy.is_alive() and isinstance(errors[0], flight.FlightTimedOutError)
    assert list(sql_engine.run("SELECT 2 AS two", Views(), keys=ALICE)[1])[0].to_pylist() == [{"two": 2}]
    sql_engine.stop_all()


def test_anonymous_callers_share_by_connection():
    budget = MemoryBudget("4GB", "1GB", 0.0)  # four slots, a share of one
    one, other = CallKeys(None, "ipv4:127.0.0.1:1"), CallKeys(None, "ipv4:127.0.0.1:2")
    with budget.admitted(one):
        with pytest.raises(ServerBusyError, match="sql_queries_per_connection"):
            with budget.admitted(one):
                pass
        with budget.admitted(other), budget.admitted():  # another connection; the server's own query
            pass


def test_the_budget_stays_the_backstop():
    budget = MemoryBudget("2GB", "1GB", 0.0, per_user=2)
    with budget.admitted(ALICE), budget.admitted(BOB):
        with pytest.raises(ServerBusyError, match="sql_memory_budget"):
            with budget.admitted(CallKeys("carol", "ipv4:127.0.0.1:9")):
                pass


def _command(query: str) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(pack(sql.CommandStatementQuery(query=query)))


def _options(token: str) -> flight.FlightCallOptions:
    return flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {token}".encode())], timeout=30)


def _query(client: flight.FlightClient, token: str, query: str) -> list[dict]:
    options = _options(token)
    info = client.get_flight_info(_command(query), options)
    return client.do_get(info.endpoints[0].ticket, options).read_all().to_pylist()


@pytest.fixture
def fair_server(tmp_path):
    """A real server: two users by static token, an SQL budget of two queries (a share of one
    each), a 2 s deadline."""
    state = tmp_path / "state"
    prepare_state(str(state), ("alice", "bob"))
    config = tmp_path / "serve.json"
    config.write_text(json.dumps({"server": {
        "tokens": {ALICE_TOKEN: "alice", BOB_TOKEN: "bob"},
        "sql_memory_limit": "64MB", "sql_memory_budget": "128MB", "sql_threads": 1,
        "sql_timeout_seconds": 2, "sql_admission_wait_seconds": 0.5,
    }}))
    server = ServeProcess("--port", "0", "--state-dir", str(state), "--config", str(config),
                          log=tmp_path / "serve.log")
    try:
        yield server
    finally:
        server.stop()


def test_one_users_heavy_sql_does_not_refuse_another_users_light_sql(fair_server):
    """Alice loops heavy SQL on two connections (each query runs to its 2 s deadline); without
    fair shares she would hold both of the budget's slots and Bob's queries would be refused."""
    stop = threading.Event()
    alice_errors: list[Exception] = []

    def heavy() -> None:
        client = flight.connect(fair_server.uri)
        try:
            while not stop.is_set():
                try:
                    _query(client, ALICE_TOKEN, ENDLESS)
                except flight.FlightError as err:
                    alice_errors.append(err)
        finally:
            client.close()

    loops = [threading.Thread(target=heavy, daemon=True) for _ in range(2)]
    for loop in loops:
        loop.start()
    bob = flight.connect(fair_server.uri)
    try:
        poll(lambda: any("sql_queries_per_user" in str(err) for err in alice_errors), 30, "alice past her share")
        answers = [_query(bob, BOB_TOKEN, f"SELECT {i} AS i") for i in range(8)]
        assert answers == [[{"i": i}] for i in range(8)]
    finally:
        stop.set()
        for loop in loops:
            loop.join(30)
        bob.close()
    busy = [err for err in alice_errors if "sql_queries_per_user" in str(err)]
    assert busy and all(isinstance(err, flight.FlightUnavailableError) for err in busy)
    hint = decode(busy[0].extra_info)
    assert hint is not None and hint.limit == "sql_queries_per_user" and hint.retry_after > 0
    assert all(isinstance(err, (flight.FlightUnavailableError, flight.FlightTimedOutError)) for err in alice_errors)


def test_a_printf_width_from_an_argument_is_refused_by_a_real_server(fair_server):
    client = flight.connect(fair_server.uri)
    try:
        with pytest.raises(pa.ArrowInvalid, match=r"max_sql_generated_values .*printf takes a width"):
            _query(client, BOB_TOKEN, "SELECT length(printf('%*d', 100000000, 1))")
        assert _query(client, BOB_TOKEN, "SELECT printf('%5d', 1) AS p") == [{"p": "    1"}]
    finally:
        client.close()
