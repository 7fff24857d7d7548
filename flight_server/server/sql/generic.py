"""One analysis of a statement for every binding of its ``?`` parameters.

A prepared statement is executed with one binding after another (a point query by key, with
a new key each time). Analysing each binding (:func:`.query.analyze_bound`: a parse, the
refusals, the planner's walks) costs about a millisecond; here the statement is analysed once
per *kind* of binding and each later binding only puts its values in place of the first ones.

A value's kind is what the analysis may depend on: a string, a non-negative or negative integer
or float (the literal's tokens and the planner's Python type), or the constants ``NULL``,
``TRUE`` and ``FALSE``. Other values (decimals, dates, bytes, ...) are analysed per binding.

The analysis of a kind is made with stand-in values (sentinels: values of that kind no client
writes, their text unique in the statement) and is only kept when it provably holds for every
value of the kind:

- each stand-in is a plain operand of a comparison, ``IN`` or ``BETWEEN``: a place where no
  decision of the analysis reads the value (a ``LIMIT ?``, ``TIMESTAMP AS OF ?``, a function
  argument whose size is bounded, ... stay per binding);
- a second analysis with other stand-ins is the first one with the stand-ins exchanged: the
  pushed filters, the shape, and the engine SQL, where each stand-in's literal appears exactly
  once.

Binding then replaces the stand-ins in the pushed filters (Python values, as the planner reads
the literal) and, when the engine SQL is needed, the stand-ins' literals in that SQL.
"""

from __future__ import annotations

import math
import re
import secrets
from dataclasses import dataclass
from typing import Any, Sequence

from sqlglot import exp
from sqlglot.tokens import TokenType

from catalog.plan.options import ReadOptions
from flight_server.server.security.limits import Limits
from flight_server.server.sql.planner import Resolver, ScanSpec, SelectPlan
from flight_server.server.sql.query import Analysis, Template, analyze_parsed, sql_literal, sql_tokens

#: kinds whose literal is the same for every value: nothing to put in place
_CONSTANTS = ("NULL", "TRUE", "FALSE")
#: where a value's operand may stand without any decision of the analysis reading it
_VALUE_PLACES = (exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.NullSafeNEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.In,
                 exp.Between)
_DECIMAL = re.compile(r"[0-9]+\.[0-9]+")
#: strings written as quoted text with their quotes doubled, and read back as they are
_PLAIN_TEXT = re.compile(r"[^\\\x00-\x1f\x7f]*")


def kinds(values: Sequence[Any]) -> tuple[str, ...] | None:
    """The kind of each bound value; ``None`` when one has no kind that an analysis holds for
    (it is then analysed with its very values, or refused: NaN, a type without a literal)."""
    out = []
    for value in values:
        kind = _kind(value)
        if kind is None:
            return None
        out.append(kind)
    return tuple(out)


def _kind(value: Any) -> str | None:
    """The kind of ``value``: its literal's tokens and the Python type the planner reads it as."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "string" if _PLAIN_TEXT.fullmatch(value) or _read_back(value) else None
    if isinstance(value, int):
        return "-integer" if value < 0 else "integer"
    if isinstance(value, float) and math.isfinite(value) and _DECIMAL.fullmatch(repr(abs(value))):
        return "-float" if math.copysign(1.0, value) < 0 else "float"
    return None


def _read_back(text: str) -> bool:
    """Whether the literal of ``text`` is one string token reading ``text``."""
    found = sql_tokens(sql_literal(text))
    return len(found) == 1 and found[0].token_type == TokenType.STRING and found[0].text == text


@dataclass(frozen=True)
class _Slot:
    """A stand-in for one ``?``: its Python value in pushed filters and its literal's text in the
    engine SQL (without a sign: a negative value's ``-`` is the statement's)."""

    kind: str
    value: Any
    text: str


def _text(kind: str, literal: str) -> str:
    return literal[1:] if kind.startswith("-") else literal


class _StandIns:
    """Sentinel values of the given kinds, one per ``?``, unique to this object."""

    def __init__(self, slot_kinds: tuple[str, ...]):
        letters, digits = secrets.token_hex(8), "".join(secrets.choice("123456789") for _ in range(9))
        self.slots: list[_Slot] = []
        for i, kind in enumerate(slot_kinds):
            value: Any
            if kind in _CONSTANTS:
                self.slots.append(_Slot(kind, None, kind))
                continue
            if kind == "string":
                value = f"hudi-flight-parameter-{letters}-{i:04d}"
                literal = f"'{value}'"
            elif kind.endswith("integer"):
                value = int(f"{digits}{i:04d}7")
                literal = str(value)
            else:  # float: 14 significant digits, the last never 0, so its text is what Python writes
                value = float(f"{digits[:5]}.{digits[5:]}{i:04d}7")
                literal = repr(value)
            if kind.startswith("-"):
                value, literal = -value, "-" + literal
            self.slots.append(_Slot(kind, value, _text(kind, literal)))

    @property
    def literals(self) -> list[str]:
        return [("-" if s.kind.startswith("-") else "") + s.text for s in self.slots]


@dataclass(frozen=True)
class GenericAnalysis:
    """A statement's analysis made with stand-in values, valid for every binding of their kinds."""

    analysis: Analysis
    slots: tuple[_Slot, ...]  # the stand-ins (constants included)
    sql: str  # the engine SQL with the stand-ins' literals
    pattern: re.Pattern[str]  # any stand-in's literal text in ``sql``

    def bind(self, values: Sequence[Any]) -> Analysis:
        """The analysis of the statement with ``values`` (of this analysis's kinds), equal to
        analysing it with them."""
        by_value: dict[tuple[type, Any], Any] = {}
        by_text: dict[str, tuple[str, Any]] = {}
        for stand_in, value in zip(self.slots, values):
            if stand_in.kind not in _CONSTANTS:
                by_value[(type(stand_in.value), stand_in.value)] = value
                by_text[stand_in.text] = (stand_in.kind, value)
        analysis = self.analysis
        scans = [_bound_scan(spec, by_value) for spec in analysis.plan.scans]
        scan = analysis.scan
        if scan is not None:  # a plain scan is usually the plan's own scan: bound once
            same = next((i for i, spec in enumerate(analysis.plan.scans) if spec is scan), None)
            scan = _bound_scan(scan, by_value) if same is None else scans[same]
        plan = SelectPlan(scans, _Writer(self.sql, self.pattern, by_text))
        return Analysis(plan, scan, analysis.count_star)


@dataclass(frozen=True)
class _Writer:
    """Writes the engine SQL of a binding: the stand-ins' literals replaced by the values', in one pass."""

    sql: str
    pattern: re.Pattern[str]
    values: dict[str, tuple[str, Any]]  # a stand-in's text -> the kind and value in its place

    def __call__(self) -> str:
        texts = {text: _text(kind, sql_literal(value)) for text, (kind, value) in self.values.items()}
        return self.pattern.sub(lambda found: texts[found.group()], self.sql)


def _bound_scan(spec: ScanSpec, by_value: dict[tuple[type, Any], Any]) -> ScanSpec:
    """``spec`` (a new object: scans are not shared between analyses) with the bound values in
    place of the stand-ins in its filters."""

    def bound(value: Any) -> Any:
        return by_value.get((type(value), value), value)

    filters = tuple(
        (column, op, tuple(map(bound, value)) if isinstance(value, tuple) else bound(value))
        for column, op, value in spec.options.filters
    )
    options = spec.options if filters == spec.options.filters else spec.options.replace(filters=filters)
    return ScanSpec(spec.view, spec.table, options)


def analyze_generic(
    statement: Template, slot_kinds: tuple[str, ...], resolve: Resolver, limits: Limits
) -> GenericAnalysis | None:
    """The analysis of ``statement`` for every binding of ``slot_kinds`` (module docstring);
    ``None`` when no analysis holds for all of them (the statement is then analysed per binding).

    Raises:
        Exception: what ``resolve`` raises (an unknown table, a missing right): not a property
            of the kinds, so it is not decided here.
    """
    first, second = _StandIns(slot_kinds), _StandIns(slot_kinds)
    resolving = _Resolving(resolve)
    try:
        analysis, query = analyze_parsed(statement, first.literals, resolving, limits)
        other, _ = analyze_parsed(statement, second.literals, resolving.replaying(), limits)
        sql, other_sql = analysis.plan.sql, other.plan.sql
    except Exception:
        if resolving.failed is not None:
            raise resolving.failed from None
        return None  # refused or unwritable with the stand-ins: the values decide
    placed = [s for s in first.slots if s.kind not in _CONSTANTS]
    if not placed or resolving.replayed != len(resolving.answers):
        return None  # nothing to put in place: the analysis kept per text and values does
    if not _in_value_places(query, placed) or any(sql.count(s.text) != 1 for s in placed):
        return None
    pattern = re.compile("|".join(re.escape(s.text) for s in placed))
    generic = GenericAnalysis(analysis, tuple(first.slots), sql, pattern)
    exchanged = generic.bind([s.value for s in second.slots])
    same = (
        exchanged.plan.sql == other_sql
        and _same_scans(exchanged.plan.scans, other.plan.scans)
        and _same_scans([exchanged.scan] if exchanged.scan else [], [other.scan] if other.scan else [])
        and exchanged.count_star == other.count_star
    )
    return generic if same else None


def _same_scans(ours: Sequence[ScanSpec], theirs: Sequence[ScanSpec]) -> bool:
    """Equal scans, their filter values of the same Python types (``1 == 1.0 == True``)."""
    if list(ours) != list(theirs):
        return False
    return all(
        [type(f[-1]) for f in a.options.filters] == [type(f[-1]) for f in b.options.filters]
        for a, b in zip(ours, theirs)
    )


class _Resolving:
    """``resolve`` for the first analysis, remembering what it answered (and what it raised: a
    failure of resolving, not of the stand-ins); the same answers, in order, for the second."""

    def __init__(self, resolve: Resolver):
        self.resolve = resolve
        self.answers: list[tuple[str, Any, ReadOptions]] = []
        self.replayed: int | None = None
        self.failed: Exception | None = None

    def __call__(self, table: exp.Table) -> tuple[str, Any, ReadOptions]:
        if self.replayed is not None:
            if self.replayed >= len(self.answers):
                raise _OtherReferences()
            self.replayed += 1
            return self.answers[self.replayed - 1]
        try:
            answer = self.resolve(table)
        except Exception as err:
            self.failed = err
            raise
        self.answers.append(answer)
        return answer

    def replaying(self) -> "_Resolving":
        self.replayed = 0
        return self


class _OtherReferences(Exception):
    """The second analysis resolved other references than the first."""


def _in_value_places(query: exp.Query, placed: Sequence[_Slot]) -> bool:
    """Whether each stand-in's literal is in the query once, as an operand of a comparison,
    ``IN`` or ``BETWEEN`` (through a sign and parentheses)."""
    strings = {s.value for s in placed if s.kind == "string"}
    numbers = {s.text for s in placed if s.kind != "string"}
    seen: list[str] = []
    for literal in query.find_all(exp.Literal):
        name = literal.this if literal.is_string else None
        if (literal.is_string and name not in strings) or (not literal.is_string and literal.this not in numbers):
            continue
        seen.append(str(literal.this))
        node: exp.Expression = literal
        while isinstance(node.parent, (exp.Neg, exp.Paren)):
            node = node.parent
        if not isinstance(node.parent, _VALUE_PLACES):
            return False
    return sorted(seen) == sorted(s.value if s.kind == "string" else s.text for s in placed)


__all__ = ["GenericAnalysis", "analyze_generic", "kinds"]
