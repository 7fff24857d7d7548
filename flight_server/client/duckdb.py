"""DuckDB over a hudi-flight server: a relation on the streaming result of a pushed-down plan.

::

    import duckdb
    from flight_server.client import HudiFlightClient
    from flight_server.client.duckdb import scan

    con = duckdb.connect()
    with HudiFlightClient("grpc://127.0.0.1:8815") as client:
        rel = scan(con, client, "ns.trips", columns=["city", "fare"], filters=[("fare", ">", 10)])
        rel.aggregate("city, avg(fare)").fetchall()

    # or with the server's URI, as Polars' scan_hudi takes it: a client is opened for the relation
    # (``client_options``: token, user, password, tls_root_certs, ...) and closed when it is read
    scan(con, "grpc://127.0.0.1:8815", "ns.trips", columns=["city"]).fetchall()

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

from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa

from catalog.optional import optional_dependency
from flight_server.client.session import HudiFlightClient

with optional_dependency("duckdb", "the DuckDB source"):
    import duckdb


def scan(
    con: duckdb.DuckDBPyConnection,
    uri_or_client: str | HudiFlightClient,
    table: str,
    *,
    columns: Sequence[str] | None = None,
    filters: Sequence[Sequence[Any]] = (),
    limit: int | None = None,
    client_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> duckdb.DuckDBPyRelation:
    """A DuckDB relation over ``table`` read with ``columns``, ``filters`` (``(column, op,
    value)`` tuples, as ``HudiTable.read``) and ``limit`` pushed into the server's plan.

    ``uri_or_client``: an open :class:`HudiFlightClient` (reused, not closed), or a server URI: a
    client is opened with ``client_options`` (``token``, ``user``, ``password``,
    ``tls_root_certs``, ...) and closed once the relation's stream ends or is dropped.
    ``options``: the other read options (``as_of``, ``query_type``, ``start``, ``end``).
    """
    pushed = {"columns": list(columns) if columns is not None else None, "filters": [tuple(f) for f in filters],
              "limit": limit, **options}
    if isinstance(uri_or_client, HudiFlightClient):
        return con.from_arrow(uri_or_client.reader(table, **pushed))
    client = HudiFlightClient(uri_or_client, **dict(client_options or {}))
    try:
        reader = client.reader(table, **pushed)
    except BaseException:
        client.close()
        raise
    return con.from_arrow(pa.RecordBatchReader.from_batches(reader.schema, _closing(reader, client)))


def _closing(reader: pa.RecordBatchReader, client: HudiFlightClient) -> Iterator[pa.RecordBatch]:
    """``reader``'s batches; ``client`` is closed when they end (or the stream is dropped)."""
    try:
        yield from reader
    finally:
        client.close()


__all__ = ["scan"]
