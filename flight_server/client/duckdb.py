"""DuckDB over a hudi-flight server: a relation on the streaming result of a pushed-down plan.

::

    import duckdb
    from flight_server.client import HudiFlightClient
    from flight_server.client.duckdb import scan

    con = duckdb.connect()
    with HudiFlightClient("grpc://127.0.0.1:8815") as client:
        rel = scan(con, client, "ns.trips", columns=["city", "fare"], filters=[("fare", ">", 10)])
        rel.aggregate("city, avg(fare)").fetchall()

What is pushed into the plan (and so evaluated on the server, which prunes partitions, files and
row groups with it): exactly the ``columns``, ``filters`` and ``limit`` given here, plus the read
options (``as_of``, ``query_type``, ``start``, ``end``). Whatever SQL then runs on the relation
(further filters, joins, aggregates) runs in the caller's DuckDB over the streamed batches;
DuckDB does not hand a relation's own projections or filters back to its Arrow stream, so pass
them here to have them pushed.

The relation reads a ``pyarrow.RecordBatchReader`` (endpoints fetched in parallel, no
whole-table copy): like any stream it can be consumed once; call :func:`scan` again to re-read.
"""

from __future__ import annotations

from typing import Any, Sequence

from catalog.optional import optional_dependency
from flight_server.client.session import HudiFlightClient

with optional_dependency("duckdb", "the DuckDB source"):
    import duckdb


def scan(
    con: duckdb.DuckDBPyConnection,
    client: HudiFlightClient,
    table: str,
    *,
    columns: Sequence[str] | None = None,
    filters: Sequence[Sequence[Any]] = (),
    limit: int | None = None,
    **options: Any,
) -> duckdb.DuckDBPyRelation:
    """A DuckDB relation over ``table`` read with ``columns``, ``filters`` (``(column, op,
    value)`` tuples, as ``HudiTable.read``) and ``limit`` pushed into the server's plan.

    ``options``: the other read options (``as_of``, ``query_type``, ``start``, ``end``).
    """
    reader = client.reader(
        table,
        columns=list(columns) if columns is not None else None,
        filters=[tuple(f) for f in filters],
        limit=limit,
        **options,
    )
    return con.from_arrow(reader)


__all__ = ["scan"]
