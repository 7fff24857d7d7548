"""One analysis of a prepared statement for every binding of its parameters: each binding gets
exactly the analysis a fresh one would (pushed filters with their Python types, shape, engine
SQL), the statement is parsed once per kind of binding, places where a value decides the analysis
stay per binding, refusals stay refusals, and a kept analysis holds only while its tables
resolve as before (the caller's right checked every time)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from catalog.errors import InvalidQueryError
from flight_server.server.security.limits import Limits
from flight_server.server.sql import generic
from flight_server.server.sql.analyses import Analyses
from flight_server.server.sql.generic import analyze_generic, kinds
from flight_server.server.sql.query import Analysis, analyze, template
from tests.flight_server.server.sql.resolvers import CountingResolver

SCHEMA = pa.schema([("id", pa.int64()), ("uuid", pa.string()), ("fare", pa.float64()), ("ok", pa.bool_())])
OTHER = pa.schema([("id", pa.int64()), ("label", pa.string())])


def _resolver() -> CountingResolver:
    return CountingResolver({"t": SCHEMA, "u": OTHER})


def _same(ours: Analysis, fresh: Analysis) -> None:
    assert ours == fresh and ours.scan == fresh.scan and ours.count_star == fresh.count_star
    for a, b in zip(ours.plan.scans + ([ours.scan] if ours.scan else []),
                    fresh.plan.scans + ([fresh.scan] if fresh.scan else [])):
        assert [type(f[-1]) for f in a.options.filters] == [type(f[-1]) for f in b.options.filters]


KEY = "SELECT * FROM ns.t WHERE uuid = ?"
STATEMENTS = [
    (KEY, [["trip-1"], ["trip-2"], ["missing"], [None], [7], [-7], [2.5], [True], [""],
           ["x' OR '1'='1"], ["'); DROP TABLE t; --"], ["a\\' -- b"], ["é\n\t?"], ["?"]]),
    ("SELECT uuid FROM ns.t WHERE id = ? AND fare > ?", [[1, 2.5], [2, -1.5], [-3, 0.25], [None, 1.0], ["1", 2.0],
                                                         [1, 10**30], [1.5, 2.5]]),
    ("SELECT count(*) AS n FROM ns.t WHERE uuid = ?", [["a"], ["b"], [None]]),
    ("SELECT * FROM ns.t WHERE id IN (?, ?, ?)", [[1, 2, 3], [4, 5, 6], [1, "2", 3], [1, None, 3]]),
    ("SELECT * FROM ns.t WHERE id BETWEEN ? AND ? ORDER BY fare", [[1, 5], [-5, -1]]),
    ("SELECT * FROM ns.t WHERE uuid = ? OR uuid = ?", [["a", "b"], ["c", "d"]]),
    ("SELECT * FROM ns.t WHERE (uuid = ?) AND ok = ?", [["a", True], ["b", False], ["c", None]]),
    ("SELECT t.uuid, u.label FROM ns.t t JOIN ns.u u ON t.id = u.id WHERE u.label = ? AND t.fare >= ?",
     [["x", 1.5], ["y", 2.5]]),
    ("WITH k AS (SELECT * FROM ns.t WHERE uuid = ?) SELECT count(*) FROM k", [["a"], ["b"]]),
    ("SELECT * FROM ns.t WHERE uuid = ? LIMIT 5", [["a"], ["b"]]),
    ("SELECT * FROM ns.t WHERE id = -?", [[5], [-5]]),
]


@pytest.mark.parametrize(("sql", "bindings"), STATEMENTS)
def test_every_binding_gets_the_analysis_of_a_fresh_statement(sql, bindings):
    analyses, resolve = Analyses(Limits()), _resolver()
    for values in bindings:
        ours = analyses.analyze(sql, resolve, values)
        _same(ours, analyze(sql, _resolver(), values))
        _same(analyses.analyze(sql, resolve, values), ours)  # and again, from what is kept


def test_a_statement_is_parsed_once_per_kind_of_binding(monkeypatch):
    parsed = []
    original = generic.analyze_parsed
    monkeypatch.setattr(generic, "analyze_parsed", lambda *a: parsed.append(a[1]) or original(*a))
    analyses, resolve = Analyses(Limits()), _resolver()
    for key in ("trip-1", "trip-2", "trip-3", "it's", "a\\'b\n"):
        assert analyses.analyze(KEY, resolve, [key]).scan.options.filters == (("uuid", "=", key),)
    assert len(parsed) == 2  # the stand-ins of one analysis, and of the second that checks it
    assert resolve.calls == 1 + 4  # resolved once to analyse, then again (the right) on each reuse
    analyses.analyze(KEY, resolve, [42])
    assert len(parsed) == 4  # another kind: its own analysis
    assert analyses.analyze(KEY, resolve, [43]).plan.scans[0].options.filters == ()  # a number never fits a string


@pytest.mark.parametrize(
    ("sql", "values"),
    [
        ("SELECT * FROM ns.t WHERE uuid = ? LIMIT ?", ["a", 3]),  # the limit is pushed
        ("SELECT uuid, ? AS tag FROM ns.t", ["x"]),  # a value of the result
        ("SELECT * FROM ns.t TIMESTAMP AS OF ?", ["2024-01-01"]),  # an instant
        ("SELECT repeat(?, 3) FROM ns.t", ["x"]),  # a function's argument (sizes are bounded)
        ("SELECT * FROM ns.t WHERE uuid = ? ORDER BY ?", ["a", 1]),  # an ordinal
        ("SELECT * FROM ns.t WHERE uuid LIKE ?", ["a%"]),
    ],
)
def test_where_a_value_decides_the_analysis_the_statement_is_analysed_per_binding(sql, values):
    statement = template(sql, Limits())
    slot_kinds = kinds(values)
    assert slot_kinds is not None
    assert analyze_generic(statement, slot_kinds, _resolver(), Limits()) is None
    analyses = Analyses(Limits())
    _same(analyses.analyze(sql, _resolver(), values), analyze(sql, _resolver(), values))


def test_a_plain_scan_is_bound_once_as_the_plans_own_scan():
    analyses, resolve = Analyses(Limits()), _resolver()
    for key in ("trip-1", "trip-2"):
        bound = analyses.analyze(KEY, resolve, [key])
        assert bound.scan is bound.plan.scans[0]  # as in a fresh analysis of a plain scan
        assert bound.scan.options.filters == (("uuid", "=", key),)
    fresh = analyze(KEY, _resolver(), ["trip-3"])
    assert fresh.scan is fresh.plan.scans[0]
    # a plain scan of chosen columns is its own object: bound on its own
    sql = "SELECT id, uuid FROM ns.t WHERE uuid = ?"
    for key in ("a", "b"):
        bound = analyses.analyze(sql, resolve, [key])
        assert bound.scan is not None and bound.scan.options.filters == (("uuid", "=", key),)
        _same(bound, analyze(sql, _resolver(), [key]))


def test_a_limit_parameter_is_the_scans_limit_in_every_binding():
    analyses = Analyses(Limits())
    sql = "SELECT * FROM ns.t WHERE uuid = ? LIMIT ?"
    assert [analyses.analyze(sql, _resolver(), ["a", n]).scan.options.limit for n in (3, 4, 3)] == [3, 4, 3]


def test_values_without_a_kind_are_analysed_with_their_very_values():
    from datetime import date
    from decimal import Decimal

    for value in (Decimal("1.5"), date(2024, 1, 1), b"\x00", 1e300, float("nan")):
        assert kinds([value]) is None
    analyses = Analyses(Limits())
    _same(analyses.analyze(KEY, _resolver(), [Decimal("1.5")]), analyze(KEY, _resolver(), [Decimal("1.5")]))


def test_refusals_hold_for_every_binding():
    analyses, resolve = Analyses(Limits()), _resolver()
    for value in ("a", "b"):
        with pytest.raises(InvalidQueryError, match="read_csv"):
            analyses.analyze("SELECT * FROM read_csv(?) WHERE x = ?", resolve, ["/etc/passwd", value])
        with pytest.raises(ValueError, match="read-only"):
            analyses.analyze("DELETE FROM ns.t WHERE uuid = ?", resolve, [value])
    with pytest.raises(InvalidQueryError, match="NaN"):
        analyses.analyze(KEY, resolve, [float("nan")])
    with pytest.raises(InvalidQueryError, match="1 parameter"):
        analyses.analyze(KEY, resolve, ["a", "b"])


def test_a_kept_analysis_holds_only_while_its_tables_resolve_the_same():
    analyses, resolve = Analyses(Limits()), _resolver()
    sql = "SELECT uuid FROM ns.t WHERE id = ?"
    assert analyses.analyze(sql, resolve, [1]).plan.scans[0].options.columns == ("id", "uuid")
    resolve.schemas["t"] = pa.schema([("uuid", pa.string()), ("id", pa.float64())])  # the table's new schema
    changed = analyses.analyze(sql, resolve, [2])
    assert changed.plan.scans[0].options.columns == ("uuid", "id")
    _same(changed, analyze(sql, resolve, [2]))
    resolve.refused = True  # a revoked right
    with pytest.raises(PermissionError):
        analyses.analyze(sql, resolve, [3])
    resolve.refused = False
    assert analyses.analyze(sql, resolve, [3]).plan.scans[0].options.filters == (("id", "=", 3),)


def test_a_resolution_that_fails_is_not_taken_for_a_property_of_the_statement():
    analyses, resolve = Analyses(Limits()), _resolver()
    resolve.refused = True
    with pytest.raises(PermissionError):
        analyses.analyze(KEY, resolve, ["a"])
    resolve.refused = False
    calls = resolve.calls
    analyses.analyze(KEY, resolve, ["a"])
    analyses.analyze(KEY, resolve, ["b"])
    assert resolve.calls == calls + 2  # analysed generically (resolved once), then reused (resolved again)


def test_kept_analyses_stay_within_their_byte_bound():
    analyses = Analyses(Limits(), max_bytes=64 << 10)
    for i in range(200):
        analyses.analyze(f"SELECT * FROM ns.t WHERE uuid = ? AND id > {i}", _resolver(), ["a"])
    caches = (analyses._templates, analyses._analyses, analyses._generic)
    assert all(cache.bytes <= 64 << 10 for cache in caches) and len(analyses._generic) < 200


@pytest.mark.parametrize("values", [[1, 5.0, 9.5], [2, -1.0, 0.0], [3, 9.5, 1.0]])
def test_between_is_two_pushed_comparisons_and_keeps_a_plain_scan(values):
    """``col BETWEEN low AND high`` is ``col >= low AND col <= high`` in SQL: both pushed, so a
    single-table query of such conditions stays a plain scan (the endpoints answer it from the
    kept columns), bound as a fresh analysis binds it; NOT BETWEEN and SYMMETRIC are the engine's."""
    sql = "SELECT * FROM ns.t WHERE id = ? AND fare BETWEEN ? AND ?"
    bound = Analyses(Limits()).analyze(sql, _resolver(), values)
    _same(bound, analyze(sql, _resolver(), values))
    assert bound.scan is not None
    assert bound.scan.options.filters == (("id", "=", values[0]), ("fare", ">=", values[1]), ("fare", "<=", values[2]))
    literal = analyze("SELECT uuid FROM ns.t WHERE fare BETWEEN 1 AND 2", _resolver(), [])
    assert literal.scan is not None and literal.scan.options.filters == (("fare", ">=", 1), ("fare", "<=", 2))
    for engine in ("SELECT * FROM ns.t WHERE fare NOT BETWEEN 1 AND 2",
                   "SELECT * FROM ns.t WHERE fare BETWEEN SYMMETRIC 2 AND 1"):
        analysis = analyze(engine, _resolver(), [])
        assert analysis.scan is None and analysis.plan.scans[0].options.filters == ()
