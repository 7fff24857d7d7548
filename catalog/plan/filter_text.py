"""The text form of filters: ``"region = 'us' and fare >= 10"`` <-> ``(column, op, value)`` tuples.

One grammar (docs/filters.md) for every surface that takes filters as text (the CLI's ``--filter``,
``HudiTable.read(filters="...")``); it produces the wire-form tuples of :mod:`catalog.plan.filters`,
so binding, pruning and row filtering stay in one place::

    filters    := filter ( AND filter )*
    filter     := column op value
                | column [NOT] IN "(" value ( "," value )* ")"
                | column IS [NOT] NULL
    op         := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    column     := word | `quoted` | "quoted"
    value      := 'text' | "text" | number | TRUE | FALSE | word

A quote inside a quoted text is doubled (``'O''Hare'``). A number is a decimal literal (``10``,
``-2.5``, ``1e3``) and becomes an int or a float; a bare word that is not a number nor
``true``/``false`` is text (``region = us``); ``null`` is no value (use ``IS NULL``). Keywords are
case-insensitive. Anything else (``OR``, a missing parenthesis, a dangling operator) is refused
with an error naming the token and its position: a filter is never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from catalog.errors import InvalidQueryError, shown
from catalog.plan.filters import COMPARISONS, FilterTuple, FilterValue, normalize_op

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<squote>'(?:[^']|'')*')
  | (?P<dquote>"(?:[^"]|"")*")
  | (?P<backquote>`(?:[^`]|``)*`)
  | (?P<op><=|>=|<>|!=|==|=|<|>)
  | (?P<punct>[(),])
  | (?P<word>[^\s'"`(),=<>!]+)
  | (?P<bad>['"`!])
    """,
    re.VERBOSE,
)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_PLAIN_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = frozenset({"and", "or", "not", "in", "is", "null", "true", "false"})


def _filter_text(text: str) -> str:
    """The filter text as an error message quotes it (cut: it may be long)."""
    return shown(repr(text), 122)


class FilterSyntaxError(InvalidQueryError):
    """A filter text does not follow the grammar; the message names the token and its position."""


@dataclass(frozen=True)
class _Token:
    kind: str  # word, text (a quoted value), name (a quoted column), op, punct, end
    text: str  # the token's value (quotes removed for text and name)
    position: int  # 1-based character position in the filter text
    raw: str  # the token as written


def _tokens(text: str) -> list[_Token]:
    tokens = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m is not None  # every character matches one alternative (bad catches the rest)
        kind, raw = m.lastgroup or "", m.group()
        if kind == "bad":
            what = f"unmatched quote {raw}" if raw != "!" else "'!' without '=' (not equal is !=)"
            raise FilterSyntaxError(f"filter {_filter_text(text)}: {what} at position {pos + 1}")
        if kind != "space":
            if kind in ("squote", "dquote", "backquote"):
                quote = raw[0]
                value = raw[1:-1].replace(quote * 2, quote)
                kind = "name" if quote == "`" else "text"
            else:
                value = raw
            tokens.append(_Token(kind, value, pos + 1, raw))
        pos = m.end()
    tokens.append(_Token("end", "", len(text) + 1, "end of filter"))
    return tokens


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def fail(self, token: _Token, expected: str) -> FilterSyntaxError:
        shown = token.raw if token.kind == "end" else repr(token.raw)
        return FilterSyntaxError(
            f"filter {_filter_text(self.text)}: unexpected {shown} at position {token.position}; expected {expected}"
        )

    def keyword(self, token: _Token, *words: str) -> bool:
        return token.kind == "word" and token.text.lower() in words

    def expect_keyword(self, word: str, expected: str) -> None:
        token = self.take()
        if not self.keyword(token, word):
            raise self.fail(token, expected)

    def filters(self) -> list[FilterTuple]:
        out = [self.filter()]
        while True:
            token = self.take()
            if token.kind == "end":
                return out
            if self.keyword(token, "and"):
                out.append(self.filter())
                continue
            if self.keyword(token, "or"):
                raise FilterSyntaxError(
                    f"filter {_filter_text(self.text)}: OR at position {token.position} is not supported; "
                    "filters are ANDed (use IN for alternatives of one column)"
                )
            raise self.fail(token, "AND or the end of the filter")

    def filter(self) -> FilterTuple:
        token = self.take()
        if token.kind == "name" or (token.kind == "text" and token.raw.startswith('"')):
            column = token.text
        elif token.kind == "word" and token.text.lower() not in _KEYWORDS:
            column = token.text
        else:
            raise self.fail(token, "a column name")
        token = self.take()
        if token.kind == "op":
            return (column, normalize_op(token.text), self.scalar())
        if self.keyword(token, "in"):
            return (column, "in", self.value_list())
        if self.keyword(token, "not"):
            self.expect_keyword("in", "IN after NOT")
            return (column, "not in", self.value_list())
        if self.keyword(token, "is"):
            negated = self.keyword(self.peek(), "not")
            if negated:
                self.take()
            self.expect_keyword("null", "NULL")
            return (column, "is not null" if negated else "is null", None)
        raise self.fail(token, f"an operator ({' '.join(COMPARISONS)}, IN, NOT IN, IS NULL, IS NOT NULL)")

    def value_list(self) -> tuple[FilterValue, ...]:
        token = self.take()
        if token.kind != "punct" or token.text != "(":
            raise self.fail(token, "'(' opening the list of values")
        values = [self.scalar()]
        while True:
            token = self.take()
            if token.kind == "punct" and token.text == ")":
                return tuple(values)
            if token.kind == "punct" and token.text == ",":
                values.append(self.scalar())
                continue
            raise self.fail(token, "',' or ')'")

    def scalar(self) -> FilterValue:
        token = self.take()
        if token.kind == "text":
            return token.text
        if token.kind != "word":
            raise self.fail(token, "a value ('text', a number, true or false)")
        word = token.text
        if _NUMBER.fullmatch(word):
            return int(word) if _INTEGER.fullmatch(word) else float(word)
        lowered = word.lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        if lowered == "null":
            raise FilterSyntaxError(
                f"filter {_filter_text(self.text)}: null at position {token.position} is not a value; "
                "use IS NULL or IS NOT NULL"
            )
        if lowered in _KEYWORDS:
            raise self.fail(token, f"a value (quote it, '{word}', to mean the text)")
        return word


def parse_filters(text: str) -> list[FilterTuple]:
    """The ``(column, op, value)`` tuples of one filter text (its filters ANDed).

    Raises:
        FilterSyntaxError: the text does not follow the grammar (the message names the token
            and its 1-based position).
    """
    if not isinstance(text, str):
        raise FilterSyntaxError(f"a filter text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise FilterSyntaxError("the filter text is empty; expected e.g. region = 'us'")
    return _Parser(text).filters()


def parse_filter_texts(texts: Iterable[str]) -> list[FilterTuple]:
    """All filters of several texts (each may hold ANDed filters), ANDed together."""
    return [f for text in texts for f in parse_filters(text)]


def _quoted(text: str, quote: str) -> str:
    return quote + text.replace(quote, quote * 2) + quote


def _value_text(value: FilterValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _quoted(value, "'")
    raise FilterSyntaxError(f"a filter value of type {type(value).__name__} has no text form")


def _column_text(column: str) -> str:
    plain = _PLAIN_WORD.fullmatch(column) and column.lower() not in _KEYWORDS
    return column if plain else _quoted(column, '"')  # as SQL quotes identifiers


def format_filter(item: FilterTuple) -> str:
    """The text form of one filter tuple (``parse_filters`` reads it back as the same tuple)."""
    column, op, value = item
    op = normalize_op(op)
    if op in ("is null", "is not null"):
        return f"{_column_text(column)} {op.upper()}"
    if op in ("in", "not in"):
        items = value if isinstance(value, (list, tuple)) else [value]
        return f"{_column_text(column)} {op.upper()} ({', '.join(_value_text(v) for v in items)})"
    return f"{_column_text(column)} {op} {_value_text(value)}"


def format_filters(items: Iterable[FilterTuple]) -> str:
    """The text form of filters ANDed together; also a valid SQL ``WHERE`` condition."""
    return " AND ".join(format_filter(item) for item in items)


__all__ = ["FilterSyntaxError", "format_filter", "format_filters", "parse_filter_texts", "parse_filters"]
