"""The embedded SQL engine: a locked-down, in-memory DuckDB over streamed Arrow readers.

Every connection is created with external access (files, URLs, ATTACH, COPY), extension
installation and autoloading, community and unsigned extensions and Python replacement scans
(DuckDB's lookup of unknown table names among Python variables) switched off, a memory limit and
a thread count from the server configuration, spilling only into the server's private temp
folder, and then the configuration locked, so SQL cannot change any of it. The only data it sees
are the Arrow ``RecordBatchReader`` s registered as the query's views.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import duckdb
import pyarrow as pa

from catalog.errors import InvalidQueryError

BATCH_ROWS = 64 * 1024


@dataclass(frozen=True)
class EngineSettings:
    """The engine's bounds (server configuration keys ``sql_memory_limit``, ``sql_threads``)."""

    memory_limit: str = "1GB"
    threads: int = 2
    temp_dir: str | None = None  # a private folder; None: no spilling


def connect(settings: EngineSettings) -> duckdb.DuckDBPyConnection:
    """A new locked-down in-memory DuckDB."""
    config: dict[str, Any] = {
        "enable_external_access": False,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "allow_community_extensions": False,
        "allow_unsigned_extensions": False,
        "python_enable_replacements": False,
        "memory_limit": settings.memory_limit,
        "threads": settings.threads,
    }
    if settings.temp_dir:
        config["temp_directory"] = settings.temp_dir
    else:
        config["temp_directory"] = ""
    db = duckdb.connect(":memory:", config=config)
    db.execute("SET lock_configuration = true")
    return db


def _engine_error(err: duckdb.Error, settings: EngineSettings) -> Exception:
    text = str(err)
    if isinstance(err, duckdb.OutOfMemoryException) or "Out of Memory" in text:
        return InvalidQueryError(
            f"limit sql_memory_limit ({settings.memory_limit}) exceeded: the query needs more memory"
        )
    first = text.splitlines()[0] if text else type(err).__name__
    return InvalidQueryError(f"SQL engine: {first[:300]}")


def result_schema(sql: str, views: Mapping[str, pa.Schema], settings: EngineSettings) -> pa.Schema:
    """The schema of ``sql``'s result when run over empty views of these schemas."""
    db = connect(settings)
    try:
        for name, schema in views.items():
            db.register(name, schema.empty_table())
        return db.sql(sql).to_arrow_reader(BATCH_ROWS).schema
    except duckdb.Error as err:
        raise _engine_error(err, settings) from err
    finally:
        db.close()


def run(
    sql: str, views: Mapping[str, pa.RecordBatchReader], settings: EngineSettings
) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """Run ``sql`` over the streamed ``views``; the result schema and its batches (streamed).

    The connection lives as long as the batch iterator and is closed when it ends or is dropped.
    """
    db = connect(settings)
    try:
        for name, reader in views.items():
            db.register(name, reader)
        result = db.sql(sql).to_arrow_reader(BATCH_ROWS)
    except duckdb.Error as err:
        db.close()
        raise _engine_error(err, settings) from err
    return result.schema, _batches(db, result, settings)


def _batches(
    db: duckdb.DuckDBPyConnection, result: pa.RecordBatchReader, settings: EngineSettings
) -> Iterator[pa.RecordBatch]:
    try:
        while True:
            try:
                batch = result.read_next_batch()
            except StopIteration:
                return
            except (duckdb.Error, pa.ArrowException) as err:
                if isinstance(err, duckdb.Error):
                    raise _engine_error(err, settings) from err
                raise InvalidQueryError(f"SQL engine: {str(err).splitlines()[0][:300]}") from err
            yield batch
    finally:
        db.close()


__all__ = ["EngineSettings", "connect", "result_schema", "run"]
