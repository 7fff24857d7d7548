"""Catalog statements answered as reads: ``SHOW TABLES``, ``DESCRIBE`` and ``SHOW COLUMNS``.

SQL consoles send these to find their way around; they are not SELECTs, so :mod:`.query` would
refuse them as statements that are not reads. Recognised forms (keywords in any case, names
quoted or not):

- ``SHOW TABLES [FROM | IN namespace]``
- ``DESCRIBE [TABLE] [catalog.][namespace.]table`` (also ``DESC``)
- ``SHOW COLUMNS (FROM | IN) [namespace.]table [(FROM | IN) namespace]``
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType

from flight_server.server.sql.planner import DIALECT


@dataclass(frozen=True)
class ShowTables:
    """``SHOW TABLES``: the tables of ``namespace`` (``None``: of every namespace)."""

    namespace: str | None = None


@dataclass(frozen=True)
class DescribeTable:
    """``DESCRIBE t`` / ``SHOW COLUMNS FROM t``: the columns of one table."""

    catalog: str | None
    namespace: str | None
    table: str


CatalogStatement = ShowTables | DescribeTable

_NAME_TOKENS = (TokenType.VAR, TokenType.IDENTIFIER)


def catalog_statement(sql: str, tokens: Sequence[Token] | None = None) -> CatalogStatement | None:
    """The catalog statement ``sql`` is, ``None`` when it is none of them (or does not tokenize);
    ``tokens``: its tokens, when the caller has them."""
    if tokens is None:
        try:
            tokens = Dialect.get_or_raise(DIALECT).tokenize(sql)
        except SqlglotError:
            return None
    tokens = [t for t in tokens if t.token_type != TokenType.SEMICOLON]
    words = [t.text.upper() if t.token_type != TokenType.IDENTIFIER else "" for t in tokens]  # quoted: no keyword
    if words[:2] == ["SHOW", "TABLES"]:
        if len(tokens) == 2:
            return ShowTables()
        name = _name(tokens[3:]) if len(tokens) > 3 and words[2] in ("FROM", "IN") else None
        return ShowTables(name[-1]) if name is not None and len(name) == 1 else None
    if words[:1] in (["DESCRIBE"], ["DESC"]):
        rest = tokens[2:] if words[1:2] == ["TABLE"] else tokens[1:]
        name = _name(rest)
        return _describe(name) if name is not None else None
    if words[:2] == ["SHOW", "COLUMNS"] and len(words) > 3 and words[2] in ("FROM", "IN"):
        rest = tokens[3:]
        cut = next((i for i, t in enumerate(rest) if words[3 + i] in ("FROM", "IN")), None)
        name = _name(rest[:cut] if cut is not None else rest)
        if name is None:
            return None
        if cut is not None:
            namespace = _name(rest[cut + 1:])
            if namespace is None or len(namespace) != 1 or len(name) != 1:
                return None
            name = namespace + name
        return _describe(name)
    return None


def _name(tokens: list) -> list[str] | None:
    """``a[.b[.c]]`` as its parts; ``None`` when ``tokens`` are anything else."""
    if not tokens or len(tokens) % 2 == 0:
        return None
    parts = []
    for i, token in enumerate(tokens):
        if i % 2:
            if token.token_type != TokenType.DOT:
                return None
        elif token.token_type in _NAME_TOKENS or (token.text.isidentifier() and token.token_type != TokenType.STRING):
            parts.append(token.text)
        else:
            return None
    return parts if len(parts) <= 3 else None


def _describe(parts: list[str]) -> DescribeTable:
    padded: list[str | None] = [None] * (3 - len(parts)) + list(parts)
    return DescribeTable(padded[0], padded[1], str(padded[2]))


__all__ = ["CatalogStatement", "DescribeTable", "ShowTables", "catalog_statement"]
