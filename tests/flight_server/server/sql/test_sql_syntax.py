"""SQL syntax errors name the line, column and token, in the user's words (no parser internals)."""

from __future__ import annotations

import pytest

from catalog.errors import InvalidQueryError
from flight_server.server.sql.planner import parse_query
from flight_server.server.sql.query import sql_tokens

INTERNALS = ("<class", "sqlglot", "Token", "\x1b", "Required keyword")


@pytest.mark.parametrize("sql, message", [
    ("select * from t where a = 1 *", "syntax error at line 1, column 29 near '*': an operand or clause is missing"),
    ("select * from t where", "syntax error at line 1, column 17 near 'where': an operand or clause is missing"),
    ("selec 1", "syntax error at line 1, column 7 near '1': unexpected token"),
    ("select (1", "syntax error at line 1, column 9 near '1': expected ')'"),
    ("select 1;\nselect 2 from where x", "syntax error at line 2, column 15 near 'where': expected a table name"),
])
def test_parse_errors_name_line_column_and_token(sql, message):
    with pytest.raises(ValueError) as err:
        parse_query(sql)
    assert str(err.value) == message
    assert not any(leak in str(err.value) for leak in INTERNALS)


def test_text_that_does_not_tokenize_says_what_may_be_open():
    with pytest.raises(InvalidQueryError) as err:
        sql_tokens("select 'abc")
    assert str(err.value) == "syntax error: the SQL does not tokenize (an unterminated quote or comment?)"


@pytest.mark.parametrize("sql, near", [
    ("select (\"a\u202eb\"", "near '\"a\\u202eb\"'"),  # a bidirectional override, escaped
    ("select (\"x\x07" + "y" * 500 + "\"", "near '\"x\\u0007" + "y" * 32 + "…'"),  # a bell, and cut
])
def test_a_quoted_token_cannot_reorder_or_flood_the_message(sql, near):
    with pytest.raises(ValueError) as err:
        parse_query(sql)
    message = str(err.value)
    assert near in message and message.isprintable() and len(message) < 200, message
