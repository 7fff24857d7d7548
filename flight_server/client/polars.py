"""A lazy Polars source over a hudi-flight server (Polars' IO-plugin API).

::

    from flight_server.client.polars import scan_hudi
    lf = scan_hudi("grpc://127.0.0.1:8815", "ns.trips", as_of="20240101000000000")
    lf.filter(pl.col("city") == "sf").select("fare").head(10).collect()

Nothing is planned until the frame is collected. Polars then hands the source what the query
needs, and the source pushes it into the hudi-flight plan (the server prunes partitions, files and
row groups with it and streams only what is asked for):

* projection: the columns Polars asks for become the plan's ``columns``;
* predicate: every conjunct of an AND of simple tests (:func:`to_filters`) becomes a
  ``(column, op, value)`` filter. If any part cannot be sent, the parts that can are still sent
  and the *whole* predicate is also applied here in Polars, so a predicate is never dropped;
* limit: ``n_rows`` becomes the plan's ``limit`` when the whole predicate (if any) was sent;
  otherwise the source stops once ``n_rows`` rows passed the local filter.

The predicate arrives as a Polars expression; it is read through its JSON serialisation
(``Expr.meta.serialize``), the only public view of an expression's tree.
"""

from __future__ import annotations

import datetime
import json
import math
from typing import Any, Iterator

import pyarrow as pa

from catalog.optional import optional_dependency
from catalog.plan.options import ReadOptions
from flight_server.client.session import HudiFlightClient

with optional_dependency("polars", "the Polars source"):
    import polars as pl
    from polars.io.plugins import register_io_source

FilterTuple = tuple[Any, ...]

_COMPARISONS = {"Eq": "=", "NotEq": "!=", "Lt": "<", "LtEq": "<=", "Gt": ">", "GtEq": ">="}
_MIRRORED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_EPOCH = datetime.date(1970, 1, 1)
_SCALARS = {"Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64", "Float32", "Float64",
            "String", "Boolean", "Int", "Float", "Str", "Bool"}


class _NotPushable(Exception):
    """A part of the predicate that has no ``(column, op, value)`` form."""


def to_filters(predicate: pl.Expr, schema: pa.Schema) -> tuple[list[FilterTuple], bool]:
    """The service filters of ``predicate`` and whether they express all of it.

    Pushed: ``col <op> literal`` (either side; ``== != < <= > >=``), ``col.is_in([...])``,
    ``col.is_null()``, ``col.is_not_null()``, ANDed together, where the literal's type matches
    the column's (integers for integer or floating columns, finite floats for floating ones,
    strings for strings, booleans for booleans, dates for ``date32`` columns). ``>``/``>=`` on a
    floating column stay in Polars: Polars orders NaN above every number, Arrow compute does not.
    """
    tree = json.loads(predicate.meta.serialize(format="json"))
    filters: list[FilterTuple] = []
    complete = True
    for conjunct in _conjuncts(tree):
        try:
            filters.append(_filter(conjunct, schema))
        except _NotPushable:
            complete = False
    return filters, complete


def _conjuncts(node: Any) -> Iterator[Any]:
    binary = node.get("BinaryExpr") if isinstance(node, dict) else None
    if binary is not None and binary.get("op") in ("And", "LogicalAnd"):
        yield from _conjuncts(binary["left"])
        yield from _conjuncts(binary["right"])
    else:
        yield node


def _filter(node: Any, schema: pa.Schema) -> FilterTuple:
    if not isinstance(node, dict):
        raise _NotPushable
    if "BinaryExpr" in node:
        binary = node["BinaryExpr"]
        op = _COMPARISONS.get(binary.get("op"))
        if op is None:
            raise _NotPushable
        left, right = binary["left"], binary["right"]
        if _column_name(left) is None:
            left, right, op = right, left, _MIRRORED[op]
        column = _column(left, schema)
        dtype = schema.field(column).type
        value = _wire_value(_literal(right), dtype)
        if op in (">", ">=") and pa.types.is_floating(dtype):
            raise _NotPushable
        return (column, op, value)
    function = node.get("Function")
    if function is None:
        raise _NotPushable
    kind = function.get("function", {}).get("Boolean") if isinstance(function.get("function"), dict) else None
    inputs = function.get("input") or []
    if kind in ("IsNull", "IsNotNull") and len(inputs) == 1:
        return (_column(inputs[0], schema), "is null" if kind == "IsNull" else "is not null")
    if isinstance(kind, dict) and "IsIn" in kind and len(inputs) == 2:
        column = _column(inputs[0], schema)
        dtype = schema.field(column).type
        values = [_wire_value(value, dtype) for value in _list_literal(inputs[1])]
        if not values:
            raise _NotPushable
        return (column, "in", values)
    raise _NotPushable


def _column_name(node: Any) -> str | None:
    name = node.get("Column") if isinstance(node, dict) else None
    return name if isinstance(name, str) else None


def _column(node: Any, schema: pa.Schema) -> str:
    name = _column_name(node)
    if name is None or schema.get_field_index(name) < 0:
        raise _NotPushable
    return name


def _literal(node: Any) -> Any:
    literal = node.get("Literal") if isinstance(node, dict) else None
    if not isinstance(literal, dict):
        raise _NotPushable
    inner = literal.get("Scalar", literal.get("Dyn"))
    if not isinstance(inner, dict) or len(inner) != 1:
        raise _NotPushable
    ((kind, value),) = inner.items()
    if kind == "Date" and isinstance(value, int):
        return _EPOCH + datetime.timedelta(days=value)
    if kind not in _SCALARS or value is None:
        raise _NotPushable
    return value


def _list_literal(node: Any) -> list[Any]:
    """The values of an ``is_in`` list: Polars serialises them as an Arrow IPC stream."""
    literal = node.get("Literal") if isinstance(node, dict) else None
    scalar = literal.get("Scalar") if isinstance(literal, dict) else None
    data = scalar.get("List") if isinstance(scalar, dict) else None
    if not isinstance(data, list):
        raise _NotPushable
    try:
        table = pa.ipc.open_stream(bytes(data)).read_all()
    except (pa.ArrowInvalid, ValueError) as err:
        raise _NotPushable from err
    if table.num_columns != 1:
        raise _NotPushable
    values = table.column(0).to_pylist()
    if any(v is None for v in values):
        raise _NotPushable
    return values


def _wire_value(value: Any, dtype: pa.DataType) -> Any:
    """The JSON value to send for a literal the service compares exactly as Polars does (a date
    travels as ``YYYY-MM-DD``, which the service parses into the date column's type)."""
    if isinstance(value, bool):
        ok = pa.types.is_boolean(dtype)
    elif isinstance(value, int):
        ok = pa.types.is_integer(dtype) or pa.types.is_floating(dtype)
    elif isinstance(value, float):
        ok = pa.types.is_floating(dtype) and math.isfinite(value)
    elif isinstance(value, str):
        ok = pa.types.is_string(dtype) or pa.types.is_large_string(dtype)
    elif isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        if pa.types.is_date32(dtype):
            return value.isoformat()
        ok = False
    else:
        ok = False
    if not ok:
        raise _NotPushable
    return value


def scan_hudi(
    uri_or_client: str | HudiFlightClient,
    table: str,
    *,
    as_of: str | None = None,
    query_type: str = "snapshot",
    start: str | None = None,
    end: str | None = None,
    **client_kwargs: Any,
) -> pl.LazyFrame:
    """A ``LazyFrame`` over ``table`` served by a hudi-flight server.

    Args:
        uri_or_client: a server URI (a client is opened for each collect, with ``client_kwargs``:
            ``token``, ``user``, ``password``, ``tls_root_certs``, ...) or an open
            :class:`HudiFlightClient` (reused, not closed).
        table: ``namespace.table``.
        as_of, query_type, start, end: the read options of ``HudiTable.read``.
    """
    base = ReadOptions(query_type=query_type, as_of=as_of, start=start, end=end)

    def client() -> tuple[HudiFlightClient, bool]:
        if isinstance(uri_or_client, HudiFlightClient):
            return uri_or_client, False
        return HudiFlightClient(uri_or_client, **client_kwargs), True

    # Asked now, not when Polars first needs it: Polars wraps what a schema callable raises in a
    # ComputeError, and a stopped server must reach the caller as the session's ConnectionError.
    session, owned = client()
    try:
        schema = session.schema(table, base)
    finally:
        if owned:
            session.close()
    polars_schema = pl.from_arrow(schema.empty_table()).schema  # type: ignore[union-attr]

    def source(
        with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None, batch_size: int | None
    ) -> Iterator[pl.DataFrame]:
        filters, complete = to_filters(predicate, schema) if predicate is not None else ([], True)
        local = None if complete else predicate
        columns = with_columns
        if columns is not None and local is not None:
            needed = set(columns) | set(local.meta.root_names())
            columns = [name for name in schema.names if name in needed]
        options = base.replace(
            columns=tuple(columns) if columns is not None else None,
            filters=tuple(filters),
            limit=n_rows if local is None else None,
        )
        session, owned = client()
        try:
            yield from _frames(session.reader(table, options), local, with_columns, n_rows)
        finally:
            if owned:
                session.close()

    return register_io_source(
        source, schema=polars_schema, explain_name="hudi-flight", explain_detail=table
    )


def _frames(
    reader: pa.RecordBatchReader, local: pl.Expr | None, columns: list[str] | None, n_rows: int | None
) -> Iterator[pl.DataFrame]:
    remaining = n_rows
    with reader:
        for batch in reader:
            frame = pl.from_arrow(batch)
            assert isinstance(frame, pl.DataFrame)
            if local is not None:
                frame = frame.filter(local)
                if columns is not None:
                    frame = frame.select(columns)
            if remaining is not None:
                frame = frame.head(remaining)
                remaining -= frame.height
            yield frame
            if remaining == 0:
                return


__all__ = ["scan_hudi", "to_filters"]
