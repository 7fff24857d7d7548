"""Bounds on SQL text, checked before the engine sees it (configuration keys of
:class:`~flight_server.server.security.limits.Limits`).

- ``max_sql_tokens``: the words and symbols of a statement, counted before it is parsed (parsing
  costs CPU per token: a 1 MiB IN list took seconds);
- ``max_sql_depth``: how deeply its expressions nest once parsed (``a + a + ...`` nests without
  parentheses; the engine and the rewrite recurse per level);
- ``max_in_values``: the values of every ``IN (...)`` list together, as on the JSON path
  (counted on the tokens before parsing, and again on the parsed statement);
- ``max_sql_generated_values``: the elements or characters one function call may build. DuckDB's
  ``memory_limit`` does not count list and string values, and a single call such as
  ``len(range(300000000))`` or ``repeat('x', 10000000000)`` cannot be interrupted while it runs, so
  ``range``/``generate_series``, ``repeat``, ``lpad``/``rpad``, ``list_resize``/``array_resize``,
  ``bar`` and ``printf``/``format`` widths must name their size as an integer literal within the
  bound. Aggregates that grow one value per row (``string_agg``, ``list``) are stopped by the
  engine's watchdog instead (:mod:`.watchdog`), which they let run between chunks.
"""

from __future__ import annotations

import re
from typing import Any

from sqlglot import exp
from sqlglot.tokens import TokenType

from flight_server.server.security.limits import LimitExceededError, Limits

#: DuckDB functions (lower-case name) whose argument at this position is the size of what they build
_SIZE_ARGUMENT = {"list_resize": 1, "array_resize": 1, "bar": 3}
_FORMATS = {"printf", "format"}
_WIDTH = re.compile(r"\d+")


def check_tokens(tokens: list[Any], limits: Limits) -> None:
    """Refuse a statement of more than ``max_sql_tokens`` tokens, or with more than
    ``max_in_values`` values in its ``IN (...)`` lists, before parsing it."""
    if len(tokens) > limits.max_sql_tokens:
        raise LimitExceededError("max_sql_tokens", limits.max_sql_tokens, f"the SQL has {len(tokens)} tokens")
    values = _in_list_values(tokens)
    if values > limits.max_in_values:
        raise LimitExceededError("max_in_values", limits.max_in_values, f"the SQL has {values} IN-list values")


def _in_list_values(tokens: list[Any]) -> int:
    """The values of the ``IN (a, b, ...)`` lists (not subqueries): top-level commas plus one."""
    total = 0
    for i, token in enumerate(tokens[:-2]):
        if token.token_type != TokenType.IN or tokens[i + 1].token_type != TokenType.L_PAREN:
            continue
        if tokens[i + 2].token_type in (TokenType.SELECT, TokenType.WITH, TokenType.R_PAREN):
            continue
        depth, count = 0, 1
        for inner in tokens[i + 1:]:
            if inner.token_type == TokenType.L_PAREN:
                depth += 1
            elif inner.token_type == TokenType.R_PAREN:
                depth -= 1
                if depth == 0:
                    break
            elif inner.token_type == TokenType.COMMA and depth == 1:
                count += 1
        total += count
    return total


def check_query(query: exp.Query, limits: Limits) -> None:
    """Depth, IN-list and generated-size bounds of a parsed statement."""
    _check_depth(query, limits.max_sql_depth)
    values = sum(len(node.expressions) for node in query.find_all(exp.In))
    if values > limits.max_in_values:
        raise LimitExceededError("max_in_values", limits.max_in_values, f"the SQL has {values} IN-list values")
    for func in query.find_all(exp.Func):
        _check_function(func, limits.max_sql_generated_values)


def _check_depth(query: exp.Query, limit: int) -> None:
    todo: list[tuple[Any, int]] = [(query, 1)]
    while todo:
        node, depth = todo.pop()
        if depth > limit:
            raise LimitExceededError("max_sql_depth", limit, "the SQL's expressions nest deeper")
        todo.extend((child, depth + 1) for child in node.iter_expressions())


def _refused(name: str, limit: int, what: str) -> LimitExceededError:
    return LimitExceededError(
        "max_sql_generated_values", limit, f"{name} {what} (it must be an integer literal within the bound)"
    )


def _size(node: Any) -> int | None:
    """The value of an integer literal (``None``: anything else)."""
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return int(node.this)
        except ValueError:
            return None
    if isinstance(node, exp.Neg):
        inner = _size(node.this)
        return -inner if inner is not None else None
    return None


def _literal(node: Any, name: str, limit: int) -> int:
    size = _size(node)
    if size is None:
        raise _refused(name, limit, "builds a value of unbounded size")
    return size


def _bounded(node: Any, name: str, limit: int) -> int:
    size = _literal(node, name, limit)
    if abs(size) > limit:
        raise _refused(name, limit, "builds a value longer than the bound")
    return size


def _check_function(func: exp.Func, limit: int) -> None:
    if isinstance(func, exp.GenerateSeries):
        name = "range/generate_series"
        start = _literal(func.args.get("start"), name, limit)
        end = _literal(func.args.get("end"), name, limit)
        step = _literal(func.args["step"], name, limit) if func.args.get("step") is not None else 1
        if step == 0 or (end - start) // step + 1 > limit:
            raise _refused(name, limit, "builds a list longer than the bound")
        return
    if isinstance(func, exp.Repeat):
        times = _bounded(func.args.get("times"), "repeat", limit)
        text = func.this
        width = len(text.this) if isinstance(text, exp.Literal) and text.is_string else 1
        if times * width > limit:
            raise _refused("repeat", limit, "builds a value longer than the bound")
        return
    if isinstance(func, exp.Pad):
        _bounded(func.args.get("expression"), "lpad/rpad", limit)
        return
    name = (func.name if isinstance(func, exp.Anonymous) else func.sql_name()).lower()
    if name in _SIZE_ARGUMENT:
        arguments = func.expressions if isinstance(func, exp.Anonymous) else [func.this, *func.expressions]
        position = _SIZE_ARGUMENT[name]
        _bounded(arguments[position] if len(arguments) > position else None, name, limit)
    elif name in _FORMATS:
        pattern = func.this if not isinstance(func, exp.Anonymous) else (func.expressions or [None])[0]
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise _refused(name, limit, "takes a format that is not a string literal")
        if any(int(width) > limit for width in _WIDTH.findall(pattern.this)):
            raise _refused(name, limit, "pads a value wider than the bound")


__all__ = ["check_query", "check_tokens"]
