"""Statements analysed before, kept for the next time they are asked (one server's SQL).

Analysing a statement (:func:`.query.analyze`) costs a token pass, a parse, the planner's walks and
the generation of the engine SQL: about a millisecond for a one-line query, paid on every
GetFlightInfo, GetSchema and prepare. Four bounded caches take most of it away:

- templates, by SQL text: the statement tokenized and checked (token bounds, nesting), so a
  prepared statement executed with one binding after another is tokenized once;
- generic analyses, by SQL text and the kinds of the bound values (:mod:`.generic`): one analysis
  for every binding of a prepared statement, each binding putting its values in place;
- analyses, by SQL text and the literals of the bound values: the whole :class:`.query.Analysis`,
  for statements without parameters and bindings no generic analysis holds for;
- the places of a statement's ``?`` parameters, by SQL text (:mod:`.parameters`: a prepare
  answers their types);
- with the templates: which catalog statement (:mod:`.show`) the text is, if any (asked before
  every execution).

An analysis is a function of the statement, its bound literals and what each table reference
resolves to (the table's identifier, schema and read options): the resolver is a call's, so it
also checks the caller's right. A kept analysis is therefore only reused after resolving every one
of its references again, for this caller, and finding the very same identifiers, schemas and
options; anything else (a revoked right, a new schema, another table behind an unqualified name)
analyses the statement again. Only successful analyses are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Sequence, TypeVar

import pyarrow as pa
from sqlglot import exp

from catalog.lru import BoundedLRU, CacheListener
from catalog.plan.options import ReadOptions
from flight_server.server.security.limits import Limits
from flight_server.server.sql.generic import GenericAnalysis, analyze_generic, kinds
from flight_server.server.sql.parameters import Places, parameter_places
from flight_server.server.sql.planner import Resolver
from flight_server.server.sql.query import Analysis, Template, analyze_bound, template
from flight_server.server.sql.show import CatalogStatement, catalog_statement

#: bytes of templates and of analyses kept (each a few kilobytes for a one-line query)
CACHE_BYTES = 16 << 20
_Resolved = tuple[str, pa.Schema, ReadOptions]
A = TypeVar("A")


@dataclass(frozen=True)
class _Reference:
    """A table reference of a kept analysis and what it resolved to."""

    table: exp.Table
    resolved: _Resolved

    def holds(self, resolve: Resolver) -> bool:
        identifier, schema, options = resolve(self.table)
        kept_identifier, kept_schema, kept_options = self.resolved
        return (
            identifier == kept_identifier
            and options == kept_options
            and (schema is kept_schema or schema.equals(kept_schema, True))
        )


@dataclass(frozen=True)
class _Kept(Generic[A]):
    """An analysis (or a generic one) and the table references it was made with."""

    analysis: A
    references: tuple[_Reference, ...]

    def holds(self, resolve: Resolver) -> bool:
        return all(reference.holds(resolve) for reference in self.references)


class _Recording:
    """``resolve``, keeping each reference it resolved and what to."""

    def __init__(self, resolve: Resolver):
        self.resolve = resolve
        self.references: list[_Reference] = []

    def __call__(self, table: exp.Table) -> _Resolved:
        resolved = self.resolve(table)
        self.references.append(_Reference(table.copy(), resolved))
        return resolved


#: a statement and kinds of bindings that no generic analysis holds for
_PER_BINDING = _Kept[GenericAnalysis | None](None, ())


class Analyses:
    """Analyses of one server's statements (within its ``limits``), reused while they hold."""

    def __init__(self, limits: Limits, max_bytes: int = CACHE_BYTES, listener: CacheListener | None = None):
        """``max_bytes`` bounds each of the four kinds kept (templates, analyses, generic
        analyses, parameter places); ``listener`` hears their counters (``catalog.lru``)."""
        self.limits = limits
        self._templates: BoundedLRU[str, tuple[Template, CatalogStatement | None]] = BoundedLRU(
            "sql_templates", max_bytes, listener=listener
        )
        self._analyses: BoundedLRU[tuple[str, tuple[str, ...]], _Kept[Analysis]] = BoundedLRU(
            "sql_analyses", max_bytes, listener=listener
        )
        self._generic: BoundedLRU[tuple[str, tuple[str, ...]], _Kept[GenericAnalysis | None]] = BoundedLRU(
            "sql_generic_analyses", max_bytes, listener=listener
        )
        self._places: BoundedLRU[str, Places] = BoundedLRU("sql_parameter_places", max_bytes, listener=listener)

    def template(self, sql: str) -> Template:
        """``sql`` tokenized and checked (:func:`.query.template`), once per text."""
        return self._template(sql)[0]

    def catalog_statement(self, sql: str) -> CatalogStatement | None:
        """The catalog statement ``sql`` is (:func:`.show.catalog_statement`), once per text;
        raises as :meth:`template`."""
        return self._template(sql)[1]

    def _template(self, sql: str) -> tuple[Template, CatalogStatement | None]:
        known = self._templates.get(sql)
        if known is None:
            statement = template(sql, self.limits)
            known = (statement, catalog_statement(sql, statement.tokens))
            self._templates.put(sql, known, 2 * len(sql) + 160 * len(statement.tokens))
        return known

    def parameter_places(self, sql: str) -> Places:
        """Where the ``?`` parameters of ``sql`` stand (:func:`.parameters.parameter_places`),
        once per text."""
        known = self._places.get(sql)
        if known is None:
            known = parameter_places(self.template(sql).sql)
            self._places.put(sql, known, 64 * len(sql) + 2048)
        return known

    def analyze(self, sql: str, resolve: Resolver, parameters: Sequence[Any] | None) -> Analysis:
        """The analysis of ``sql`` with ``parameters`` bound, every table reference resolved by
        ``resolve`` (see the module docstring); raises as :func:`.query.analyze`."""
        statement = self.template(sql)
        values = list(parameters) if parameters is not None else []
        slot_kinds = kinds(values) if statement.marks and len(values) == len(statement.marks) else None
        if slot_kinds is not None:
            generic = self._generic_analysis(statement, slot_kinds, resolve)
            if generic is not None:
                return generic.bind(values)
        literals = statement.literals(parameters)
        key = (sql, literals)
        kept = self._analyses.get(key)
        if kept is not None and kept.holds(resolve):
            return kept.analysis
        recording = _Recording(resolve)
        analysis = analyze_bound(statement, literals, recording, self.limits)
        size = _size(len(sql) + sum(map(len, literals)), recording)
        self._analyses.put(key, _Kept(analysis, tuple(recording.references)), size)
        return analysis

    def _generic_analysis(
        self, statement: Template, slot_kinds: tuple[str, ...], resolve: Resolver
    ) -> GenericAnalysis | None:
        """The generic analysis of ``statement`` for bindings of ``slot_kinds`` (``None``: the
        statement is analysed per binding)."""
        key = (statement.sql, slot_kinds)
        kept = self._generic.get(key)
        if kept is _PER_BINDING:
            return None
        if kept is not None and kept.holds(resolve):
            return kept.analysis
        recording = _Recording(resolve)
        generic = analyze_generic(statement, slot_kinds, recording, self.limits)
        if generic is None:
            self._generic.put(key, _PER_BINDING, 2 * len(statement.sql) + 64)
            return None
        size = _size(len(statement.sql) + len(generic.sql), recording)
        self._generic.put(key, _Kept(generic, tuple(recording.references)), size)
        return generic


def _size(characters: int, recording: _Recording) -> int:
    """What a kept analysis of this many characters of SQL costs: the parsed tree behind the
    engine SQL is kept too (tens of bytes per character), and each reference."""
    return 64 * characters + 2048 * (1 + len(recording.references))


__all__ = ["Analyses"]
