"""SELECT planning for server-side SQL: what each table reference must read from the catalog.

A query is parsed with sqlglot; every reference to a served table becomes a :class:`ScanSpec`
(the columns the query mentions, the WHERE conjuncts of the form ``column op literal`` that the
planner evaluates exactly, and a LIMIT when the query is a plain single-table scan). The query
itself is rewritten to read registered Arrow views and is run *entirely* by DuckDB, WHERE clause
included, so pushdown only ever removes rows the query would drop anyway. Two cases keep a
filter local: ``IS NULL`` in a scope with an outer join (pushing it would turn unmatched rows
into null-extended ones), and literals whose type does not match the column's (the service and
DuckDB might coerce differently).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.tokens import Token

from catalog.plan.options import ReadOptions
from flight_server.server.errors import ServerError
from flight_server.server.sql.syntax import syntax_error

DIALECT = "duckdb"
READ_ONLY = "hudi-flight is read-only: only SELECT queries are supported"

_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_COMPARISON: dict[type[exp.Expression], str] = {
    exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="
}


class ReadOnlyError(ServerError, ValueError):
    """The statement would change data or state (INVALID_ARGUMENT, naming the statement)."""


@dataclass
class ScanSpec:
    """One table reference: fetch ``table`` with these options and register it as ``view``."""

    view: str
    table: str
    options: ReadOptions = field(default_factory=ReadOptions)


class SelectPlan:
    """The DuckDB SQL to run over the fetched views, and the scans that feed it.

    The SQL is written when first asked for: a plain scan answered by the split endpoints never
    needs it.

    Args:
        scans: the scans feeding the views.
        write: writes the SQL (:meth:`of`: from the rewritten query; or a statement's SQL with
            the values of another binding, :mod:`.generic`).
    """

    def __init__(self, scans: list[ScanSpec], write: Callable[[], str]):
        self.scans = scans
        self._write = write

    @classmethod
    def of(cls, query: exp.Query, scans: list[ScanSpec]) -> "SelectPlan":
        """The plan of ``query`` rewritten to read the views (not changed afterwards)."""
        return cls(scans, functools.partial(_engine_sql, query))

    @functools.cached_property
    def sql(self) -> str:
        """The DuckDB SQL over the views.

        Raises:
            ValueError: a clause sqlglot parsed but cannot write back (never silently dropped).
        """
        return self._write()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SelectPlan) and (self.sql, self.scans) == (other.sql, other.scans)

    def __hash__(self) -> int:
        return hash(self.sql)


def _engine_sql(query: exp.Query) -> str:
    try:
        return query.sql(dialect=DIALECT, unsupported_level=ErrorLevel.RAISE)
    except sqlglot.errors.UnsupportedError as err:
        raise ValueError(f"unsupported SQL: {str(err).splitlines()[0][:200]}") from err


# -- parsing -----------------------------------------------------------------------------------


def parse_query(sql: str, tokens: list[Token] | None = None) -> exp.Query:
    """Parse one SELECT (or set operation / WITH query); anything else is :class:`ReadOnlyError`.

    ``tokens``: the statement's tokens when the caller has them (``sql`` then serves the parser's
    error messages and the text of statements it does not parse into a tree).
    """
    try:
        dialect = Dialect.get_or_raise(DIALECT)
        parsed = dialect.parser().parse(dialect.tokenize(sql) if tokens is None else tokens, sql)
        statements = [s for s in parsed if s is not None]
    except sqlglot.errors.SqlglotError as err:
        raise ValueError(syntax_error(err)) from None  # the cause names sqlglot's classes
    if len(statements) != 1:
        raise ValueError(f"expected exactly one statement, got {len(statements)}")
    statement = statements[0]
    if not isinstance(statement, exp.Query):
        name = statement.name if isinstance(statement, exp.Command) else statement.key
        raise ReadOnlyError(f"{READ_ONLY}; got {str(name).upper()[:32]}")
    if statement.find(exp.Into) is not None:
        raise ReadOnlyError(f"{READ_ONLY}; got SELECT ... INTO")
    return statement


def table_references(query: exp.Query) -> list[exp.Table]:
    """Table nodes that name catalog tables (CTE names and table functions excluded)."""
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    out = []
    for table in query.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue  # read_parquet(...) and other table functions
        if not table.db and table.name.lower() in ctes:
            continue
        out.append(table)
    return out


# -- planning ----------------------------------------------------------------------------------


Resolver = Callable[[exp.Table], tuple[str, pa.Schema, ReadOptions]]


def plan_select(query: exp.Query, resolve: Resolver) -> SelectPlan:
    """Work out the scans of ``query``; ``resolve(table node)`` -> (identifier, schema, base
    options: the query type and instants the reference asks for)."""
    references = table_references(query)
    resolved = {id(t): resolve(t) for t in references}
    base = {key: value[2] for key, value in resolved.items()}
    resolved_schemas = {key: (value[0], value[1]) for key, value in resolved.items()}
    _prune_derived_table(query)
    needed = _mentioned_columns(query)
    pushable = _pushable_filters(query, resolved_schemas)
    limit = _plain_limit(query, references, pushable)

    scans = []
    for i, table in enumerate(references):
        identifier, schema = resolved_schemas[id(table)]
        view = f"__hudi_scan_{i}"
        scans.append(
            ScanSpec(
                view=view,
                table=identifier,
                options=base[id(table)].replace(
                    columns=_projection(schema, needed), filters=tuple(pushable.get(id(table), [])), limit=limit
                ),
            )
        )
        alias = table.alias or table.name
        table.replace(exp.Table(this=exp.to_identifier(view), alias=exp.TableAlias(this=exp.to_identifier(alias))))
    for column in query.find_all(exp.Column):
        # ns.table.column -> table.column: the view is aliased by the bare table name.
        column.set("db", None)
        column.set("catalog", None)
    return SelectPlan.of(query, scans)


def _mentioned_columns(query: exp.Query) -> set[str] | None:
    """Lower-cased names of every column the query mentions; ``None`` when a ``*`` needs them all."""
    for star in query.find_all(exp.Star):
        if not isinstance(star.parent, exp.Count):
            return None
    needed = {c.name.lower() for c in query.find_all(exp.Column) if not isinstance(c.this, exp.Star)}
    needed.update(_struct_roots(query))
    for join in query.find_all(exp.Join):
        if str(join.args.get("method") or "").upper() == "NATURAL":
            return None  # joins on every common column name: a narrower projection changes the result
        needed.update(u.name.lower() for u in join.args.get("using") or [])  # USING (col) names no Column
    return needed


def _prune_derived_table(query: exp.Query) -> None:
    """Drop the items of a derived table that the query around it never uses, in place.

    JDBC tools wrap a table in a subquery (Spark's JDBC source sends ``SELECT 1 FROM (SELECT c1,
    c2, ... FROM ns.t) t`` for a count); without this every column of the subquery is read. Only
    ``SELECT ... FROM (SELECT items FROM ...) alias`` without joins is touched, and only when the
    subquery is a plain SELECT (no DISTINCT, aggregate, window, set operation or star): dropping
    one of its items then changes no row and no other value.
    """
    source = query.args.get("from_")
    if not isinstance(query, exp.Select) or query.args.get("joins") or source is None:
        return
    inner = source.this.this if isinstance(source.this, exp.Subquery) else None
    if not isinstance(inner, exp.Select) or not _plain_projection(inner):
        return
    outside = [c for c in query.find_all(exp.Column) if not _within(c, inner)]
    if any(isinstance(s, exp.Star) and not _within(s, inner) and not isinstance(s.parent, exp.Count)
           for s in query.find_all(exp.Star)):
        return  # SELECT * (or t.*) over the subquery uses every item
    used = {c.name.lower() for c in outside}
    kept = [item for item in inner.expressions if item.alias_or_name.lower() in used]
    if len(kept) != len(inner.expressions):
        inner.set("expressions", kept or [exp.alias_(exp.Literal.number(1), "__hudi_flight_row")])


def _plain_projection(select: exp.Select) -> bool:
    if any(select.args.get(k) for k in ("distinct", "group", "having", "qualify", "windows")):
        return False
    if select.find(exp.AggFunc, exp.Window) is not None:
        return False
    names = [item.alias_or_name for item in select.expressions]
    return all(names) and not any(isinstance(item, exp.Star) or item.find(exp.Star) for item in select.expressions)


def _within(node: exp.Expression, ancestor: exp.Expression) -> bool:
    parent = node.parent
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.parent
    return False


def _struct_roots(query: exp.Query) -> set[str]:
    """Lower-cased ``s`` of every ``s.field`` whose ``s`` names no table or alias of the query: a
    struct column and its field (sqlglot reads ``s`` as a table qualifier)."""
    sources = {t.alias_or_name.lower() for t in query.find_all(exp.Table)}
    sources.update(a.alias_or_name.lower() for a in query.find_all(exp.Subquery, exp.CTE) if a.alias_or_name)
    return {c.table.lower() for c in query.find_all(exp.Column) if c.table and c.table.lower() not in sources}


def _projection(schema: pa.Schema, needed: set[str] | None) -> tuple[str, ...] | None:
    if needed is None:
        return None
    columns = tuple(f.name for f in schema if f.name.lower() in needed)
    return columns or (schema.names[0],)  # COUNT(*) and friends: any one column carries the rows


def _pushable_filters(query: exp.Query, resolved: dict[int, tuple[str, pa.Schema]]) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    try:
        scopes = traverse_scope(query)
    except Exception:  # sqlglot cannot scope this query: push nothing, DuckDB still answers it
        return out
    for scope in scopes:
        for node_id, filters in _scope_filters(scope, resolved).items():
            out.setdefault(node_id, []).extend(filters)
    return out


def _scope_filters(scope: Scope, resolved: dict[int, tuple[str, pa.Schema]]) -> dict[int, list[tuple]]:
    select = scope.expression
    if not isinstance(select, exp.Select) or select.args.get("where") is None:
        return {}
    sources = {alias.lower(): src for alias, src in scope.sources.items()}
    tables = {alias: src for alias, src in sources.items() if isinstance(src, exp.Table) and id(src) in resolved}
    outer_join = any(j.side for j in select.args.get("joins") or [])
    out: dict[int, list[tuple]] = {}
    for condition in conjuncts(select.args["where"].this):
        found = _as_filter(condition)
        if found is None:
            continue
        column, op, value = found
        if op == "is null" and outer_join:
            continue
        alias = column.table.lower() if column.table else (next(iter(sources)) if len(sources) == 1 else None)
        table = tables.get(alias) if alias else None
        if table is None:
            continue
        schema = resolved[id(table)][1]
        field_ = _field(schema, column.name)
        if field_ is None or not _literal_fits(field_.type, value):
            continue
        out.setdefault(id(table), []).append((field_.name, op) if value is _NO_VALUE else (field_.name, op, value))
    return out


def conjuncts(condition: exp.Expression) -> list[Any]:
    """The AND-ed conditions of ``condition``, each ``column BETWEEN low AND high`` as the two
    comparisons it is in SQL (``column >= low``, ``column <= high``), so each can be pushed."""
    node = condition.unnest()  # sqlglot >= 30 types nodes as its ``Expr`` base class
    nodes = list(node.flatten()) if isinstance(node, exp.And) else [node]
    return [part for node in nodes for part in _bounds(node)]


def _bounds(node: Any) -> list[Any]:
    """A plain (not SYMMETRIC) ``column BETWEEN low AND high`` as its two comparisons (copies: the
    query's tree is left as it is); any other condition as it is."""
    if not isinstance(node, exp.Between) or node.args.get("symmetric") or not isinstance(node.this, exp.Column):
        return [node]
    low, high = node.args.get("low"), node.args.get("high")
    if low is None or high is None:
        return [node]
    return [exp.GTE(this=node.this.copy(), expression=low.copy()),
            exp.LTE(this=node.this.copy(), expression=high.copy())]


_NO_VALUE = object()


def _as_filter(node: exp.Expression) -> tuple[exp.Column, str, Any] | None:
    """``column op literal`` (either side), ``column [NOT] IN (literals)``, ``column IS [NOT] NULL``."""
    negated = isinstance(node, exp.Not)
    inner = node.this.unnest() if negated else node
    if isinstance(inner, exp.Is) and isinstance(inner.this, exp.Column) and isinstance(inner.expression, exp.Null):
        return inner.this, "is not null" if negated else "is null", _NO_VALUE
    if isinstance(inner, exp.In) and isinstance(inner.this, exp.Column) and not inner.args.get("query"):
        values = [_literal(v) for v in inner.expressions]
        if not values or any(v is _NO_VALUE for v in values) or len({type(v) for v in values}) != 1:
            return None
        return inner.this, "not in" if negated else "in", values
    if negated or type(node) not in _COMPARISON:
        return None
    op = _COMPARISON[type(node)]
    left, right = node.this, node.expression
    if isinstance(left, exp.Column) and _literal(right) is not _NO_VALUE:
        return left, op, _literal(right)
    if isinstance(right, exp.Column) and _literal(left) is not _NO_VALUE:
        return right, _FLIP[op], _literal(left)
    return None


def _literal(node: exp.Expression) -> Any:
    """The Python value of a string, number or boolean literal; ``_NO_VALUE`` for anything else."""
    sign = 1
    if isinstance(node, exp.Neg):
        node, sign = node.this, -1
    if isinstance(node, exp.Boolean) and sign == 1:
        return bool(node.this)
    if not isinstance(node, exp.Literal):
        return _NO_VALUE
    if node.is_string:
        return node.this if sign == 1 else _NO_VALUE
    text = node.this
    try:
        return sign * int(text)
    except ValueError:
        try:
            number = sign * float(text)
        except ValueError:
            return _NO_VALUE
        return number if math.isfinite(number) else _NO_VALUE


def _field(schema: pa.Schema, name: str) -> pa.Field | None:
    matches = [f for f in schema if f.name.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else None


def _literal_fits(dtype: pa.DataType, value: Any) -> bool:
    """Only send comparisons the service evaluates exactly as DuckDB would."""
    if value is _NO_VALUE:
        return True
    sample = value[0] if isinstance(value, list) else value
    if isinstance(sample, bool):
        return pa.types.is_boolean(dtype)
    if isinstance(sample, int):
        return pa.types.is_integer(dtype) or pa.types.is_floating(dtype)
    if isinstance(sample, float):
        return pa.types.is_floating(dtype)
    return pa.types.is_string(dtype) or pa.types.is_large_string(dtype)


def _plain_limit(query: exp.Query, references: list[exp.Table], pushable: dict[int, list[tuple]]) -> int | None:
    """LIMIT (+ OFFSET) when the query is ``SELECT cols FROM one_table [WHERE pushed] LIMIT n``."""
    if not isinstance(query, exp.Select) or len(references) != 1 or query.args.get("joins"):
        return None
    limit = query.args.get("limit")
    if limit is None or any(
        query.args.get(k) for k in ("group", "having", "order", "distinct", "qualify", "with", "sample")
    ) or query.find(exp.AggFunc, exp.Window, exp.Subquery):
        return None
    where = query.args.get("where")
    if where is not None and len(conjuncts(where.this)) != len(pushable.get(id(references[0]), [])):
        return None
    count = _literal(limit.expression)
    offset = query.args.get("offset")
    skip = _literal(offset.expression) if offset is not None else 0
    if not isinstance(count, int) or not isinstance(skip, int) or isinstance(count, bool):
        return None
    return count + skip


__all__ = [
    "READ_ONLY",
    "ReadOnlyError",
    "Resolver",
    "ScanSpec",
    "SelectPlan",
    "conjuncts",
    "parse_query",
    "plan_select",
    "table_references",
]
