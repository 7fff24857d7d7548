"""Statements analysed once: bound values spliced as tokens analyse like the same values written
in the text, a kept analysis is reused only while its tables resolve as before (the caller's
right checked every time), and a result schema is asked of the engine once per SQL and views."""

from __future__ import annotations

import pyarrow as pa
import pytest

from catalog.errors import InvalidQueryError
from flight_server.server.engine.duckdb_engine import Engine
from flight_server.server.engine.result_schemas import remembered_schema, result_schemas
from flight_server.server.engine.settings import EngineSettings
from flight_server.server.security.limits import Limits
from flight_server.server.sql.analyses import Analyses
from flight_server.server.sql.query import analyze, bind
from tests.flight_server.server.sql.resolvers import CountingResolver

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("fare", pa.float64())])


def _resolver() -> CountingResolver:
    return CountingResolver({"t": SCHEMA})


@pytest.mark.parametrize(
    ("sql", "values"),
    [
        ("SELECT * FROM ns.t WHERE id = ?", [-1]),
        ("SELECT * FROM ns.t WHERE id = - ?", [-7]),  # "- -7", never a comment
        ("SELECT name FROM ns.t WHERE name = ? /* c */ AND fare > ?", ["it's -- not a comment", 2.5]),
        ("SELECT id FROM ns.t WHERE name IN (?, ?) LIMIT ?", ["a", None, 3]),
        ("SELECT count(*) AS n FROM ns.t WHERE id BETWEEN ? AND ?", [1, 10]),
    ],
)
def test_values_spliced_as_tokens_analyse_like_the_same_values_written_out(sql, values):
    spliced = analyze(sql, _resolver(), values)
    written = analyze(bind(sql, values), _resolver())
    assert spliced == written


def test_a_parse_error_of_a_bound_statement_points_into_the_clients_text():
    sql = "SELECT * FROM ns.t WHERE id = ? AND AND"
    for value in (1, "a bound text longer than the placeholder"):
        with pytest.raises(ValueError) as err:
            analyze(sql, _resolver(), [value])
        column = sql.rindex("AND") + 1  # in the text as written, not the bound one
        assert str(err.value) == f"syntax error at line 1, column {column} near 'AND': an operand or clause is missing"


def test_a_kept_analysis_is_reused_only_while_its_tables_resolve_the_same():
    analyses, resolve = Analyses(Limits()), _resolver()
    sql = "SELECT name FROM ns.t WHERE id = ?"
    first = analyses.analyze(sql, resolve, [1])
    calls = resolve.calls
    assert analyses.analyze(sql, resolve, [1]) == first
    assert resolve.calls == calls + 1  # the reference was resolved (and its right checked) again
    assert analyses.analyze(sql, resolve, [2]) == analyze(sql, resolve, [2])  # other values: their own filters
    resolve.schemas["t"] = pa.schema([("name", pa.string()), ("id", pa.int32())])  # a new schema: other columns
    changed = analyses.analyze(sql, resolve, [1])
    assert changed != first and changed == analyze(sql, resolve, [1])
    resolve.refused = True
    with pytest.raises(PermissionError):
        analyses.analyze(sql, resolve, [1])


def test_a_statement_without_parameters_is_kept_whole():
    analyses, resolve = Analyses(Limits()), _resolver()
    sql = "SELECT name FROM ns.t WHERE id = 1"
    first = analyses.analyze(sql, resolve, None)
    assert analyses.analyze(sql, resolve, None) is first


def test_bound_values_are_kept_apart_by_their_literals():
    from decimal import Decimal

    analyses, resolve = Analyses(Limits()), _resolver()
    sql = "SELECT ? AS v FROM ns.t"
    one = analyses.analyze(sql, resolve, [Decimal("1.0")])
    other = analyses.analyze(sql, resolve, [Decimal("1.00")])  # equal values, other literals
    assert one.plan.sql != other.plan.sql
    assert analyses.analyze(sql, resolve, [True]).plan.sql != analyses.analyze(sql, resolve, [1]).plan.sql


def test_a_refused_statement_is_not_kept_and_refused_again():
    analyses = Analyses(Limits())
    for _ in range(2):
        with pytest.raises(InvalidQueryError, match="read_csv"):
            analyses.analyze("SELECT * FROM read_csv('/etc/passwd')", _resolver(), None)
    with pytest.raises(InvalidQueryError, match="1 parameter"):
        analyses.analyze("SELECT * FROM ns.t WHERE id = ?", _resolver(), [])


def test_a_template_is_tokenized_within_the_servers_token_bound():
    analyses = Analyses(Limits(max_sql_tokens=16))
    assert len(analyses.template("SELECT * FROM ns.t WHERE id = ? AND fare > ?").marks) == 2
    with pytest.raises(InvalidQueryError, match="max_sql_tokens"):
        analyses.template("SELECT " + ", ".join(["1"] * 20))


def test_a_result_schema_is_asked_of_the_engine_once_per_sql_and_view_schemas():
    engine = Engine(EngineSettings(memory_limit="256MB", memory_budget="512MB", threads=1))
    schemas = result_schemas()
    asked = []

    def schema(sql: str, views: dict[str, pa.Schema]) -> pa.Schema:
        return remembered_schema(schemas, sql, views, lambda key: asked.append(key) or engine.result_schema(sql, views))

    try:
        sql = "SELECT id + 1 AS next FROM v"
        first = schema(sql, {"v": pa.schema([("id", pa.int32())])})
        assert schema(sql, {"v": pa.schema([("id", pa.int32())])}) == first
        assert len(asked) == 1
        wider = schema(sql, {"v": pa.schema([("id", pa.int64())])})
        assert len(asked) == 2 and wider.field("next").type == pa.int64() != first.field("next").type
    finally:
        engine.stop_all()


def test_engine_sql_that_cannot_be_written_is_refused_when_it_is_needed(cursor):
    sql = "SELECT approx_top_k(name, 2) AS top FROM ns.t"
    analysis = analyze(sql, _resolver())
    assert analysis.scan is None  # the engine must run it: its SQL is asked for, and refused
    with pytest.raises(ValueError, match="unsupported SQL"):
        assert not analysis.plan.sql
    with pytest.raises(Exception, match="unsupported SQL"):  # and so over Flight SQL
        cursor.execute("SELECT approx_top_k(txn_id, 2) AS top FROM sample_table_cow.v9_txns_simple_meta")


def test_a_result_description_is_kept_per_schema_metadata_included():
    from flight_server.server.flightsql.statements import _described

    def schema(tag: str) -> pa.Schema:
        return pa.schema([pa.field("id", pa.int64(), metadata={"tag": tag})], metadata={"tag": tag})

    first, other = schema("1"), schema("2")
    assert first == other  # schemas compare without their metadata
    described = _described(first, (("ns.t", first),))
    assert _described(schema("1"), (("ns.t", first),)) is described  # kept
    for tag, result in (("1", described), ("2", _described(other, (("ns.t", other),)))):
        assert result.metadata[b"tag"] == tag.encode() and result.field("id").metadata[b"tag"] == tag.encode()
        assert result.field("id").metadata[b"ARROW:FLIGHT:SQL:TABLE_NAME"] == b"t"


def test_parameter_places_are_parsed_once_per_text_and_typed_by_the_schema_asked(monkeypatch):
    from flight_server.server.sql import parameters

    parsed = []
    original = parameters.parse_query
    monkeypatch.setattr(parameters, "parse_query", lambda *a: parsed.append(a[0]) or original(*a))
    analyses = Analyses(Limits())
    sql = "SELECT * FROM ns.t WHERE id = ? AND name LIKE ? LIMIT ?"
    places = analyses.parameter_places(sql)
    assert analyses.parameter_places(sql) is places and len(parsed) == 1
    assert parameters.parameter_types(places, lambda table: SCHEMA).types == [pa.int64(), pa.utf8(), pa.int64()]
    narrower = pa.schema([("id", pa.int32()), ("name", pa.string())])  # the table's schema now
    assert parameters.parameter_types(places, lambda table: narrower).types == [pa.int32(), pa.utf8(), pa.int64()]
    assert parameters.parameter_types(places, lambda table: narrower) == parameters.parameter_schema(
        sql, lambda table: narrower)


def test_which_catalog_statement_a_text_is_is_decided_once_per_text(monkeypatch):
    from flight_server.server.sql import analyses as analyses_module
    from flight_server.server.sql.show import DescribeTable, ShowTables

    asked = []
    original = analyses_module.catalog_statement
    monkeypatch.setattr(analyses_module, "catalog_statement", lambda *a: asked.append(a[0]) or original(*a))
    analyses = Analyses(Limits())
    for _ in range(3):
        assert analyses.catalog_statement("SHOW TABLES IN ns") == ShowTables("ns")
        assert analyses.catalog_statement("describe ns.t") == DescribeTable(None, "ns", "t")
        assert analyses.catalog_statement("SELECT * FROM ns.t WHERE id = ?") is None
    assert asked == ["SHOW TABLES IN ns", "describe ns.t", "SELECT * FROM ns.t WHERE id = ?"]
    with pytest.raises(InvalidQueryError):
        analyses.catalog_statement("SELECT (" * 200)  # what tokenizing refuses is refused here too
