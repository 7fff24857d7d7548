"""Server-side SQL analysis: one parse (sqlglot), the refusals, the Hudi clauses, the query's shape.

:func:`analyze` turns SQL text (plus bound parameter values) into a :class:`Analysis`:

- anything but a read is refused with an error naming the statement (DDL, DML, COPY, ATTACH,
  INSTALL/LOAD, PRAGMA, SET, ...), and so are file-reading and system functions and every table
  function but ``hudi_table_changes``;
- ``FROM ns.t TIMESTAMP AS OF '<instant>'`` / ``FOR SYSTEM_TIME AS OF '<instant>'`` (sqlglot reads
  both as a ``Version`` node), ``hudi_table_changes('ns.t', 'latest_state' | 'cdc', '<start>'[, '<end>'])``
  (``'earliest'`` as the start: from the first commit)
  and ``ns.t_ro`` become the reference's :class:`~catalog.plan.options.ReadOptions` (the resolver
  decides ``_ro``, it knows the table types);
- ``?`` placeholders are replaced by literals of the bound values before parsing (by token
  position, so in the order they are written), so they are pushed down like any literal;
- the planner (:mod:`.planner`) works out each reference's projection, exact filters and limit;
- the shape: a plain scan of one table (answered with the weighted-split endpoints), an unfiltered
  ``count(*)`` of one table (answered from metadata where exact), or anything else (DuckDB).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType

from catalog.errors import InvalidQueryError, shown
from catalog.plan.options import ReadOptions, parse_instant
from flight_server.server.security.limits import Limits
from flight_server.server.sql import bounds
from flight_server.server.sql.planner import (
    DIALECT,
    Resolver,
    ScanSpec,
    SelectPlan,
    conjuncts,
    parse_query,
    plan_select,
    table_references,
)
from flight_server.server.sql.syntax import syntax_error

TABLE_CHANGES = "hudi_table_changes"
#: functions that read files, URLs, the environment or the engine's own state
_FORBIDDEN_FUNCTION = re.compile(
    r"^(read_\w+|\w+_scan|scan_\w+|glob|parquet_\w+|sniff_csv|getenv|query|query_table|current_setting"
    r"|duckdb_\w+|pragma_\w+|which_secret|load_\w+|install_\w+|write_\w+|copy_\w+|unhex_file|sql_auto_complete"
    r"|iceberg_\w+|delta_\w+|json_execute_serialized_sql|from_substrait\w*|get_substrait\w*|checkpoint|force_checkpoint)$",
    re.IGNORECASE,
)
#: ``hudi_table_changes`` modes (Spark's names) -> query types
_CHANGE_MODES = {"latest_state": "incremental", "cdc": "cdc"}


@dataclass(frozen=True)
class Analysis:
    """What a query needs.

    Attributes:
        plan: the DuckDB SQL over ``__hudi_scan_<i>`` views and the scans feeding them.
        scan: set when the query is a plain scan of one table: its only scan, answered with the
            weighted-split endpoints (the plan's SQL is then the identity over it).
        count_star: set to the output column name when the query is ``SELECT count(*) FROM t``
            whose WHERE (if any) the only scan carries whole as its filters.
    """

    plan: SelectPlan
    scan: ScanSpec | None = None
    count_star: str | None = None


#: parentheses deeper than this are refused before parsing (sqlglot and DuckDB recurse per level)
MAX_SQL_NESTING = 128


def analyze(
    sql: str, resolve: Resolver, parameters: Sequence[Any] | None = None, limits: Limits | None = None
) -> Analysis:
    """Parse, check and plan ``sql`` (within ``limits``: :mod:`.bounds`).

    Raises:
        ReadOnlyError: the statement is not a read (``ValueError``).
        InvalidQueryError: a refused function or clause, wrong parameter count, bad instant.
        LimitExceededError: past a bound of ``limits`` (an ``InvalidQueryError``).
    """
    limits = limits or Limits()
    statement = template(sql, limits)
    return analyze_bound(statement, statement.literals(parameters), resolve, limits)


def analyze_bound(statement: Template, literals: Sequence[str], resolve: Resolver, limits: Limits) -> Analysis:
    """:func:`analyze` of a statement already tokenized and checked, with the SQL ``literals``
    of its parameters (:meth:`Template.literals`)."""
    return analyze_parsed(statement, literals, resolve, limits)[0]


def analyze_parsed(
    statement: Template, literals: Sequence[str], resolve: Resolver, limits: Limits
) -> tuple[Analysis, exp.Query]:
    """:func:`analyze_bound`, and the query it rewrote to read the views (its literals where the
    statement has them; not to be changed: the plan writes its SQL from it)."""
    try:
        return _analyze(statement, literals, resolve, limits)
    except RecursionError as err:  # a tree the depth check let through but sqlglot cannot walk
        raise InvalidQueryError(f"SQL is nested too deeply (at most {MAX_SQL_NESTING} levels)") from err


def _analyze(
    statement: Template, literals: Sequence[str], resolve: Resolver, limits: Limits
) -> tuple[Analysis, exp.Query]:
    query = parse_query(statement.sql, statement.bound(literals))
    if query.find(exp.Placeholder, exp.Parameter):
        raise InvalidQueryError("only positional '?' parameters are supported (not named or numbered ones)")
    bounds.check_query(query, limits)
    _refuse_unsafe(query)
    _hudi_clauses(query)
    count_star = _count_star(query)
    plan = plan_select(query, resolve)  # rewrites ``query`` into the engine SQL over the views
    scan = _plain_scan(query, plan.scans)
    if count_star is not None and _conjunct_count(query) != len(plan.scans[0].options.filters):
        count_star = None  # a condition the scan does not carry: only the engine counts it
    return Analysis(plan, scan, count_star), query


# -- parameters ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    """A statement as the client wrote it, tokenized and checked once (token bounds, nesting).

    Binding splices each value's literal tokens in place of its ``?`` token, so parsing a bound
    statement needs no second pass over the text; the spliced tokens keep the ``?``'s position,
    so a parse error still points into the client's text.

    Attributes:
        sql: the text.
        tokens: its tokens (never handed to the parser: :meth:`bound` copies them).
        marks: the indices of the ``?`` tokens, in the order they are written.
    """

    sql: str
    tokens: tuple[Token, ...]
    marks: tuple[int, ...]

    def literals(self, parameters: Sequence[Any] | None) -> tuple[str, ...]:
        """The SQL literals of ``parameters``, one per ``?``.

        Raises:
            InvalidQueryError: not one value per ``?``, or a value that has no SQL literal.
        """
        given = list(parameters) if parameters is not None else []
        if len(self.marks) != len(given):
            raise InvalidQueryError(f"the query has {len(self.marks)} parameter(s) but {len(given)} value(s) are bound")
        return tuple(sql_literal(value) for value in given)

    def bound(self, literals: Sequence[str]) -> list[Token]:
        """Fresh tokens of the statement with ``literals`` in place of its ``?`` (the parser
        may keep and change tokens' comment lists: the template's are never handed out)."""
        out: list[Token] = []
        marks = dict(zip(self.marks, literals))
        for i, token in enumerate(self.tokens):
            literal = marks.get(i)
            if literal is None:
                out.append(_copy(token, token.token_type, token.text, token.comments))
                continue
            spliced = sql_tokens(literal)
            for j, part in enumerate(spliced):
                comments = token.comments if j == len(spliced) - 1 else part.comments
                out.append(_copy(token, part.token_type, part.text, comments))
        return out


def _copy(at: Token, token_type: TokenType, text: str, comments: list[str]) -> Token:
    """A token of this type and text at ``at``'s place in the statement."""
    return Token(token_type, text, at.line, at.col, at.start, at.end, list(comments))


def template(sql: str, limits: Limits) -> Template:
    """``sql`` tokenized and checked before parsing (:func:`.bounds.check_tokens`, nesting)."""
    tokens = sql_tokens(sql)
    bounds.check_tokens(tokens, limits)
    _check_nesting(tokens)
    marks = tuple(i for i, t in enumerate(tokens) if t.token_type == TokenType.PLACEHOLDER and t.text == "?")
    return Template(sql, tuple(tokens), marks)


def sql_tokens(sql: str) -> list[Token]:
    """The tokens of ``sql`` (``InvalidQueryError`` when it does not tokenize)."""
    try:
        return Dialect.get_or_raise(DIALECT).tokenize(sql)
    except SqlglotError as err:
        raise InvalidQueryError(syntax_error(err)) from None


def _check_nesting(tokens: list[Token]) -> None:
    """Refuse SQL nested deeper than ``MAX_SQL_NESTING`` parentheses before parsing it (the
    parser recurses per level: a deep query costs seconds of CPU and then overflows the stack)."""
    depth = 0
    for token in tokens:
        if token.token_type == TokenType.L_PAREN:
            depth += 1
            if depth > MAX_SQL_NESTING:
                raise InvalidQueryError(f"SQL is nested too deeply (at most {MAX_SQL_NESTING} levels of parentheses)")
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1


def _placeholders(sql: str) -> list[Token]:
    """The ``?`` tokens of ``sql``, in the order they are written (not in strings or comments)."""
    return [t for t in sql_tokens(sql) if t.token_type == TokenType.PLACEHOLDER and t.text == "?"]


def placeholder_count(sql: str) -> int:
    """How many ``?`` parameters ``sql`` takes."""
    return len(_placeholders(sql))


def sql_literal(value: Any) -> str:
    """The SQL literal of a bound value.

    Raises:
        InvalidQueryError: NaN, an infinity, or a type without a literal.
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidQueryError(f"cannot bind {value!r}: NaN and infinite parameters are not supported")
    try:
        return exp.convert(value).sql(dialect=DIALECT)
    except ValueError as err:
        raise InvalidQueryError(f"cannot bind a parameter of type {type(value).__name__}") from err


def bind(sql: str, parameters: Sequence[Any]) -> str:
    """``sql`` with its ``?`` placeholders replaced, in order, by SQL literals of ``parameters``."""
    marks = _placeholders(sql)
    if len(marks) != len(parameters):
        raise InvalidQueryError(f"the query has {len(marks)} parameter(s) but {len(parameters)} value(s) are bound")
    out, pos = [], 0
    for token, value in zip(marks, parameters):
        out.append(sql[pos:token.start])
        out.append(f" {sql_literal(value)} ")  # spaces: a literal never merges with its neighbours (as in "- -1")
        pos = token.end + 1
    out.append(sql[pos:])
    return "".join(out)


# -- refusals ------------------------------------------------------------------------------


def _refuse_unsafe(query: Any) -> None:
    for lock in query.find_all(exp.Lock):
        clause = "FOR UPDATE" if lock.args.get("update") else "FOR SHARE"
        raise InvalidQueryError(f"clause {clause} is not supported: hudi-flight is read-only")
    for func in query.find_all(exp.Func):
        name = func.name if isinstance(func, exp.Anonymous) else func.sql_name()
        if isinstance(func, exp.ReadCSV) or _FORBIDDEN_FUNCTION.match(str(name)):
            raise InvalidQueryError(f"function {str(name).lower()} is not allowed: SQL reads only catalog tables")
    for table in query.find_all(exp.Table):
        if isinstance(table.this, exp.Identifier):
            continue
        func = table.this
        name = func.name if isinstance(func, exp.Anonymous) else func.sql(dialect=DIALECT).split("(")[0]
        if str(name).lower() != TABLE_CHANGES:
            raise InvalidQueryError(
                f"table function {str(name).lower()} is not allowed; the only table function is {TABLE_CHANGES}"
            )


# -- Hudi clauses --------------------------------------------------------------------------


def instant_literal(node: exp.Expression, what: str) -> str:
    """A ``'<instant>'`` string literal as a Hudi instant, in the grammar every surface shares
    (:func:`~catalog.plan.options.parse_instant`)."""
    if not isinstance(node, exp.Literal) or not node.is_string:
        raise InvalidQueryError(f"{what} takes a string literal instant such as '20240101120000000' or '2024-01-01'")
    return parse_instant(node.this, what)


#: table clauses sqlglot parses that the rewrite does not carry, as the client wrote them
_CLAUSES = {
    "sample": "TABLESAMPLE", "pivots": "PIVOT/UNPIVOT", "hints": "table hints WITH (...)",
    "changes": "CHANGES", "only": "ONLY", "when": "AT/BEFORE", "joins": "a join inside the table reference",
    "laterals": "LATERAL", "partition": "PARTITION", "ordinality": "WITH ORDINALITY", "rows_from": "ROWS FROM",
    "system_time": "FOR SYSTEM_TIME", "format": "FORMAT", "pattern": "PATTERN", "indexed": "INDEXED BY",
}


def _refuse_dropped_clauses(table: exp.Table) -> None:
    """Refuse, by name, a clause on a catalog table that the rewrite to a scan view would drop
    (never a silent wrong answer: ``TABLESAMPLE`` returning every row, ``AS t(a, b)`` ignored)."""
    for key, clause in _CLAUSES.items():
        if table.args.get(key):
            raise InvalidQueryError(f"clause {clause} on table {shown(table.name)} is not supported")
    alias = table.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.args.get("columns"):
        raise InvalidQueryError(
            f"column aliases AS {shown(alias.name)}(...) on table {shown(table.name)} are not supported; "
            "alias the columns in the select list"
        )


def _time_travel(table: exp.Table) -> str | None:
    """The instant of ``TIMESTAMP AS OF '<instant>'`` or ``AT (TIMESTAMP => '<instant>')``."""
    version, when = table.args.get("version"), table.args.get("when")
    if version is not None and when is not None:
        raise InvalidQueryError(f"table {shown(table.name)} has two time travel clauses")
    if when is not None:
        if str(when.this).upper() != "AT" or str(when.args.get("kind", "")).upper() != "TIMESTAMP":
            raise InvalidQueryError(
                f"clause {when.sql(dialect=DIALECT)[:80]!r} is not supported; use AT (TIMESTAMP => '<instant>')"
            )
        table.set("when", None)
        return instant_literal(when.expression, "AT (TIMESTAMP => ...)")
    if version is None:
        return None
    if str(version.this).upper() != "TIMESTAMP" or str(version.args.get("kind", "")).upper() != "AS OF":
        raise InvalidQueryError(
            f"clause {version.sql(dialect=DIALECT)[:80]!r} is not supported; use TIMESTAMP AS OF '<instant>'"
        )
    table.set("version", None)
    return instant_literal(version.expression, "TIMESTAMP AS OF")


def _hudi_clauses(query: Any) -> None:
    """Time travel and ``hudi_table_changes`` -> ``meta["hudi_options"]`` of plain table nodes;
    any other clause on a catalog table is refused by name."""
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    for table in list(query.find_all(exp.Table)):
        travels = table.args.get("version") is not None or table.args.get("when") is not None
        if isinstance(table.this, exp.Identifier):
            if not table.db and table.name.lower() in ctes:
                if travels:
                    raise InvalidQueryError(
                        f"TIMESTAMP AS OF applies to catalog tables, not to the CTE {table.name[:64]}"
                    )
                continue  # the engine itself answers a CTE's clauses
            as_of = _time_travel(table)
            _refuse_dropped_clauses(table)
            if as_of is not None:
                table.meta["hudi_options"] = ReadOptions(as_of=as_of)
            continue
        if travels:
            raise InvalidQueryError(f"{TABLE_CHANGES} takes no TIMESTAMP AS OF clause")
        _refuse_dropped_clauses(table)
        table.replace(_changes_table(table))


def _changes_table(table: exp.Table) -> exp.Table:
    args = list(table.this.expressions)
    if len(args) not in (3, 4):
        raise InvalidQueryError(
            f"{TABLE_CHANGES}('ns.table', 'latest_state' | 'cdc', '<start>'[, '<end>']) takes 3 or 4 arguments"
        )
    if not all(isinstance(a, exp.Literal) and a.is_string for a in args):
        raise InvalidQueryError(f"the arguments of {TABLE_CHANGES} are string literals")
    identifier, mode = args[0].this, args[1].this.lower()
    if mode not in _CHANGE_MODES:
        raise InvalidQueryError(f"{TABLE_CHANGES} supports the 'latest_state' and 'cdc' modes, got {mode[:32]!r}")
    parts = identifier.split(".")
    if len(parts) not in (2, 3) or not all(parts):
        raise InvalidQueryError(f"{TABLE_CHANGES} takes a table name 'namespace.table'")
    earliest = args[2].this.strip().lower() == "earliest"
    start = None if earliest else instant_literal(args[2], f"{TABLE_CHANGES} start")
    end = instant_literal(args[3], f"{TABLE_CHANGES} end") if len(args) == 4 else None
    alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(parts[-1]))
    node = exp.Table(
        this=exp.to_identifier(parts[-1]),
        db=exp.to_identifier(parts[-2]),
        catalog=exp.to_identifier(parts[0]) if len(parts) == 3 else None,
        alias=alias,
    )
    node.meta["hudi_options"] = ReadOptions(query_type=_CHANGE_MODES[mode], start=start, end=end)
    return node


def hudi_options(table: exp.Table) -> ReadOptions:
    """The query type and instants a table reference asks for (``ReadOptions()``: a snapshot)."""
    options = table.meta.get("hudi_options")
    return options if isinstance(options, ReadOptions) else ReadOptions()


# -- shapes --------------------------------------------------------------------------------

_NOT_PLAIN = (
    "group", "having", "order", "distinct", "qualify", "with", "offset", "joins", "laterals", "windows", "sample"
)


def _single_select(query: Any) -> bool:
    return isinstance(query, exp.Select) and not any(query.args.get(k) for k in _NOT_PLAIN)


def _count_star(query: exp.Query) -> str | None:
    """The output name of ``SELECT count(*) FROM t`` (no LIMIT; ``t`` may be wrapped in a derived
    table that keeps all its rows, :func:`_all_rows_of_one_table`; a WHERE only on ``t`` itself),
    else ``None``. Whether the WHERE was pushed whole is only known once planned (:func:`_analyze`)."""
    if not _single_select(query) or query.args.get("limit"):
        return None
    if not _all_rows_of_one_table(query):
        return None
    source = query.args.get("from_")
    if query.args.get("where") is not None and (source is None or not isinstance(source.this, exp.Table)):
        return None
    if len(query.expressions) != 1:
        return None
    item = query.expressions[0]
    inner = item.this if isinstance(item, exp.Alias) else item
    if not isinstance(inner, exp.Count) or not isinstance(inner.this, exp.Star) or inner.args.get("distinct"):
        return None
    return item.alias if isinstance(item, exp.Alias) else "count_star()"


def _all_rows_of_one_table(query: exp.Query) -> bool:
    """Whether the FROM of ``query`` holds exactly the rows of one catalog table: the table itself,
    or ``(SELECT items FROM t) alias`` without WHERE, LIMIT, DISTINCT, grouping, aggregate, window,
    row generator or join (how JDBC tools wrap a table: Spark's ``SELECT COUNT(*) FROM (...) t``)."""
    if len(table_references(query)) != 1 or len(list(query.find_all(exp.Table))) != 1:
        return False
    source = query.args.get("from_")
    node = source.this if source is not None else None
    if isinstance(node, exp.Subquery):
        inner = node.this
        if not _single_select(inner) or inner.args.get("where") or inner.args.get("limit"):
            return False
        if inner.find(exp.AggFunc, exp.Window, exp.Subquery, exp.UDTF) is not None:
            return False
        source = inner.args.get("from_")
        node = source.this if source is not None else None
    return isinstance(node, exp.Table)


def _conjunct_count(query: exp.Query) -> int:
    """How many AND-ed conditions the WHERE of ``query`` has, a ``BETWEEN`` as its two
    comparisons (0: no WHERE)."""
    where = query.args.get("where")
    return 0 if where is None else len(conjuncts(where.this))


def _plain_scan(query: exp.Query, scans: list[ScanSpec]) -> ScanSpec | None:
    """The scan, when ``query`` is ``SELECT col, ... | * FROM view [WHERE all pushed] [LIMIT n]``
    with the columns exactly as the scan returns them (so the endpoints can answer it)."""
    if len(scans) != 1 or not _single_select(query) or query.find(exp.Subquery, exp.AggFunc, exp.Window):
        return None
    scan = scans[0]
    if _conjunct_count(query) != len(scan.options.filters):
        return None
    limit = query.args.get("limit")
    if limit is not None and scan.options.limit is None:
        return None
    items = query.expressions
    if len(items) == 1 and isinstance(items[0], exp.Star):
        return scan if scan.options.columns is None else None
    names = [item.name for item in items if isinstance(item, exp.Column) and isinstance(item.this, exp.Identifier)]
    if len(names) != len(items) or len(set(n.lower() for n in names)) != len(names):
        return None
    columns = scan.options.columns or ()
    by_lower = {c.lower(): c for c in columns}
    if any(n.lower() not in by_lower for n in names):
        return None
    ordered = tuple(by_lower[n.lower()] for n in names)
    if any(o != n for o, n in zip(ordered, names)):
        return None  # a case-changed name: DuckDB would return the query's spelling
    return ScanSpec(scan.view, scan.table, scan.options.replace(columns=ordered))


__all__ = ["Analysis", "TABLE_CHANGES", "Template", "analyze", "analyze_bound", "analyze_parsed", "bind",
           "hudi_options", "instant_literal", "placeholder_count", "sql_literal", "sql_tokens", "template"]
