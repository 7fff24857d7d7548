"""Views the engine reads with its own Parquet reader: exactly the local base files a plan named.

:meth:`catalog.plan.planner.ScanPlan.to_dataset` gives the engine an Arrow dataset of a plan's plain
Parquet base files. When those files are local, the engine does better than scan the dataset through Arrow (decode every
projected column on Arrow's threads, then import it): DuckDB's own Parquet reader reads them in
parallel, pushes the WHERE clause into row groups and pages, and decodes only what survives.

DuckDB reads local files only with external access on, which the engine never allows to SQL.
DuckDB's ``allowed_paths`` keeps exactly the files listed readable once
``enable_external_access`` is off, and neither can be changed once the configuration is locked.
So a query reading local files runs on a database created for exactly its files
(:func:`~.engine.connect`, :class:`~.databases.DatabasePool` keyed by the file set): every other
file, glob, URL, ``COPY ... TO`` and configuration change is still refused by DuckDB itself.

What DuckDB still allows on an allowed file (``read_blob``, ``parquet_metadata``, ``ATTACH``,
a replacement scan such as ``FROM "/path/file.parquet"``) never reaches it: statements other
than queries, table functions and file functions are refused before the engine
(:mod:`.query`), and :func:`check_table_names` refuses, with DuckDB's own parser, any table
name in the engine SQL that could name a file (a CTE's scope can hide a name from the rewrite
to views; DuckDB then resolves it as a file).

A view is read natively only when DuckDB's types of its columns are exactly the types the Arrow
dataset would give it (so the result schema announced at planning holds, and no value is read
otherwise: INT96 timestamps, for one, are nanoseconds through Arrow and microseconds in DuckDB);
the verdict is kept per file set and view schema. Otherwise, and for files on any other store,
the dataset is scanned through Arrow as before. Remote stores are not handed to DuckDB (see
docs/sql.md: DuckDB would read them through fsspec on its own threads, taking the GIL).
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Iterator, Mapping

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
from sqlglot import exp

from catalog.errors import InvalidQueryError
from catalog.lru import BoundedLRU

#: characters DuckDB reads as a glob in a file name (such a path keeps the Arrow scan)
_GLOB = frozenset("*?[]{}")
#: bytes of type verdicts kept (a key is the file list and the view's schema)
VERDICT_CACHE_BYTES = 4 << 20


def sql_string(text: str) -> str:
    """``text`` as a DuckDB string literal."""
    return exp.Literal.string(text).sql(dialect="duckdb")


def sql_identifier(name: str) -> str:
    """``name`` as a quoted DuckDB identifier."""
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


def allowed_paths_sql(paths: frozenset[str]) -> str:
    """The statement that lets a database read exactly ``paths`` (before external access goes off)."""
    return "SET allowed_paths = [" + ", ".join(sql_string(p) for p in sorted(paths)) + "]"


@dataclass(frozen=True)
class ParquetFiles:
    """A view read by the engine's own Parquet reader.

    Attributes:
        paths: the local files, each once, in the plan's order.
        schema: the view's columns (each file holds every one with exactly its type).
        rows: the rows of the row groups the view reads (what the engine's threads share).
    """

    paths: tuple[str, ...]
    schema: pa.Schema
    rows: int

    def select_sql(self) -> str:
        """The view's query: its columns, by name, from exactly its files."""
        columns = ", ".join(sql_identifier(name) for name in self.schema.names)
        files = ", ".join(sql_string(p) for p in self.paths)
        return f"SELECT {columns} FROM read_parquet([{files}])"


def parquet_files(view: pa.RecordBatchReader | ds.Dataset) -> ParquetFiles | None:
    """The files of ``view`` when the engine may read them itself: an Arrow dataset of Parquet
    fragments on Arrow's local filesystem (what :func:`catalog.plan.dataset.base_file_dataset`
    makes for a local table), with absolute paths DuckDB would not read as globs, and no two columns of a
    file whose names differ only in case (DuckDB binds names case-insensitively). ``None``:
    anything else (the view is registered as it is).

    A dataset does not change, so its answer is kept while it lives: an engine process keeps
    the datasets it is sent (:mod:`.engine_process`) and runs statement after statement over them."""
    if not isinstance(view, ds.FileSystemDataset):
        return None
    known = _FILES.get(view)
    if known is None:
        known = _FILES[view] = (_dataset_files(view),)
    return known[0]


#: :func:`parquet_files`'s answers, by dataset while it lives
_FILES: weakref.WeakKeyDictionary[ds.FileSystemDataset, tuple[ParquetFiles | None]] = weakref.WeakKeyDictionary()


def _dataset_files(view: ds.FileSystemDataset) -> ParquetFiles | None:
    if not isinstance(view.filesystem, pafs.LocalFileSystem):
        return None
    if not isinstance(view.format, ds.ParquetFileFormat) or len(view.schema) == 0:
        return None
    paths = tuple(dict.fromkeys(view.files))  # a file cut into row-group splits is named once
    if not paths or any(not os.path.isabs(p) or _GLOB.intersection(p) for p in paths):
        return None
    if not _distinct_names(view.schema.names):
        return None
    rows = 0
    for fragment in view.get_fragments():
        if not _distinct_names(fragment.physical_schema.names):
            return None
        rows += sum(row_group.num_rows for row_group in fragment.row_groups)
    return ParquetFiles(paths, view.schema, rows)


def parquet_views(views: Mapping[str, pa.RecordBatchReader | ds.Dataset]) -> dict[str, ParquetFiles]:
    """The views the engine reads itself (:func:`parquet_files`), by name."""
    return {name: found for name, view in views.items() if (found := parquet_files(view)) is not None}


def _distinct_names(names: list[str]) -> bool:
    return len({name.lower() for name in names}) == len(names)


def file_set(files: Mapping[str, ParquetFiles]) -> frozenset[str]:
    """Every file of the views: the ``allowed_paths`` of the database that runs the query."""
    return frozenset(path for view in files.values() for path in view.paths)


def check_table_names(db: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Refuse ``sql`` when DuckDB would read a table name in it as a file (a replacement scan:
    ``FROM "/path/file.parquet"``), on a database that may read files.

    The rewrite to views replaces every catalog table, but a name the rewrite takes for a CTE
    and DuckDB does not (out of the CTE's scope, or named before the CTE) reaches the engine as
    written. Every file such a database may read is a ``.parquet`` file named by its absolute
    path, so only SQL holding ``parquet`` (the engine SQL is written by sqlglot: no escape
    hides a name's letters) is parsed (by DuckDB, without binding), and any table reference
    whose name holds a ``.``, ``/`` or ``\\`` is refused.

    Raises:
        InvalidQueryError: naming the table reference (the client's own text).
    """
    if "parquet" not in sql.lower():
        return
    try:
        rows = db.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()
        tree = json.loads(rows[0][0]) if rows else {"error": True}
    except (duckdb.Error, ValueError) as err:
        raise InvalidQueryError("SQL engine: the statement cannot be parsed") from err
    if tree.get("error"):
        raise InvalidQueryError(f"SQL engine: {str(tree.get('error_message', 'the statement cannot be parsed'))[:300]}")
    for parts in _table_references(tree):
        if any(c in part for part in parts for c in "./\\"):
            name = ".".join(parts)
            raise InvalidQueryError(f"SQL engine: table {name[:64]!r} is not allowed: SQL reads only catalog tables")


def _table_references(node: object) -> Iterator[tuple[str, ...]]:
    """The name parts (catalog, schema, table: those given) of every table reference in a
    statement serialized by ``json_serialize_sql``."""
    todo = [node]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            if item.get("type") == "BASE_TABLE":
                parts = [str(item.get(k) or "") for k in ("catalog_name", "schema_name", "table_name")]
                yield tuple(part for part in parts if part)
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)


class FileViews:
    """Decides which native views a query gets: only those whose columns DuckDB reads with
    exactly the types the Arrow dataset has (verdicts kept per file list and schema); counts them.
    The views themselves are kept by the database that may read their files
    (:meth:`~.databases.Database.show_view`)."""

    def __init__(self, max_bytes: int = VERDICT_CACHE_BYTES):
        self._verdicts: BoundedLRU[tuple[tuple[str, ...], bytes], bool] = BoundedLRU(
            "sql native view types", max_bytes
        )
        self._lock = threading.Lock()
        self.read = 0  # views read by the engine's own Parquet reader
        self.declined = 0  # views whose files DuckDB would type differently (scanned through Arrow)

    def readable(self, db: duckdb.DuckDBPyConnection, files: ParquetFiles, shown: bool = False) -> bool:
        """Whether the engine reads ``files`` itself (on ``db``, a connection of a database
        allowed to read them): DuckDB types every column as the Arrow dataset does. ``shown``:
        the view already is on that database (so it was readable)."""
        same = shown
        if not same:
            key = (files.paths, files.schema.serialize().to_pybytes())
            verdict = self._verdicts.get(key)
            if verdict is None:
                expected = [str(t) for t in db.from_arrow(files.schema.empty_table()).types]
                verdict = [str(t) for t in db.sql(files.select_sql()).types] == expected
                self._verdicts.put(key, verdict, len(key[1]) + sum(len(p) for p in files.paths) + 64)
            same = verdict
        with self._lock:
            if same:
                self.read += 1
            else:
                self.declined += 1
        return same


def read_failure(err: duckdb.Error, files: Mapping[str, ParquetFiles]) -> str | None:
    """The engine's error ``err`` about reading one of the views' files, without any path: in
    the words :func:`.client_errors.native_read_error` maps to NOT_FOUND (a file removed since
    planning) or a corrupt-table error. ``None``: ``err`` is about something else.

    A failure is the views' when its message names one of their files or folders, or when it
    is an I/O error or DuckDB's bare error class (what a damaged page raises: "Failed to
    decompress ... block"); it is put on the view whose file it names, else on the first. A
    view one of whose files is gone is NOT_FOUND."""
    message = str(err)
    named = [
        view for view, parquet in files.items()
        if any(p in message or os.path.dirname(p) in message for p in parquet.paths)
    ]
    if not named and not (type(err) is duckdb.Error or isinstance(err, duckdb.IOException)):
        return None
    view = (named or list(files))[0]
    # DuckDB tells a missing file as a refused glob ("<path>/**/*.parquet"): look at the files
    missing = "No such file" in message or not all(os.path.exists(p) for p in files[view].paths)
    what = "[errno 2] No such file" if missing else "the file could not be decoded"
    return f"reading the view registered as '{view}' failed: {what}"


__all__ = [
    "FileViews",
    "ParquetFiles",
    "allowed_paths_sql",
    "check_table_names",
    "file_set",
    "parquet_files",
    "parquet_views",
    "read_failure",
]
