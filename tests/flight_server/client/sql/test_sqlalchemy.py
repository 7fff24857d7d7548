"""SQLAlchemy dialect + DB-API driver over Arrow Flight SQL, against a real hudi-flight server
serving every fixture: inspection, queries run on the server, parameters, Superset's and pandas'
usage patterns, errors. Expectations come from ``HudiTable.read`` on the same tables."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import registry as dialect_registry

from catalog import HudiTable
from catalog.meta import META_TABLES
from flight_server.client.session import HudiFlightClient
from flight_server.client.sql import dbapi, flightsql
from flight_server.client.sql.dialect import sql_type
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.security.users import Grant
from tests.support.compare import assert_same_rows
from tests.support.fixtures import all_table_names, is_mor
from tests.support.servers import identifier, running_server

# The package is not installed in the dev checkout: register the entry point pyproject declares.
dialect_registry.register("hudi.flight", "flight_server.client.sql.dialect", "HudiFlightDialect")

TXNS = "sample_table/cow/v9_txns_simple_meta"  # txn_id key, partitioned by region
TXNS_NOMETA = "sample_table/cow/v9_txns_simple_nometa"
ALL_TYPES = "sample_table/cow/v6_nonpartitioned"
SERVED = all_table_names()  # Lance tables (Hudi 1.2) included


@pytest.fixture(scope="module")
def server(tables, tmp_path_factory):
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("state")))
    with running_server(config, registry=tables[0]) as srv:
        yield srv


@pytest.fixture(scope="module")
def engine(server):
    eng = sa.create_engine(f"hudi+flight://127.0.0.1:{server.port}")
    yield eng
    eng.dispose()


def _read(tables, name: str, **options) -> pa.Table:
    return HudiTable.open(tables[1][identifier(name)]).read(**options)


def _query(engine, sql: str, params: tuple | None = None) -> pa.Table:
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        cursor.execute(sql, params)
        return cursor.fetch_arrow_table()


def _split(name: str) -> tuple[str, str]:
    ns, table = identifier(name).split(".")
    return ns, table


# -- inspection --------------------------------------------------------------------------------


def test_inspection_lists_namespaces_tables_columns_and_keys(engine, server, tables):
    inspector = sa.inspect(engine)
    with HudiFlightClient(f"grpc://127.0.0.1:{server.port}") as client:
        assert sorted(inspector.get_schema_names()) == sorted(client.namespaces())
    expected: dict[str, set[str]] = {ns: set() for ns in inspector.get_schema_names()}
    for name in SERVED:
        ns, table = _split(name)
        expected[ns] |= {table, f"{table}_ro"} if is_mor(name) else {table}
    for ns, names in expected.items():
        assert set(inspector.get_table_names(schema=ns)) == names, ns
        # the metadata tables of each table, told as views (read-only, derived) so reflection finds them
        assert set(inspector.get_view_names(schema=ns)) == {f"{t}${kind}" for t in names - {f"{t}_ro" for t in names} for kind in META_TABLES}
    for name in SERVED:
        ns, table = _split(name)
        lib = HudiTable.open(tables[1][identifier(name)])
        columns = inspector.get_columns(table, schema=ns)
        assert [c["name"] for c in columns] == lib.schema.names, name
        assert [type(c["type"]) for c in columns] == [type(sql_type(f.type)) for f in lib.schema], name
        assert inspector.get_pk_constraint(table, schema=ns)["constrained_columns"] == lib.record_key_fields, name
    comment = inspector.get_table_comment(*reversed(_split(TXNS)))["text"]
    assert comment == "Hudi COPY_ON_WRITE table, table version 9, partitioned by region"


def test_sql_types_follow_arrow(engine):
    columns = {c["name"]: c["type"] for c in sa.inspect(engine).get_columns(*reversed(_split(ALL_TYPES)))}
    assert isinstance(columns["id"], sa.Integer) and isinstance(columns["longField"], sa.BigInteger)
    assert isinstance(columns["decimalField"], sa.Numeric)
    assert (columns["decimalField"].precision, columns["decimalField"].scale) == (10, 5)
    assert isinstance(columns["timestampField"], sa.DateTime) and columns["timestampField"].timezone
    assert isinstance(columns["dateField"], sa.Date) and isinstance(columns["isActive"], sa.Boolean)
    assert isinstance(columns["arrayField"], sa.ARRAY) and isinstance(columns["structField"], sa.JSON)
    assert isinstance(columns["binaryField"], sa.LargeBinary) and isinstance(columns["doubleField"], sa.Double)


def test_reflected_table_has_table_and_unknown_table(engine):
    ns, table = _split(TXNS)
    t = sa.Table(table, sa.MetaData(), schema=ns, autoload_with=engine)
    assert [c.name for c in t.primary_key.columns] == ["txn_id"]
    inspector = sa.inspect(engine)
    assert inspector.has_table(table, schema=ns) and not inspector.has_table("missing", schema=ns)
    with pytest.raises(sa.exc.NoSuchTableError):
        inspector.get_columns("missing", schema=ns)


def test_metadata_tables_are_described_and_queried_but_not_listed(engine, tables):
    ns, table = _split(TXNS)
    inspector = sa.inspect(engine)
    assert not any("$" in name for name in inspector.get_table_names(schema=ns))
    library = HudiTable.open(tables[1][identifier(TXNS)])
    for meta in ("timeline", "file_groups", "health"):
        expected = library.metadata_table(meta)
        columns = inspector.get_columns(f"{table}${meta}", schema=ns)
        assert [c["name"] for c in columns] == expected.schema.names, meta
        assert [type(c["type"]) for c in columns] == [type(sql_type(f.type)) for f in expected.schema], meta
        assert inspector.has_table(f"{table}${meta}", schema=ns)
    assert not inspector.has_table(f"{table}$snapshots", schema=ns)
    file_groups = sa.Table(f"{table}$file_groups", sa.MetaData(), schema=ns, autoload_with=engine)
    assert not file_groups.primary_key.columns  # the table's key is not its metadata table's
    with engine.connect() as conn:
        rows = conn.execute(sa.select(file_groups.c.file_id, file_groups.c.base_file_rows)
                            .order_by(file_groups.c.file_id)).fetchall()
    expected_rows = library.metadata_table("file_groups").sort_by("file_id")
    assert [tuple(r) for r in rows] == list(zip(expected_rows["file_id"].to_pylist(),
                                                expected_rows["base_file_rows"].to_pylist()))


# -- queries -----------------------------------------------------------------------------------


def test_select_where_order_by_limit(engine, tables):
    got = _query(
        engine,
        f"SELECT txn_id, amount, region FROM {identifier(TXNS)} "
        "WHERE region = 'eu' AND amount >= 100 ORDER BY txn_id DESC LIMIT 2",
    )
    full = _read(tables, TXNS)
    expected = (
        full.filter(pc.and_(pc.equal(full["region"], "eu"), pc.greater_equal(full["amount"], pa.scalar(100, full["amount"].type))))
        .sort_by([("txn_id", "descending")])
        .select(["txn_id", "amount", "region"])
        .slice(0, 2)
    )
    assert expected.num_rows == 2
    assert got.to_pylist() == expected.to_pylist()


def test_join_and_aggregates_run_on_the_server(engine, tables):
    a, b = identifier(TXNS), identifier(TXNS_NOMETA)
    body = (
        "SELECT x.region, count(*) AS n, sum(y.amount) AS total FROM {a} x JOIN {b} y ON x.txn_id = y.txn_id "
        "WHERE x.region <> 'us' GROUP BY x.region ORDER BY x.region"
    )
    got = _query(engine, body.format(a=a, b=b))
    local = duckdb.connect()
    local.register("x_t", _read(tables, TXNS))
    local.register("y_t", _read(tables, TXNS_NOMETA))
    expected = local.sql(body.format(a="x_t", b="y_t")).to_arrow_table()
    assert got.num_rows > 0
    assert got.to_pylist() == expected.to_pylist()


def test_qmark_parameters_are_bound_on_the_server(engine, tables):
    got = _query(engine, f"SELECT txn_id, amount FROM {identifier(TXNS)} WHERE region = ? AND amount > ?", ("eu", 100))
    expected = [
        {"txn_id": r["txn_id"], "amount": r["amount"]}
        for r in _read(tables, TXNS).to_pylist()
        if r["region"] == "eu" and r["amount"] > 100
    ]
    assert expected and sorted(got.to_pylist(), key=lambda r: r["txn_id"]) == sorted(expected, key=lambda r: r["txn_id"])
    # values bind in written order, whatever the nesting of the placeholders
    nested = _query(
        engine,
        f"SELECT txn_id FROM {identifier(TXNS)} WHERE (region = ? OR region = ?) AND txn_type = ? ORDER BY 1",
        ("eu", "us", "debit"),
    )
    rows = _read(tables, TXNS).to_pylist()
    assert nested["txn_id"].to_pylist() == sorted(
        r["txn_id"] for r in rows if r["region"] in ("eu", "us") and r["txn_type"] == "debit"
    )
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        with pytest.raises(dbapi.ProgrammingError, match="positional"):
            cursor.execute("SELECT 1 WHERE 1 = :x", {"x": 1})


def test_sqlalchemy_core_select_with_parameters(engine, tables):
    ns, table = _split(TXNS)
    t = sa.Table(table, sa.MetaData(), schema=ns, autoload_with=engine)
    stmt = sa.select(t.c.txn_id, t.c.region).where(t.c.region.in_(["eu", "apac"])).order_by(t.c.txn_id).limit(100)
    with engine.connect() as conn:
        got = [tuple(r) for r in conn.execute(stmt)]
    full = _read(tables, TXNS)
    keep = full.filter(pc.is_in(full["region"], pa.array(["eu", "apac"])))
    assert got == sorted(zip(keep["txn_id"].to_pylist(), keep["region"].to_pylist()))
    with engine.connect() as conn:
        page = [tuple(r) for r in conn.execute(stmt.limit(2).offset(1))]
        mixed = sa.select(t.c.txn_id).where(sa.or_(t.c.region == "eu", t.c.region == "us"), t.c.txn_type == "debit")
        debit = sorted(r[0] for r in conn.execute(mixed))
    assert page == got[1:3]
    assert debit == sorted(
        r["txn_id"] for r in full.to_pylist() if r["region"] in ("eu", "us") and r["txn_type"] == "debit"
    )


def test_scans_answer_with_splits_and_joins_with_one_server_stream(server):
    """The driver fetches what the server planned: a plain scan's weighted splits (in parallel),
    a join's single stream computed on the server."""
    ident = identifier(TXNS)
    with HudiFlightClient(f"grpc://127.0.0.1:{server.port}") as client:
        scan = flightsql.statement_plan(client, f"SELECT txn_id FROM {ident} WHERE region <> ?", ["us"])
        assert len(scan.endpoints) > 1 and all("weight" in ep.metadata for ep in scan.endpoints)
        join = flightsql.statement_plan(client, f"SELECT count(*) AS n FROM {ident} a JOIN {ident} b ON a.txn_id = b.txn_id")
        assert len(join.endpoints) == 1
        assert client.stream(join).read_all().to_pylist() == [{"n": 12}]


def test_superset_pattern_description_and_fetchmany(engine, tables):
    """What Superset does with a SQL Lab query: raw cursor, ``SELECT ... LIMIT``, description
    types, then ``fetchmany``."""
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(f"SELECT txn_id, amount, txn_datetime, is_international, txn_ts FROM {identifier(TXNS)} LIMIT 5")
        names = [d[0] for d in cursor.description]
        assert names == ["txn_id", "amount", "txn_datetime", "is_international", "txn_ts"]
        codes = {d[0]: d[1] for d in cursor.description}
        assert codes["txn_id"] == dbapi.STRING and codes["amount"] == dbapi.NUMBER
        assert codes["txn_datetime"] == dbapi.DATETIME and codes["txn_ts"] == dbapi.NUMBER
        assert codes["txn_id"] != dbapi.NUMBER
        amount = next(d for d in cursor.description if d[0] == "amount")
        assert (amount[4], amount[5]) == (15, 2)
        first = cursor.fetchmany(2)
        rest = cursor.fetchall()
        assert len(first) == 2 and len(first) + len(rest) == 5
        assert cursor.fetchone() is None
    finally:
        raw.close()


def test_fetchone_then_fetch_arrow_table_returns_the_rest(engine, tables):
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        cursor.execute(f"SELECT txn_id FROM {identifier(TXNS)} ORDER BY txn_id")
        first = cursor.fetchone()
        rest = cursor.fetch_arrow_table()
    ids = sorted(_read(tables, TXNS)["txn_id"].to_pylist())
    assert [first[0], *rest["txn_id"].to_pylist()] == ids
    assert cursor.fetch_arrow_table().num_rows == 0  # nothing left
    cursor.close()
    with pytest.raises(dbapi.InterfaceError, match="closed"):
        cursor.fetchall()


def test_pandas_read_sql(engine, tables):
    pd = pytest.importorskip("pandas")
    ident = identifier(ALL_TYPES)
    preview = pd.read_sql(f"SELECT * FROM {ident} LIMIT 100", engine)
    expected = _read(tables, ALL_TYPES)
    assert list(preview.columns) == expected.schema.names
    assert len(preview) == expected.num_rows
    counts = pd.read_sql(sa.text(f"SELECT count(*) AS n FROM {ident} WHERE id > :low"), engine, params={"low": 1})
    assert counts["n"][0] == pc.sum(pc.greater(expected["id"], 1)).as_py()
    columns = ["txn_id", "amount", "region", "is_international"]
    frame = pd.read_sql(f"SELECT {', '.join(columns)} FROM {identifier(TXNS)} ORDER BY txn_id", engine, coerce_float=False)
    library = _read(tables, TXNS, columns=columns).sort_by("txn_id")
    assert frame.to_dict("records") == library.to_pylist()


def test_every_served_table_selects_like_the_library(engine, tables):
    for name in SERVED:
        got = _query(engine, f"SELECT * FROM {identifier(name)}")
        expected = _read(tables, name)
        assert_same_rows(got, expected, name)


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql", ["DELETE FROM cow.t", "INSERT INTO a.b VALUES (1)", "DROP TABLE a.b", "CREATE TABLE x (a INT)"]
)
def test_non_select_is_refused_with_the_servers_message(engine, sql):
    with engine.connect() as conn:
        with pytest.raises((sa.exc.ProgrammingError, sa.exc.NotSupportedError), match="read-only"):
            conn.execute(sa.text(sql))


@pytest.mark.parametrize(
    "sql", ["SELECT * FROM read_csv('/etc/passwd')", "SELECT * FROM '/etc/passwd'", "ATTACH '/tmp/x.db' AS x",
            "INSTALL httpfs", "COPY (SELECT 1) TO '/tmp/hudi-flight-attack.csv'"],
)
def test_sql_cannot_reach_files(engine, sql):
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        with pytest.raises(dbapi.Error):
            cursor.execute(sql)
            cursor.fetchall()


def test_unknown_table_is_a_programming_error(engine):
    with engine.connect() as conn:
        with pytest.raises(sa.exc.ProgrammingError, match="missing"):
            conn.execute(sa.text("SELECT * FROM nope.missing"))


def test_bearer_token_from_the_url(tables, tmp_path):
    token = "static-token-of-the-sql-reader"
    config = ServerConfig(port=0, state_dir=str(tmp_path), tokens={token: "sql-reader"})
    registry = Registry("sqlite://")  # its own catalog: the users made here must not reach the shared server
    registry.register_table(identifier(TXNS), tables[1][identifier(TXNS)])
    with running_server(config, registry=registry) as srv:
        srv.app.users.grant("sql-reader", Grant.parse("read", "*"))
        with pytest.raises(dbapi.OperationalError, match="refused"):
            dbapi.connect(f"grpc://127.0.0.1:{srv.port}")
        for url in (f"hudi+flight://:{token}@127.0.0.1:{srv.port}", f"hudi+flight://127.0.0.1:{srv.port}?token={token}"):
            engine = sa.create_engine(url)
            try:
                assert _split(TXNS)[0] in sa.inspect(engine).get_schema_names()
            finally:
                engine.dispose()
        # a user and password in the URL log in with the basic-auth handshake
        srv.app.users.add_user("sql-user", "sql-user-password")
        srv.app.users.grant("sql-user", Grant.parse("read", _split(TXNS)[0]))
        srv.app.access.forget()
        engine = sa.create_engine(f"hudi+flight://sql-user:sql-user-password@127.0.0.1:{srv.port}")
        try:
            assert sa.inspect(engine).get_schema_names() == [_split(TXNS)[0]]
            with engine.connect() as conn:
                count = conn.exec_driver_sql(f"SELECT count(*) FROM {identifier(TXNS)}").scalar()
            assert count == HudiTable.open(tables[1][identifier(TXNS)]).read().num_rows
        finally:
            engine.dispose()


def test_polars_read_database_over_the_driver(server, tables):
    """Polars takes the Arrow result of the DB-API cursor (``fetch_arrow_table``) as is."""
    pl = pytest.importorskip("polars")
    conn = dbapi.connect(f"grpc://127.0.0.1:{server.port}")
    try:
        frame = pl.read_database(
            f"SELECT txn_id, amount FROM {identifier(TXNS)} WHERE region = ? ORDER BY txn_id",
            connection=conn,
            execute_options={"parameters": ("eu",)},
        )
    finally:
        conn.close()
    expected = _read(tables, TXNS, columns=["txn_id", "amount"], filters=[("region", "=", "eu")]).sort_by("txn_id")
    assert frame.to_arrow().cast(expected.schema).to_pylist() == expected.to_pylist()
