"""Flight SQL with a plain ``pyarrow.flight`` client: result schemas field by field, statements
without ADBC, refusals, UNIMPLEMENTED commands, and signed, expiring, unforgeable tickets and
prepared-statement handles."""

from __future__ import annotations

import time

import adbc_driver_manager
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from google.protobuf import any_pb2

from catalog.hudi_table import HudiTable
from flight_server.protocol import pack, sql, unpack
from flight_server.server.flightsql import schemas
from flight_server.server.query.tickets import PreparedHandle
from flight_server.server.security.tickets import TicketSigner
from tests.support.compare import assert_same_rows
from tests.support.flight_sql import bind

TABLE = "sample_table_cow.v9_txns_simple_meta"
LEAKS = ("Traceback", 'File "', "/work/", "site-packages", "/tmp/")


@pytest.fixture(scope="module")
def client(sql_server):
    c = flight.connect(f"grpc://127.0.0.1:{sql_server.port}")
    yield c
    c.close()


def _command(message) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(pack(message))


def _fetch(client, message) -> pa.Table:
    info = client.get_flight_info(_command(message))
    parts = [client.do_get(ep.ticket).read_all() for ep in info.endpoints]
    return pa.concat_tables(parts) if parts else info.schema.empty_table()


@pytest.mark.parametrize("message, schema", [
    (sql.CommandGetCatalogs(), schemas.CATALOGS),
    (sql.CommandGetDbSchemas(), schemas.DB_SCHEMAS),
    (sql.CommandGetTables(), schemas.TABLES),
    (sql.CommandGetTables(include_schema=True, db_schema_filter_pattern="sample_table_cow"), schemas.TABLES_WITH_SCHEMA),
    (sql.CommandGetTableTypes(), schemas.TABLE_TYPES),
    (sql.CommandGetPrimaryKeys(db_schema="sample_table_cow", table="v9_txns_simple_meta"), schemas.PRIMARY_KEYS),
    (sql.CommandGetXdbcTypeInfo(), schemas.XDBC_TYPE_INFO),
    (sql.CommandGetSqlInfo(), schemas.SQL_INFO),
    # Hudi tables have no foreign keys: the commands answer empty results (JDBC tools call them)
    (sql.CommandGetImportedKeys(db_schema="sample_table_cow", table="v9_txns_simple_meta"), schemas.FOREIGN_KEYS),
    (sql.CommandGetExportedKeys(table="x"), schemas.FOREIGN_KEYS),
    (sql.CommandGetCrossReference(pk_table="x", fk_table="y"), schemas.FOREIGN_KEYS),
])
def test_catalog_results_have_the_specified_schema(client, message, schema):
    info = client.get_flight_info(_command(message))
    assert info.schema.equals(schema, check_metadata=True)
    assert client.get_schema(_command(message)).schema.equals(schema)
    result = _fetch(client, message)
    assert result.schema.equals(schema) and (result.num_rows > 0) == (schema is not schemas.FOREIGN_KEYS)
    result.validate(full=True)


def test_spec_schemas_field_by_field():
    assert [(f.name, f.nullable) for f in schemas.TABLES_WITH_SCHEMA] == [
        ("catalog_name", True), ("db_schema_name", True), ("table_name", False), ("table_type", False),
        ("table_schema", False)]
    assert schemas.SQL_INFO.field("info_name").type == pa.uint32()
    value = schemas.SQL_INFO.field("value").type
    assert value.mode == "dense" and [value.field(i).name for i in range(value.num_fields)] == [
        "string_value", "bool_value", "bigint_value", "int32_bitmask", "string_list", "int32_to_int32_list_map"]


def test_sql_info_values(client):
    rows = {r["info_name"]: r["value"] for r in _fetch(client, sql.CommandGetSqlInfo(info=[0, 3, 4, 5, 8, 9, 504])).to_pylist()}
    assert rows == {0: "hudi-flight", 3: True, 4: True, 5: False, 8: 0, 9: False, 504: '"'}


def test_tables_with_schema_and_primary_keys(client, sql_tables):
    result = _fetch(client, sql.CommandGetTables(include_schema=True, db_schema_filter_pattern="sample%cow",
                                                 table_name_filter_pattern="v9_txns_simple_meta"))
    assert result.column("table_name").to_pylist() == ["v9_txns_simple_meta"]
    schema = pa.ipc.read_schema(pa.py_buffer(result.column("table_schema")[0].as_py()))
    assert schema.names == HudiTable.open(sql_tables[1][TABLE]).schema.names
    keys = _fetch(client, sql.CommandGetPrimaryKeys(db_schema="sample_table_cow", table="v9_txns_simple_meta"))
    assert keys.select(["column_name", "key_sequence"]).to_pylist() == [{"column_name": "txn_id", "key_sequence": 1}]
    assert _fetch(client, sql.CommandGetTables(table_types=["VIEW"])).num_rows == 0
    assert _fetch(client, sql.CommandGetDbSchemas(catalog="other")).num_rows == 0


def test_statement_query_with_a_plain_client(client, sql_tables):
    ours = _fetch(client, sql.CommandStatementQuery(query=f"SELECT * FROM {TABLE} WHERE region = 'us'"))
    expected = HudiTable.open(sql_tables[1][TABLE]).read(filters=[("region", "=", "us")])
    assert_same_rows(ours, expected, exact_types=True)
    # a scan answers with the JSON path's hf1 split tickets
    info = client.get_flight_info(_command(sql.CommandStatementQuery(query=f"SELECT * FROM {TABLE}")))
    assert all(ep.ticket.ticket.startswith(b"hf1.") for ep in info.endpoints)


def test_json_commands_still_work(client):
    info = client.get_flight_info(flight.FlightDescriptor.for_command(b'{"table": "%s"}' % TABLE.encode()))
    assert info.endpoints and info.endpoints[0].ticket.ticket.startswith(b"hf1.")


def _status(call) -> Exception:
    with pytest.raises(Exception) as caught:
        call()
    text = str(caught.value)
    assert not any(leak in text for leak in LEAKS), text
    return caught.value


@pytest.mark.parametrize("query, error, words", [
    ("CREATE TABLE x (a INT)", flight.FlightError, "CREATE"),
    ("DROP TABLE sample_table_cow.v6_nonpartitioned", flight.FlightError, "DROP"),
    ("INSERT INTO sample_table_cow.v6_nonpartitioned VALUES (1)", flight.FlightError, "INSERT"),
    ("DELETE FROM sample_table_cow.v6_nonpartitioned", flight.FlightError, "DELETE"),
    ("COPY sample_table_cow.v6_nonpartitioned TO '/tmp/x.csv'", flight.FlightError, "COPY"),
    ("ATTACH 'x.db' AS y", flight.FlightError, "ATTACH"),
    ("INSTALL httpfs", flight.FlightError, "INSTALL"),
    ("LOAD httpfs", flight.FlightError, "LOAD"),
    ("PRAGMA version", flight.FlightError, "PRAGMA"),
    ("SET memory_limit = '10GB'", flight.FlightError, "SET"),
    ("SELECT * INTO t2 FROM sample_table_cow.v6_nonpartitioned", flight.FlightError, "INTO"),
    ("SELECT * FROM read_csv('/etc/passwd')", flight.FlightError, "read_csv"),
    ("SELECT * FROM read_parquet('/etc/x.parquet')", flight.FlightError, "read_parquet"),
    ("SELECT * FROM glob('/etc/*')", flight.FlightError, "glob"),
    ("SELECT read_blob('/etc/passwd')", flight.FlightError, "read_blob"),
    ("SELECT getenv('HOME')", flight.FlightError, "getenv"),
    ("SELECT * FROM range(10)", flight.FlightError, "range"),
    ("SELECT * FROM '/etc/passwd'", flight.FlightError, "not found"),
    ("SELECT * FROM sample_table_cow.v6_nonpartitioned FOR UPDATE", flight.FlightError, "FOR UPDATE"),
    ("SELECT * FROM sample_table_cow.v6_nonpartitioned FOR VERSION AS OF 3", flight.FlightError, "VERSION"),
    ("SELECT * FROM hudi_table_changes('sample_table_cow.v6_nonpartitioned', 'cdc', '20240101000000000')",
     flight.FlightError, "table sample_table_cow.v6_nonpartitioned is not a CDC table"),  # as served
    ("SELECT * FROM hudi_table_changes('sample_table_cow.v6_nonpartitioned', 'snapshot', '20240101000000000')",
     flight.FlightError, "'latest_state' and 'cdc'"),
    ("SELECT * FROM sample_table_cow.v6_nonpartitioned_ro", flight.FlightError, "not found"),
    ("SELECT * FROM nope.nope", flight.FlightError, "not found"),
    ("SELECT 1; SELECT 2", flight.FlightError, "one statement"),
    ("SELECT * FROM sample_table_cow.v6_nonpartitioned WHERE a = 1 *", flight.FlightError,
     "syntax error at line 1, column 62 near '*'"),
    # deep nesting is refused before parsing (it used to cost seconds of CPU, then an INTERNAL error)
    ("SELECT " + "(" * 5000 + "1" + ")" * 5000, flight.FlightError, "nested too deeply"),
    ("SELECT * FROM sample_table_cow.v6_nonpartitioned WHERE " + "(" * 200 + "1=1" + ")" * 200,
     flight.FlightError, "128 levels"),
])
def test_refusals_name_the_clause(client, query, error, words):
    err = _status(lambda: client.get_flight_info(_command(sql.CommandStatementQuery(query=query))))
    assert isinstance(err, (pa.ArrowInvalid, pa.ArrowKeyError, pa.ArrowNotImplementedError)), err
    assert words.lower() in str(err).lower(), err


def test_unknown_table_is_not_found(client):
    err = _status(lambda: client.get_flight_info(_command(sql.CommandStatementQuery(query="SELECT * FROM a.b"))))
    assert isinstance(err, pa.ArrowKeyError)


def test_refusals_through_adbc(adbc_conn):
    cur = adbc_conn.cursor()
    try:
        for query in ("DROP TABLE sample_table_cow.v6_nonpartitioned", "SELECT * FROM read_csv('/etc/passwd')"):
            with pytest.raises(adbc_driver_manager.Error):
                cur.execute(query)
    finally:
        cur.close()


@pytest.mark.parametrize("message", [
    sql.CommandStatementUpdate(query="DELETE FROM x"),
    sql.CommandStatementQuery(query="SELECT 1", transaction_id=b"t"),
])
def test_unimplemented_commands(client, message):
    err = _status(lambda: client.get_flight_info(_command(message)))
    assert isinstance(err, pa.ArrowNotImplementedError)


def test_undeclared_flight_sql_type_is_unimplemented(client):
    wrapper = any_pb2.Any(type_url="type.googleapis.com/arrow.flight.protocol.sql.CommandStatementIngest", value=b"")
    err = _status(lambda: client.get_flight_info(flight.FlightDescriptor.for_command(wrapper.SerializeToString())))
    assert isinstance(err, pa.ArrowNotImplementedError) and "CommandStatementIngest" in str(err)
    for action in ("BeginTransaction", "CancelQuery"):
        err = _status(lambda a=action: list(client.do_action(flight.Action(a, b""))))
        assert isinstance(err, pa.ArrowNotImplementedError) and action in str(err)


def _statement_ticket(client, query: str) -> bytes:
    info = client.get_flight_info(_command(sql.CommandStatementQuery(query=query)))
    return unpack(info.endpoints[0].ticket.ticket).statement_handle


def test_forged_and_expired_statement_tickets_are_refused(client, sql_server):
    handle = _statement_ticket(client, f"SELECT region, count(*) FROM {TABLE} GROUP BY region")
    doc = sql_server.app.signer.verify(handle)
    assert doc["k"] == "sql" and doc["u"] == "anonymous" and doc["v"][0][1]["i"]  # pinned instant
    # altered payload (another query) under the right prefix, signed with another secret
    forged = TicketSigner(b"x" * 32).sign({**doc, "q": "SELECT 42"}, time.time() + 60)
    expired = sql_server.app.signer.sign(doc, time.time() - 1)
    for bad in (forged, expired, handle[:-4] + b"AAAA"):
        ticket = flight.Ticket(pack(sql.TicketStatementQuery(statement_handle=bad)))
        err = _status(lambda t=ticket: client.do_get(t).read_all())
        assert isinstance(err, flight.FlightUnauthenticatedError), err
    # a split ticket of the JSON path is no statement ticket, and the other way round
    split = client.get_flight_info(_command(sql.CommandStatementQuery(query=f"SELECT * FROM {TABLE}"))).endpoints[0]
    wrapped = flight.Ticket(pack(sql.TicketStatementQuery(statement_handle=split.ticket.ticket)))
    assert isinstance(_status(lambda: client.do_get(wrapped).read_all()), flight.FlightUnauthenticatedError)
    # one rule for every kind: a genuine ticket of another kind is refused like a forged one
    assert isinstance(_status(lambda: client.do_get(flight.Ticket(handle)).read_all()), flight.FlightUnauthenticatedError)


def test_prepared_statement_handles_are_signed(client, sql_server):
    result = next(iter(client.do_action(flight.Action(
        "CreatePreparedStatement", pack(sql.ActionCreatePreparedStatementRequest(query=f"SELECT * FROM {TABLE}"))))))
    created = unpack(result.body.to_pybytes())
    assert isinstance(created, sql.ActionCreatePreparedStatementResult)
    assert pa.ipc.read_schema(pa.py_buffer(created.dataset_schema)).names[0] == "_hoodie_commit_time"
    prepared = sql_server.app.queries.codec.redeem(created.prepared_statement_handle, (PreparedHandle,), None)
    assert prepared.sql == f"SELECT * FROM {TABLE}" and prepared.parameters is None
    forged = TicketSigner(b"y" * 32).sign({"k": "prep", "q": "SELECT 1", "u": "anonymous"}, time.time() + 60)
    for bad in (forged, b"not a handle"):
        command = _command(sql.CommandPreparedStatementQuery(prepared_statement_handle=bad))
        assert isinstance(_status(lambda c=command: client.get_flight_info(c)), flight.FlightUnauthenticatedError)
    list(client.do_action(flight.Action("ClosePreparedStatement", pack(
        sql.ActionClosePreparedStatementRequest(prepared_statement_handle=created.prepared_statement_handle)))))


def test_do_put_binds_one_parameter_row(client, sql_server):
    query = f"SELECT txn_id FROM {TABLE} WHERE region = ?"
    result = next(iter(client.do_action(flight.Action(
        "CreatePreparedStatement", pack(sql.ActionCreatePreparedStatementRequest(query=query))))))
    handle = unpack(result.body.to_pybytes()).prepared_statement_handle
    descriptor = _command(sql.CommandPreparedStatementQuery(prepared_statement_handle=handle))
    answer = bind(client, handle, pa.record_batch([pa.array(["us"])], names=["p0"]))
    bound = sql_server.app.queries.codec.redeem(answer, (PreparedHandle,), None)
    assert bound.parameter_values() == ["us"]
    two = pa.record_batch([pa.array(["us", "eu"])], names=["p0"])
    writer, reader = client.do_put(descriptor, two.schema)
    writer.write_batch(two)
    writer.done_writing()
    with pytest.raises(pa.ArrowInvalid, match="one parameter row"):
        reader.read()
        writer.close()


def test_engine_memory_limit_is_named(sql_server, client):
    from flight_server.server.engine import duckdb_engine as engine
    from flight_server.server.engine.failures import MEMORY, EngineFailure
    from flight_server.server.engine.settings import EngineSettings

    settings = EngineSettings(memory_limit="20MB", threads=1, temp_dir=None)
    db_sql = "SELECT i, md5(i::VARCHAR) AS m FROM range(3000000) t(i) ORDER BY m"
    with pytest.raises(EngineFailure, match="sql_memory_limit") as failed:
        _, batches = engine.Engine(settings).run(db_sql, {})
        for _ in batches:
            pass
    assert failed.value.kind == MEMORY and failed.value.retire  # its engine process serves no other statement


@pytest.mark.parametrize("query", [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT content FROM read_text('/etc/hostname')",
    "ATTACH '/tmp/x.db' AS x",
    "SET enable_external_access = true",
    "INSTALL httpfs",
])
def test_engine_itself_reaches_no_file(query):
    """Defence in depth: even SQL that got past the parser's refusals reaches no file in the engine."""
    from flight_server.server.engine import duckdb_engine as engine
    from flight_server.server.engine.failures import EngineFailure
    from flight_server.server.engine.settings import EngineSettings

    with pytest.raises(EngineFailure, match="SQL engine"):
        _, batches = engine.Engine(EngineSettings(memory_limit="64MB", threads=1)).run(query, {})
        list(batches)


def test_engine_read_errors_keep_their_status(client, monkeypatch):
    """When reading a table fails under the engine, the client gets that error's status (a missing
    file: NOT_FOUND, as on the JSON path), not the engine's text."""
    from catalog.plan.planner import ScanPlan
    from flight_server.server.query.queries import Queries

    def failing(self, scan, pinned):
        raise FileNotFoundError("base file vanished")
        yield  # a generator, like Queries.read

    info = client.get_flight_info(_command(sql.CommandStatementQuery(query=f"SELECT max(amount) FROM {TABLE}")))
    monkeypatch.setattr(Queries, "read", failing)
    monkeypatch.setattr(ScanPlan, "to_dataset", lambda *args: None)  # fed through Python
    err = _status(lambda: client.do_get(info.endpoints[0].ticket).read_all())
    assert isinstance(err, pa.ArrowKeyError) and "vanished" in str(err), err


def test_time_travel_on_a_cte_is_refused(client):
    query = f"WITH c AS (SELECT * FROM {TABLE}) SELECT * FROM c TIMESTAMP AS OF '20260307162440672'"
    err = _status(lambda: client.get_flight_info(_command(sql.CommandStatementQuery(query=query))))
    assert isinstance(err, pa.ArrowInvalid) and "CTE" in str(err)


@pytest.mark.parametrize("query", [
    f"SELECT * FROM {TABLE}",
    f"SELECT region, sum(amount) AS total FROM {TABLE} GROUP BY region",
    f"SELECT count(*) FROM {TABLE}",
])
def test_get_schema_of_a_statement_is_its_results(client, query):
    command = _command(sql.CommandStatementQuery(query=query))
    schema = client.get_schema(command).schema
    info = client.get_flight_info(command)
    assert schema.equals(info.schema)
    assert client.do_get(info.endpoints[0].ticket).read_all().schema.equals(schema)
