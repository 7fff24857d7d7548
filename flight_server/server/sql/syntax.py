"""SQL syntax errors in the user's words: the line, column and token where sqlglot stopped, and
what it expected, without the parser's class names, token reprs or terminal escapes.

``select * from t where a = 1 *`` answers ``syntax error at line 1, column 29 near '*': an
operand or clause is missing``, as the filter texts name the token and its position.
"""

from __future__ import annotations

import re

from sqlglot.errors import ParseError, SqlglotError, TokenError

from catalog.errors import shown

#: sqlglot's descriptions -> what the user reads (the rest are cleaned of internals below)
_REASONS = (
    (re.compile(r"^Required keyword: '\w+' missing for "), "an operand or clause is missing"),
    (re.compile(r"^Invalid expression / Unexpected token"), "unexpected token"),
    (re.compile(r"^Expected table name"), "expected a table name"),
)
_INTERNALS = re.compile(r"<class '[^']*'>|<Token [^>]*>|\x1b\[[0-9;]*m")
MAX_SHOWN = 40  # characters of the offending token quoted in the message


def syntax_error(err: SqlglotError) -> str:
    """The message of a SQL text sqlglot could not tokenize or parse."""
    if isinstance(err, TokenError):
        return "syntax error: the SQL does not tokenize (an unterminated quote or comment?)"
    details = err.errors[0] if isinstance(err, ParseError) and err.errors else None
    if details is None:
        return f"syntax error: {_reason(str(err).splitlines()[0] if str(err) else '')}"
    token = str(details.get("highlight") or "")
    line, column = int(details.get("line") or 0), int(details.get("col") or 0)
    if token and "\n" not in token and len(token) <= column:
        column -= len(token) - 1  # sqlglot counts to the token's end
    near = f" near '{shown(token, MAX_SHOWN)}'" if token else " at the end of the SQL"
    return f"syntax error at line {line}, column {column}{near}: {_reason(str(details.get('description') or ''))}"


_EXPECTING = re.compile(r"^Expecting (\S+)$")


def _reason(description: str) -> str:
    expecting = _EXPECTING.match(description)
    if expecting:
        return f"expected {expecting.group(1)!r}"
    for pattern, reason in _REASONS:
        if pattern.search(description):
            return reason
    cleaned = _INTERNALS.sub("", description).strip(" .:")
    return shown(cleaned, 200) if cleaned else "cannot parse"


__all__ = ["syntax_error"]
