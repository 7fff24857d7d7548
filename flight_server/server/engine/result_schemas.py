"""Result schemas the engine told, remembered by the serving process.

A result schema is a function of the SQL and its views' schemas alone, so it is asked of an
engine process once (the query wrapped in ``LIMIT 0`` over empty views) and then remembered: a
statement planned again, or prepared and executed, costs no engine statement until it reads.
"""

from __future__ import annotations

from typing import Callable, Mapping

import pyarrow as pa

from catalog.lru import BoundedLRU, CacheListener

#: bytes of result schemas remembered (a statement's SQL and its schema: a few kilobytes)
SCHEMA_CACHE_BYTES = 4 << 20

SchemaKey = tuple[str, tuple[tuple[str, bytes], ...]]
#: result schemas by :func:`schema_key`
ResultSchemas = BoundedLRU[SchemaKey, pa.Schema]


def schema_key(sql: str, views: Mapping[str, pa.Schema]) -> SchemaKey:
    """What a result schema is a function of: the SQL and its views' schemas (serialised)."""
    return sql, tuple((name, schema.serialize().to_pybytes()) for name, schema in sorted(views.items()))


def result_schemas(max_bytes: int = SCHEMA_CACHE_BYTES, listener: CacheListener | None = None) -> ResultSchemas:
    """The cache of result schemas (each entry costs its SQL, views and schema)."""
    return BoundedLRU("sql_result_schemas", max_bytes, listener=listener)


def remembered_schema(
    schemas: ResultSchemas, sql: str, views: Mapping[str, pa.Schema], ask: Callable[[SchemaKey], pa.Schema]
) -> pa.Schema:
    """The result schema of ``sql`` over ``views``: remembered, else ``ask(key)`` of the engine and kept."""
    key = schema_key(sql, views)
    known = schemas.get(key)
    if known is None:
        known = ask(key)
        schemas.put(key, known, len(sql) + sum(len(view) for _, view in key[1]) + len(known.serialize()))
    return known


__all__ = ["SCHEMA_CACHE_BYTES", "ResultSchemas", "SchemaKey", "remembered_schema", "result_schemas", "schema_key"]
