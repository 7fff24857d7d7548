"""Statements analysed before, kept for the next time they are asked (one server's SQL).

Analysing a statement (:func:`.query.analyze`) costs a token pass, a parse, the planner's walks and
the generation of the engine SQL: about a millisecond for a one-line query, paid on every
GetFlightInfo, GetSchema and prepare. Two bounded caches take most of it away:

- templates, by SQL text: the statement tokenized and checked (token bounds, nesting), so a
  prepared statement executed with one binding after another is tokenized once;
- analyses, by SQL text and the literals of the bound values: the whole :class:`.query.Analysis`.

An analysis is a function of the statement, its bound literals and what each table reference
resolves to (the table's identifier, schema and read options): the resolver is a call's, so it
also checks the caller's right. A kept analysis is therefore only reused after resolving every one
of its references again, for this caller, and finding the very same identifiers, schemas and
options; anything else (a revoked right, a new schema, another table behind an unqualified name)
analyses the statement again. Only successful analyses are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa
from sqlglot import exp

from catalog.lru import BoundedLRU
from catalog.plan.options import ReadOptions
from flight_server.server.security.limits import Limits
from flight_server.server.sql.planner import Resolver
from flight_server.server.sql.query import Analysis, Template, analyze_bound, template

#: bytes of templates and of analyses kept (each a few kilobytes for a one-line query)
CACHE_BYTES = 16 << 20
_Resolved = tuple[str, pa.Schema, ReadOptions]


@dataclass(frozen=True)
class _Reference:
    """A table reference of a kept analysis and what it resolved to."""

    table: exp.Table
    resolved: _Resolved

    def holds(self, resolve: Resolver) -> bool:
        identifier, schema, options = resolve(self.table)
        kept_identifier, kept_schema, kept_options = self.resolved
        return identifier == kept_identifier and options == kept_options and schema.equals(kept_schema, True)


@dataclass(frozen=True)
class _Kept:
    analysis: Analysis
    references: tuple[_Reference, ...]


class Analyses:
    """Analyses of one server's statements (within its ``limits``), reused while they hold."""

    def __init__(self, limits: Limits, max_bytes: int = CACHE_BYTES):
        self.limits = limits
        self._templates: BoundedLRU[str, Template] = BoundedLRU("sql templates", max_bytes)
        self._analyses: BoundedLRU[tuple[str, tuple[str, ...]], _Kept] = BoundedLRU("sql analyses", max_bytes)

    def template(self, sql: str) -> Template:
        """``sql`` tokenized and checked (:func:`.query.template`), once per text."""
        known = self._templates.get(sql)
        if known is None:
            known = template(sql, self.limits)
            self._templates.put(sql, known, 2 * len(sql) + 160 * len(known.tokens))
        return known

    def analyze(self, sql: str, resolve: Resolver, parameters: Sequence[Any] | None) -> Analysis:
        """The analysis of ``sql`` with ``parameters`` bound, every table reference resolved by
        ``resolve`` (see the module docstring); raises as :func:`.query.analyze`."""
        statement = self.template(sql)
        literals = statement.literals(parameters)
        key = (sql, literals)
        kept = self._analyses.get(key)
        if kept is not None and all(reference.holds(resolve) for reference in kept.references):
            return kept.analysis
        references: list[_Reference] = []

        def recording(table: exp.Table) -> _Resolved:
            resolved = resolve(table)
            references.append(_Reference(table.copy(), resolved))
            return resolved

        analysis = analyze_bound(statement, literals, recording, self.limits)
        # the parsed tree behind the engine SQL is kept too: tens of bytes per character of SQL
        size = 64 * (len(sql) + sum(map(len, literals))) + 2048 * (1 + len(references))
        self._analyses.put(key, _Kept(analysis, tuple(references)), size)
        return analysis


__all__ = ["Analyses"]
