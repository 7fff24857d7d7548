"""Every table a Flight SQL query touches is authorized when it is planned and again when its
ticket is read; listings go through ``readable``; tickets and prepared statements serve only the
user they were issued to. A server whose authorization seam records the calls stands in for the
real policy."""

from __future__ import annotations

import tempfile
import threading

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.client.sql.flightsql import like_literal
from flight_server.protocol import pack, sql, unpack
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.service import HudiFlightServer, _message_sized
from tests.support.servers import identifier

A = identifier("sample_table/cow/v9_txns_simple_meta")
B = identifier("sample_table/mor/avro/v9_txns_simple_meta")
DENIED = identifier("sample_table/cow/v6_nonpartitioned")
SECRET = "secret"  # a namespace the caller holds no right in: a merge-on-read and a copy-on-write table


class RecordingServer(HudiFlightServer):
    """Authorization seam (``Queries.authorize``) that records (right, table) and denies reads of ``DENIED``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, str | None]] = []
        self.user = "alice"
        self.app.queries.authorize = self.authorize
        self.app.queries.readable = self.readable

    def authorize(self, context, right, table=None):
        self.calls.append((right, table))
        if table == DENIED or (table or "").startswith(SECRET + "."):
            raise flight.FlightUnauthorizedError(f"{self.user} may not read {table}")
        return self.user

    def readable(self, context, tables):
        return [t for t in tables if t != DENIED and not t.startswith(SECRET + ".")]


@pytest.fixture(scope="module")
def server(fixture_table, tmp_path_factory):
    registry = Registry("sqlite://")
    for name in ("sample_table/cow/v9_txns_simple_meta", "sample_table/mor/avro/v9_txns_simple_meta",
                 "sample_table/cow/v6_nonpartitioned"):
        registry.register_table(identifier(name), fixture_table(name))
    registry.register_table(f"{SECRET}.mor_only", fixture_table("sample_table/mor/avro/v9_txns_simple_meta"))
    registry.register_table(f"{SECRET}.cow_only", fixture_table("sample_table/cow/v6_nonpartitioned"))
    config = ServerConfig(
        port=0,
        state_dir=str(tmp_path_factory.mktemp("auth-state")),
        secret="ef" * 32,
        allowed_roots=[tempfile.gettempdir()],  # where the fixtures are extracted
    )
    srv = RecordingServer(config, registry=registry)
    thread = threading.Thread(target=srv.serve, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    thread.join(10)


@pytest.fixture
def client(server):
    server.calls.clear()
    server.user = "alice"
    c = flight.connect(f"grpc://127.0.0.1:{server.port}")
    yield c
    c.close()


def _info(client, query: str) -> flight.FlightInfo:
    return client.get_flight_info(flight.FlightDescriptor.for_command(pack(sql.CommandStatementQuery(query=query))))


def test_every_table_is_authorized_at_planning_and_reading(server, client):
    info = _info(client, f"SELECT a.txn_id FROM {A} a JOIN {B} b ON a.txn_id = b.txn_id")
    assert {("read", A), ("read", B)} <= set(server.calls)
    server.calls.clear()
    assert client.do_get(info.endpoints[0].ticket).read_all().num_rows > 0
    assert {("read", A), ("read", B)} <= set(server.calls)


def test_denied_table_is_refused_and_hidden(server, client):
    with pytest.raises(flight.FlightUnauthorizedError):
        _info(client, f"SELECT count(*) FROM {DENIED}")
    tables = client.get_flight_info(flight.FlightDescriptor.for_command(pack(sql.CommandGetTables())))
    listed = client.do_get(tables.endpoints[0].ticket).read_all()
    names = {f"{ns}.{t}" for ns, t in zip(listed.column("db_schema_name").to_pylist(),
                                           listed.column("table_name").to_pylist())}
    assert A in names and B in names and DENIED not in names


def test_tickets_serve_only_their_user(server, client):
    info = _info(client, f"SELECT region, count(*) FROM {A} GROUP BY region")
    server.user = "bob"
    with pytest.raises(flight.FlightUnauthorizedError, match="another user"):
        client.do_get(info.endpoints[0].ticket).read_all()


def test_prepared_statements_serve_only_their_user(server, client):
    result = next(iter(client.do_action(flight.Action("CreatePreparedStatement", pack(
        sql.ActionCreatePreparedStatementRequest(query=f"SELECT * FROM {A}"))))))
    handle = unpack(result.body.to_pybytes()).prepared_statement_handle
    server.user = "bob"
    command = flight.FlightDescriptor.for_command(pack(sql.CommandPreparedStatementQuery(
        prepared_statement_handle=handle)))
    with pytest.raises(flight.FlightUnauthorizedError, match="another user"):
        client.get_flight_info(command)


def test_a_prepared_statement_is_authorized_at_every_execution(server, client, monkeypatch):
    from tests.support.flight_sql import bind

    result = next(iter(client.do_action(flight.Action("CreatePreparedStatement", pack(
        sql.ActionCreatePreparedStatementRequest(query=f"SELECT * FROM {A} WHERE txn_id = ?"))))))
    handle = unpack(result.body.to_pybytes()).prepared_statement_handle

    def execute(key: str) -> flight.FlightInfo:
        bound = bind(client, handle, pa.record_batch([pa.array([key])], names=["p0"]))
        return client.get_flight_info(flight.FlightDescriptor.for_command(pack(sql.CommandPreparedStatementQuery(
            prepared_statement_handle=bound))))

    for key in ("TXN-1", "TXN-2"):  # the statement's analysis is kept and reused
        server.calls.clear()
        execute(key)
        assert ("read", A) in server.calls
    authorize = server.app.queries.authorize

    def revoked(context, right, table=None):
        if table == A:
            raise flight.FlightUnauthorizedError(f"alice may no longer read {table}")
        return authorize(context, right, table)

    monkeypatch.setattr(server.app.queries, "authorize", revoked)
    with pytest.raises(flight.FlightUnauthorizedError, match="no read right"):
        execute("TXN-3")


def test_large_batches_are_cut_for_generic_grpc_clients():
    batch = pa.record_batch([pa.array(["x" * 1000] * 30_000)], names=["s"])  # ~30 MB
    parts = list(_message_sized(iter([batch])))
    assert len(parts) > 3 and all(p.nbytes <= 9 << 20 for p in parts)
    assert pa.Table.from_batches(parts).equals(pa.Table.from_batches([batch]))


def test_count_tickets_are_authorized_again(server, client):
    info = _info(client, f"SELECT count(*) FROM {A}")
    server.calls.clear()
    assert client.do_get(info.endpoints[0].ticket).read_all().num_rows == 1
    assert server.calls == [("read", A)]


@pytest.mark.parametrize("name", ["mor_only", "cow_only", "missing", "mor_only_ro", "cow_only_ro", "missing_ro",
                                  "mor_only$timeline", "cow_only$file_groups", "missing$timeline", "mor_only$nothing"])
def test_missing_and_not_yours_get_one_answer(client, name):
    """Existing or not, merge-on-read or not, the table or a metadata table of it: a caller
    without the right learns nothing."""
    with pytest.raises(flight.FlightUnauthorizedError) as caught:
        _info(client, f'SELECT * FROM {SECRET}."{name}"')
    assert str(caught.value).split(". Detail")[0] == f"no read right on table {SECRET}.{name}"


def test_a_metadata_table_is_authorized_like_its_table(server, client):
    namespace, table = A.split(".")
    info = _info(client, f'SELECT * FROM {namespace}."{table}$timeline"')
    assert ("read", A) in server.calls
    server.calls.clear()
    assert client.do_get(info.endpoints[0].ticket).read_all().num_rows > 0
    assert server.calls == [("read", A)]
    denied_namespace, denied = DENIED.split(".")
    with pytest.raises(flight.FlightUnauthorizedError):
        _info(client, f'SELECT * FROM {denied_namespace}."{denied}$commits"')
    listed = client.get_flight_info(flight.FlightDescriptor.for_command(pack(sql.CommandGetTables(
        db_schema_filter_pattern=denied_namespace, table_name_filter_pattern=like_literal(f"{denied}$commits")))))
    assert client.do_get(listed.endpoints[0].ticket).read_all().num_rows == 0


@pytest.mark.parametrize("name", ["mor_only", "missing"])
def test_unqualified_names_see_only_readable_tables(client, name):
    with pytest.raises(pa.ArrowKeyError) as caught:  # NOT_FOUND
        _info(client, f"SELECT * FROM {name}")
    told = str(caught.value).split(". Detail")[0]
    # the same words for a table the caller may not read and a missing one: the hint lists only
    # namespaces the caller may read
    assert told.endswith(f"table {name} not found (namespaces: sample_table_cow, sample_table_mor_avro)"), told


def test_primary_keys_of_missing_and_ungranted_tables_are_alike(client):
    rows = []
    for table in ("mor_only", "missing"):
        info = client.get_flight_info(flight.FlightDescriptor.for_command(
            pack(sql.CommandGetPrimaryKeys(db_schema=SECRET, table=table))))
        rows.append(client.do_get(info.endpoints[0].ticket).read_all().num_rows)
    assert rows == [0, 0]
