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
  bound (a width or precision taken from an argument, printf's ``%*d`` or format's ``{:>{}}``, is
  refused). A lambda (``list_transform(range(n), x -> range(m))``) or list comprehension builds
  its values once per element, so what it builds times the elements of the list it is applied to
  must stay within the bound too; applied to a list of unknown size (a column), it may not build
  any. A built text repeated, or put in place of each match in another built text (``replace``,
  ``regexp_replace``), counts its length times the other. These are early refusals by name, not
  the guarantee (the engine's limits and the watchdog are). Aggregates that grow one value per
  row (``string_agg``, ``list``) are stopped by the engine's watchdog instead (:mod:`.watchdog`),
  which they let run between chunks.
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
#: sqlglot's names of DuckDB's lambda functions
_DUCKDB_NAMES = {"transform": "list_transform", "filter": "list_filter", "array_filter": "list_filter"}
_WIDTH = re.compile(r"\d+")
#: a printf width or precision taken from an argument (``%*d``, ``%.*f``)
_ARGUMENT_WIDTH = re.compile(r"%[-+ #0']*(?:\d*\$)?(?:\*|\d*\.\*)")
#: a format (fmt) replacement field holding another (``{:>{}}``: the width from an argument)
_NESTED_FIELD = re.compile(r"\{[^{}]*\{")


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
    _Generated(limits.max_sql_generated_values).check(query)


def _check_depth(query: exp.Query, limit: int) -> None:
    todo: list[tuple[Any, int]] = [(query, 1)]
    while todo:
        node, depth = todo.pop()
        if depth > limit:
            raise LimitExceededError("max_sql_depth", limit, "the SQL's expressions nest deeper")
        todo.extend((child, depth + 1) for child in node.iter_expressions())


def _refused(name: str, limit: int, what: str, hint: str = " (it must be an integer literal within the bound)"
             ) -> LimitExceededError:
    return LimitExceededError("max_sql_generated_values", limit, f"{name} {what}{hint}")


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
    return abs(size)


def _name(func: exp.Func) -> str:
    """The DuckDB name of ``func`` as a client would write it."""
    name = (func.name if isinstance(func, exp.Anonymous) else func.sql_name()).lower()
    return _DUCKDB_NAMES.get(name, name)


def _arguments(func: exp.Func) -> list[Any]:
    """The arguments of ``func`` in order."""
    return list(func.iter_expressions())


class _Generated:
    """Upper bounds of the values built inside each node of one statement, children first (one
    pass over the tree, without recursion: every node is sized once, whatever its nesting)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._sizes: dict[int, int] = {}

    def check(self, query: exp.Expr) -> None:
        """Raises: LimitExceededError (see :meth:`_size_of`)."""
        for node in reversed(list(query.bfs())):  # breadth first, reversed: every child before its parent
            self._sizes[id(node)] = self._size_of(node)

    def of(self, node: Any) -> int:
        """The values built inside ``node`` (already sized: a child of the node being sized)."""
        return self._sizes.get(id(node), 0) if node is not None else 0

    def _size_of(self, node: exp.Expr) -> int:
        """What ``node`` and its children build, a lambda's (or list comprehension's) body counted
        once per element it is applied to.

        Raises:
            LimitExceededError: a function past the bound, or a lambda that builds values applied
                to a list of unknown size or to so many elements that the product passes the bound.
        """
        if isinstance(node, exp.Comprehension):
            return self._applied("a list comprehension", node.args.get("iterator"), node.this)
        if isinstance(node, exp.Func):
            function = _lambda(node)
            if function is not None:
                items, *rest = _arguments(node)
                others = sum(self.of(arg) for arg in rest if arg is not function)
                return others + self._applied(_name(node), items, function.this)
            own = self._built(node)
        else:
            own = 0
        return own + sum(self.of(child) for child in node.iter_expressions())

    def _applied(self, name: str, items: Any, body: Any) -> int:
        """The values built by ``body`` applied to each element of ``items`` (and by ``items``)."""
        each, built = self.of(body), self.of(items)
        if not each:
            return built
        count = self._elements(items)
        if count is None:
            raise _refused(name, self.limit, "builds values for each element of a list of unknown size", "")
        if count * each > self.limit:
            raise LimitExceededError(
                "max_sql_generated_values", self.limit,
                f"{name} builds {each} values for each of {count} elements ({count * each} in all)",
            )
        return built + count * each

    def _elements(self, node: Any) -> int | None:
        """An upper bound of the elements of the list ``node`` builds from literals (``None``:
        unknown, e.g. a column's list)."""
        while isinstance(node, exp.Expr):
            built = self._built(node) if isinstance(node, exp.Func) else 0
            if built:
                return built
            if isinstance(node, exp.Array):
                return len(node.expressions)
            if isinstance(node, exp.Flatten) and self.of(node.this):
                return self.of(node.this)
            if isinstance(node, exp.Comprehension):
                node = node.args.get("iterator")
            elif isinstance(node, exp.Flatten) or (isinstance(node, exp.Func) and _lambda(node) is not None):
                node = _arguments(node)[0] if _arguments(node) else None
            else:
                return None
        return None

    def _built(self, func: exp.Func) -> int:
        """The elements or characters ``func`` itself builds (0: not one of the functions that
        build a value of a size given by an argument). Raises: LimitExceededError past the bound."""
        limit = self.limit
        if isinstance(func, exp.GenerateSeries):
            name = "range/generate_series"
            start = _literal(func.args.get("start"), name, limit)
            end = _literal(func.args.get("end"), name, limit)
            step = _literal(func.args["step"], name, limit) if func.args.get("step") is not None else 1
            count = (end - start) // step + 1 if step else 0
            if step == 0 or count > limit:
                raise _refused(name, limit, "builds a list longer than the bound")
            return max(count, 0)
        if isinstance(func, exp.Repeat):
            times = _bounded(func.args.get("times"), "repeat", limit)
            width = self._width(func.this)
            if times * width > limit:
                raise _refused("repeat", limit, "builds a value longer than the bound")
            return times * width
        if isinstance(func, (exp.Replace, exp.RegexpReplace)):
            name = "replace" if isinstance(func, exp.Replace) else "regexp_replace"
            if self._width(func.this) * self._width(func.args.get("replacement")) > limit:
                raise _refused(name, limit, "builds a value longer than the bound", " (a built text in a built text)")
            return 0  # what it may build is counted where its arguments are
        if isinstance(func, exp.Pad):
            return _bounded(func.args.get("expression"), "lpad/rpad", limit)
        name = _name(func)
        if name in _SIZE_ARGUMENT:
            arguments = _arguments(func)
            position = _SIZE_ARGUMENT[name]
            return _bounded(arguments[position] if len(arguments) > position else None, name, limit)
        if name in _FORMATS:
            return _format_width(func, name, limit)
        return 0

    def _width(self, node: Any) -> int:
        """The characters of a string literal, else of the values built inside ``node`` (at
        least 1: a column's value, bounded by the data)."""
        if isinstance(node, exp.Literal) and node.is_string:
            return max(1, len(node.this))
        return max(1, self.of(node))


def _format_width(func: exp.Func, name: str, limit: int) -> int:
    """The widths and precisions a ``printf``/``format`` pattern pads to: literal digits only (a
    ``*`` of printf or a nested ``{}`` of format takes them from an argument: refused)."""
    arguments = _arguments(func)
    pattern = arguments[0] if arguments else None
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise _refused(name, limit, "takes a format that is not a string literal")
    text = pattern.this
    if _ARGUMENT_WIDTH.search(text) or _NESTED_FIELD.search(text.replace("{{", "").replace("}}", "")):
        raise _refused(name, limit, "takes a width or precision from an argument", " (write it in the pattern)")
    widths = [int(width) for width in _WIDTH.findall(text)]
    if any(width > limit for width in widths):
        raise _refused(name, limit, "pads a value wider than the bound")
    return sum(widths)


def _lambda(func: exp.Func) -> exp.Lambda | None:
    """The lambda ``func`` applies to each element of its first argument, if any."""
    found = [arg for arg in _arguments(func)[1:] if isinstance(arg, exp.Lambda)]
    return found[0] if found else None


__all__ = ["check_query", "check_tokens"]
