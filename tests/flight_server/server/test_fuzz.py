"""Property-based fuzzing of everything a client can send: commands, tickets, action bodies and
SQL through the DB-API. Each input must end in a status code of the contract with a clean
message (no traceback, no server path), never an INTERNAL error, and the server must keep
serving. Bounded: a few thousand inputs in all, well under a minute."""

from __future__ import annotations

import json
import string

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from google.protobuf import any_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flight_server.client.sql import dbapi
from flight_server.protocol import MESSAGES, pack
from flight_server.protocol import sql as fsql
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from tests.support.servers import running_server

TABLE_NAME = "sample_table/cow/v9_txns_simple_meta"
TABLE = "fuzz.txns"
#: the statuses of the contract a client may get back for a bad request
CONTRACT = (pa.ArrowInvalid, pa.ArrowKeyError, pa.ArrowNotImplementedError, flight.FlightUnauthenticatedError,
            flight.FlightUnauthorizedError)
LEAKS = ("Traceback", 'File "', "/work/", "site-packages")
FUZZ = settings(max_examples=500, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def server(tmp_path_factory, fixture_table):
    registry = Registry("sqlite://")
    registry.register_table(TABLE, fixture_table(TABLE_NAME))
    state = tmp_path_factory.mktemp("fuzz-state")
    config = ServerConfig(port=0, state_dir=str(state), secret="ef" * 32, allowed_roots=[str(state)])
    with running_server(config, registry=registry) as srv:
        yield srv


@pytest.fixture(scope="module")
def tickets(client):
    info = client.get_flight_info(flight.FlightDescriptor.for_path(*TABLE.split(".")))
    return [e.ticket.ticket for e in info.endpoints]


def _check(call) -> None:
    try:
        call()
    except CONTRACT as err:
        text = str(err)
        assert not any(leak in text for leak in LEAKS), text


def _alive(client) -> None:
    body = next(iter(client.do_action(flight.Action("health", b"{}")))).body.to_pybytes()
    assert json.loads(body)["status"] == "ok"


# -- strategies ------------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                    st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                             st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                           max_leaves=20)
columns = st.sampled_from(["txn_id", "amount", "region", "_hoodie_commit_time", "nope", "", "a.b", "\x00"])
ops = st.sampled_from(["=", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null", "like"])
filters = st.one_of(
    st.tuples(columns, ops).map(list),
    st.tuples(columns, ops, st.one_of(scalars, st.lists(scalars, max_size=5))).map(list),
    json_values,
)
instants = st.one_of(st.text(string.digits, min_size=1, max_size=20), st.text(max_size=12), st.integers())
commands = st.fixed_dictionaries(
    {"table": st.one_of(st.just(TABLE), st.text(max_size=12), st.just("no.such"))},
    optional={
        "columns": st.one_of(st.lists(columns, max_size=4), json_values),
        "filters": st.one_of(st.lists(filters, max_size=4), json_values),
        "query_type": st.one_of(st.sampled_from(["snapshot", "read_optimized", "incremental"]), st.text(max_size=8)),
        "as_of": instants,
        "start": instants,
        "end": instants,
        "limit": st.one_of(st.integers(-5, 2**64), json_values),
        "extra": json_values,
    },
)
command_bytes = st.one_of(commands.map(lambda d: json.dumps(d).encode()), json_values.map(lambda v: json.dumps(v).encode()),
                          st.binary(max_size=64))


@FUZZ
@given(body=command_bytes, use_schema=st.booleans())
def test_fuzz_commands(client, tickets, body, use_schema):
    descriptor = flight.FlightDescriptor.for_command(body)
    _check(lambda: client.get_schema(descriptor) if use_schema else client.get_flight_info(descriptor))


@FUZZ
@given(data=st.data())
def test_fuzz_tickets(client, tickets, data):
    real = data.draw(st.sampled_from(tickets))
    kind = data.draw(st.sampled_from(["random", "prefixed", "flipped", "truncated"]))
    if kind == "random":
        ticket = data.draw(st.binary(max_size=128))
    elif kind == "prefixed":
        ticket = b"hf1." + data.draw(st.binary(max_size=64)) + b"." + data.draw(st.binary(max_size=64))
    elif kind == "flipped":
        i = data.draw(st.integers(0, len(real) - 1))
        ticket = real[:i] + bytes([real[i] ^ data.draw(st.integers(1, 255))]) + real[i + 1:]
    else:
        ticket = real[: data.draw(st.integers(0, len(real) - 1))]
    _check(lambda: client.do_get(flight.Ticket(ticket)).read_all())


actions = st.sampled_from(["list-namespaces", "list-tables", "register-table", "refresh-table", "table-info",
                           "health", "unregister-table", "nope", ""])
action_bodies = st.one_of(
    st.fixed_dictionaries({}, optional={"table": st.one_of(st.text(max_size=10), st.just("no.such")),
                                        "uri": st.one_of(st.text(max_size=20), st.sampled_from(
                                            ["reference://", "simplecache::/tmp", "http://127.0.0.1:1/x",
                                             "/etc", "file:///..", "s3://b/../x", "memory://x"])),
                                        "namespace": st.text(max_size=5),
                                        "storage_options": json_values, "properties": json_values,
                                        "replace": json_values}).map(lambda d: json.dumps(d).encode()),
    st.binary(max_size=64),
)


@FUZZ
@given(action=actions, body=action_bodies)
def test_fuzz_actions(client, action, body):
    if action == "unregister-table" and TABLE.encode() in body:
        return  # would remove the table the other fuzzers read
    _check(lambda: list(client.do_action(flight.Action(action, body))))


fragments = st.sampled_from([
    "SELECT", "*", "FROM", TABLE, "fuzz.nope", "WHERE", "amount", ">", "1", "region", "=", "'x'", "AND", "OR",
    "GROUP BY", "ORDER BY", "LIMIT", "JOIN", "ON", "(", ")", ",", ";", "read_csv('/etc/passwd')",
    "glob('/*')", "ATTACH", "INSTALL", "httpfs", "COPY", "TO", "'/tmp/x'", "UNION", "WITH", "AS", "t", "count(*)",
    "IN", "NULL", "IS", "NOT", "--", "/*", "*/", "$1", "?", "%s", "'", '"'
])
sql = st.one_of(st.lists(fragments, min_size=1, max_size=12).map(" ".join), st.text(max_size=40))


@FUZZ
@given(statement=sql)
def test_fuzz_sql(server, statement):
    conn = dbapi.connect(f"grpc://127.0.0.1:{server.port}")
    try:
        cursor = conn.cursor()
        try:
            cursor.execute(statement)
            cursor.fetchall()
        except dbapi.InternalError:
            raise
        except dbapi.Error as err:
            assert not any(leak in str(err) for leak in LEAKS), str(err)
    finally:
        conn.close()


@FUZZ
@given(statement=sql)
def test_fuzz_flight_sql_statements(client, statement):
    """SQL through Flight SQL's CommandStatementQuery (planned, and read when it is one endpoint)."""

    def run() -> None:
        info = client.get_flight_info(flight.FlightDescriptor.for_command(
            pack(fsql.CommandStatementQuery(query=statement))))
        if len(info.endpoints) == 1:
            client.do_get(info.endpoints[0].ticket).read_all()

    _check(run)


sql_types = st.sampled_from(sorted(MESSAGES) + ["arrow.flight.protocol.sql.CommandStatementIngest", "x.y"])


@FUZZ
@given(type_name=sql_types, value=st.binary(max_size=64), where=st.sampled_from(["info", "schema", "ticket", "action"]),
       action=st.sampled_from(["CreatePreparedStatement", "ClosePreparedStatement", "BeginTransaction"]))
def test_fuzz_flight_sql_messages(client, type_name, value, where, action):
    """Any Flight SQL message type with arbitrary bytes, as a command, a ticket or an action body."""
    data = any_pb2.Any(type_url="type.googleapis.com/" + type_name, value=value).SerializeToString()
    descriptor = flight.FlightDescriptor.for_command(data)
    calls = {
        "info": lambda: client.get_flight_info(descriptor),
        "schema": lambda: client.get_schema(descriptor),
        "ticket": lambda: client.do_get(flight.Ticket(data)).read_all(),
        "action": lambda: list(client.do_action(flight.Action(action, data))),
    }
    _check(calls[where])


def test_server_still_serves_after_fuzzing(client, tickets):
    _alive(client)
    assert client.do_get(flight.Ticket(tickets[0])).read_all().num_rows > 0
