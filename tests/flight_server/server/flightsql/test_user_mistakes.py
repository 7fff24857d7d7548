"""A walk of user mistakes through every client: each error says what went wrong in the user's
words (with the names the user could have meant), and none shows a Python class name, the SQL
engine's error classes or view names, a traceback, a server path or gRPC's own text."""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as adbc
import pyarrow.flight as flight
import pytest
import sqlalchemy as sa

from flight_server.cli.main import main
from flight_server.client.session import HudiFlightClient
from flight_server.protocol import pack, sql
from tests.support.plain_errors import assert_plain
from tests.support.servers import free_port

NS = "sample_table_cow"
TABLE = f"{NS}.v6_nonpartitioned"  # a name with "_", as nearly every Hudi table's

def _adbc_error(conn, query: str) -> str:
    with conn.cursor() as cur, pytest.raises(adbc.Error) as caught:
        cur.execute(query)
        cur.fetch_arrow_table()
    return str(caught.value)


SQL_MISTAKES = [
    # (query, words the error must carry, must it fail before any endpoint is read)
    (f"SELECT ridr FROM {TABLE}", ['column "ridr" not found', f"columns of {TABLE}: id, name"], True),
    (f"SELECT * FROM {NS}.v6_nonpartitione", [f"tables of {NS}:", "v6_nonpartitioned"], True),
    ("SELECT * FROM nons.trips", ["no namespace nons", "namespaces: ", NS], True),
    (f'SELECT * FROM {NS}."v6_nonpartitioned$timelin"', ["v6_nonpartitioned$timeline", "v6_nonpartitioned$commits"],
     True),
    (f"SELECT * FROM {TABLE} WHERE id = 'abc'", ["'abc'"], True),
    (f"SELECT id + name FROM {TABLE}", ["explicit CAST"], True),
    (f"SELECT nofunc(id) FROM {TABLE}", ["function nofunc does not exist"], True),
    (f"SELECT a.idd FROM {TABLE} a JOIN {TABLE} b ON a.id = b.id", ['column "idd" not found in a', "columns of"], True),
    (f"SELECT * FROM {TABLE} ORDER BY nosuch", ['column "nosuch" not found'], True),
    (f"SELECT name, count(*) FROM {TABLE}", ["GROUP BY"], True),
    ("SELEC 1", ["syntax error"], True),
    (f"SELECT CAST(name AS INT) FROM {TABLE}", ["convert"], False),  # the data's own: told when read
]


@pytest.mark.parametrize(("query", "words", "at_prepare"), SQL_MISTAKES)
def test_adbc(adbc_conn, query, words, at_prepare):
    told = _adbc_error(adbc_conn, query)
    assert_plain(told)
    for word in words:
        assert word in told, told
    assert ("DoGet" not in told) if at_prepare else ("DoGet" in told), told


@pytest.fixture(scope="module")
def engine(sql_server):
    eng = sa.create_engine(f"hudi+flight://127.0.0.1:{sql_server.port}")
    yield eng
    eng.dispose()


@pytest.mark.parametrize(("query", "words"), [(q, w) for q, w, _ in SQL_MISTAKES[:4]])
def test_sqlalchemy(engine, query, words):
    with engine.connect() as conn, pytest.raises(sa.exc.DBAPIError) as caught:
        conn.execute(sa.text(query)).fetchall()
    told = str(caught.value.orig)
    assert_plain(told)
    for word in words:
        assert word in told, told


@pytest.fixture(scope="module")
def flight_client(sql_server):
    client = flight.connect(f"grpc://127.0.0.1:{sql_server.port}")
    yield client
    client.close()


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda c: c.get_flight_info(flight.FlightDescriptor.for_path(NS, "v6_nonpartitione")), [f"tables of {NS}"]),
        (lambda c: c.get_flight_info(flight.FlightDescriptor.for_command(b'{"table": "' + TABLE.encode() +
                                                                         b'", "columns": ["ridr"]}')), ["ridr"]),
        (lambda c: c.get_flight_info(flight.FlightDescriptor.for_command(pack(sql.CommandStatementQuery(
            query=f"SELECT ridr FROM {TABLE}")))), ['column "ridr" not found']),
        (lambda c: c.do_get(flight.Ticket(b"forged")).read_all(), ["ticket"]),
        (lambda c: list(c.do_action(flight.Action("no-such-action", b""))), ["no-such-action"]),
        (lambda c: list(c.do_action(flight.Action("list-tables", b"{not json"))), ["JSON"]),
    ],
    ids=["path-typo", "json-column", "sql-column", "forged-ticket", "unknown-action", "bad-body"],
)
def test_pyarrow_flight(flight_client, call, words):
    with pytest.raises(Exception) as caught:
        call(flight_client)
    told = str(caught.value)
    assert_plain(told)
    for word in words:
        assert word.lower() in told.lower(), told


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["read", f"{NS}.v6_nonpartitione"], [f"tables of {NS}", "v6_nonpartitioned"]),
        (["read", TABLE, "--columns", "ridr"], ["ridr"]),
        (["read", TABLE, "--filter", "ridr = 1"], ["ridr"]),
        (["read", "nons.t"], ["namespace nons does not exist"]),
    ],
)
def test_cli(sql_server, capsys, argv, words):
    code = main([*argv, "--server", f"grpc://127.0.0.1:{sql_server.port}"])
    err = capsys.readouterr().err
    assert code != 0
    assert_plain(err)
    for word in words:
        assert word in err, err


def test_connection_failures_are_one_line_without_grpc_text():
    uri = f"grpc://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectionError) as caught:
        HudiFlightClient(uri, timeout=10).tables()
    told = str(caught.value)
    assert_plain(told)
    assert "\n" not in told and "is the server running" in told, told
