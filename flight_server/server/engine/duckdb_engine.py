"""The embedded SQL engine: a locked-down, in-memory DuckDB over streamed Arrow readers.

Every connection is created with external access (files, URLs, ATTACH, COPY), extension
installation and autoloading, community and unsigned extensions and Python replacement scans
(DuckDB's lookup of unknown table names among Python variables) switched off, a memory limit and
a spill bound from the server configuration, as many threads as its scan needs (up to the
configured count: :data:`ROWS_PER_THREAD`), spilling only into the server's
private temp folder, and then the configuration locked, so SQL cannot change any of it. The only
data it sees are the query's views: Arrow ``RecordBatchReader`` s, or Arrow datasets naming
exactly a plan's base files (:meth:`catalog.plan.planner.ScanPlan.to_dataset`). The local files of
such a dataset are read by DuckDB's own Parquet reader, on a database that may read exactly those
files and nothing else (:mod:`.native_files`).

Every query of an :class:`Engine` runs on the connection of a pooled database
(:mod:`.databases`: one query at a time, its native views and bound statements kept), is
watched until it ends (:mod:`.watchdog`: deadline, client cancellation, shutdown, memory growth)
and its result is bounded in bytes while it streams. Every failure is an :class:`EngineFailure`
(:func:`engine_failure`). An engine process runs one :class:`Engine` (:mod:`.engine_process`);
admission happens before, in the serving process (:mod:`.admission`).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds

from catalog.errors import InvalidQueryError
from flight_server.server.engine import native_files
from flight_server.server.engine.databases import Database, DatabasePool, DatabaseSpec
from flight_server.server.engine.failures import FAILED, INVALID, MEMORY, SHUTDOWN, EngineFailure, plain_words
from flight_server.server.engine.native_files import FileViews, ParquetFiles
from flight_server.server.engine.settings import EngineSettings, parse_bytes
from flight_server.server.engine.watchdog import Watch, Watchdog

BATCH_ROWS = 64 * 1024
#: rows of natively read files per engine thread: a smaller scan runs on fewer threads than
#: ``sql_threads`` (measured: 10,000 rows cost 20% more CPU and no less time on two threads than
#: on one; 200,000 rows take 13% less time on two)
ROWS_PER_THREAD = 100_000


def connect(settings: EngineSettings, spec: DatabaseSpec) -> duckdb.DuckDBPyConnection:
    """A new locked-down in-memory DuckDB on ``spec.threads`` threads that may read exactly
    ``spec.files`` (local paths) and nothing else: their ``allowed_paths`` are set before external
    access is switched off and the configuration locked, so no SQL can widen them. Their footers
    are kept between queries (DuckDB checks a file's modification time before it uses one)."""
    files = spec.files
    config: dict[str, Any] = {
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "allow_community_extensions": False,
        "allow_unsigned_extensions": False,
        "python_enable_replacements": False,
        "memory_limit": settings.memory_limit,
        "threads": spec.threads,
        "temp_directory": settings.temp_dir or "",
    }
    if settings.temp_dir:
        config["max_temp_directory_size"] = settings.max_temp_size
    if not files:
        config["enable_external_access"] = False
    db = duckdb.connect(":memory:", config=config)
    try:
        if files:
            # read data stays out of idle databases (the operating system caches the files anyway)
            db.execute("SET enable_external_file_cache = false")
            db.execute("SET parquet_metadata_cache = true")
            db.execute(native_files.allowed_paths_sql(files))
            db.execute("SET enable_external_access = false")
        db.execute("SET lock_configuration = true")
    except BaseException:
        db.close()
        raise
    return db


#: DuckDB's errors that a statement itself causes (its SQL, its values, its data): the engine that
#: told them may run the next statement; any other DuckDB error (internal, fatal, I/O,
#: serialization: "Couldn't deserialize thrift" after allocation failures) retires it
_STATEMENT_ERRORS = (
    duckdb.BinderException, duckdb.CatalogException, duckdb.ConstraintException, duckdb.ConversionException,
    duckdb.DependencyException, duckdb.InterruptException, duckdb.InvalidInputException, duckdb.InvalidTypeException,
    duckdb.NotImplementedException, duckdb.OutOfRangeException, duckdb.ParserException, duckdb.PermissionException,
    duckdb.SyntaxException, duckdb.TypeMismatchException,
)
#: how DuckDB's message begins for the errors that retire an engine, when it reaches Python as
#: text only (a result stream's error comes through Arrow's C stream as an ``OSError``)
_RETIRING_TEXT = ("INTERNAL Error", "FATAL Error", "IO Error", "Serialization Error")
#: what an allocation that failed says, whatever DuckDB's error class
_ALLOCATION_FAILED = ("Out of Memory", "bad_alloc", "failed to allocate", "Failed to allocate")


def engine_failure(
    err: BaseException, settings: EngineSettings, files: Mapping[str, ParquetFiles] | None = None
) -> EngineFailure:
    """The failure an engine error ``err`` is (no server path: a failure reading a native view's
    file is told in :func:`.native_files.read_failure`'s words). A failure whose cause is not the
    statement's own (an allocation failed, an internal or I/O error of the engine, an exception
    of no engine) retires the engine (:attr:`.EngineFailure.retire`)."""
    if isinstance(err, EngineFailure):
        return err
    text = str(err)
    if isinstance(err, (MemoryError, pa.ArrowMemoryError, duckdb.OutOfMemoryException)) or any(
        words in text for words in _ALLOCATION_FAILED
    ):
        return EngineFailure(MEMORY, settings)
    if isinstance(err, InvalidQueryError):
        return EngineFailure(INVALID, settings, str(err))
    if not isinstance(err, (duckdb.Error, pa.ArrowException, OSError)):
        return EngineFailure(FAILED, settings)
    failure = native_files.read_failure(err, files) if files and isinstance(err, duckdb.Error) else None
    if failure is not None:
        return EngineFailure(INVALID, settings, f"SQL engine: {failure[:300]}")
    first = text.splitlines()[0] if text else type(err).__name__
    if isinstance(err, duckdb.Error):
        retire = not isinstance(err, _STATEMENT_ERRORS)
    else:
        retire = first.startswith(_RETIRING_TEXT)
    return EngineFailure(INVALID, settings, f"SQL engine: {plain_words(text)[:300]}", retire=retire)


def stopped_failure(watch: Watch, settings: EngineSettings) -> EngineFailure | None:
    """The failure of a statement the watchdog interrupted (its reason is the failure's kind;
    ``None``: it was not)."""
    return None if watch.reason is None else EngineFailure(watch.reason, settings)


def _null_row(schema: pa.Schema) -> pa.Table:
    """One row of nulls of ``schema``."""
    return pa.Table.from_arrays([pa.nulls(1, field.type) for field in schema], schema=schema)


#: how long the check of a statement's literals may take: a query over views of one row each
#: takes milliseconds; one that makes its own rows (``range``, recursion) is left to its run
LITERAL_CHECK_SECONDS = 0.25


def _literals_converted(connection: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Evaluate ``sql``'s first row over views of null rows: raises the conversion errors of its
    literals; any other failure (or a check past :data:`LITERAL_CHECK_SECONDS`, interrupted) is
    the data's to tell, when the query runs."""
    timer = threading.Timer(LITERAL_CHECK_SECONDS, connection.interrupt)
    timer.start()
    try:
        connection.sql(sql).limit(1).to_arrow_table()
    except (duckdb.ConversionException, duckdb.OutOfRangeException):
        raise
    except duckdb.Error:
        pass
    finally:
        timer.cancel()


@dataclass
class _Lease:
    """Whether the query on a pooled database ended well (the database may serve the next one)."""

    ok: bool = False


class Engine:
    """Runs SQL statements, each bounded (see the module docstring): what an engine process runs."""

    def __init__(self, settings: EngineSettings):
        settings.check()
        self.settings = settings
        # the process may grow by the budget plus one query's worth of Arrow input and output
        growth = parse_bytes(settings.memory_budget) + parse_bytes(settings.memory_limit)
        self.watchdog = Watchdog(memory_bytes=growth)
        self.databases = DatabasePool(lambda spec: connect(settings, spec), settings.slots)
        self.file_views = FileViews()

    def stop_all(self) -> None:
        """Interrupt every running query (the server is shutting down)."""
        self.watchdog.stop_all()
        self.databases.close()

    def result_schema(
        self, sql: str, views: Mapping[str, pa.Schema], cancelled: Callable[[], bool] | None = None
    ) -> pa.Schema:
        """The schema of ``sql``'s result over views of these schemas: the query wrapped in
        ``LIMIT 0`` over empty views (constant folding included, so it is watched as a run is).
        Then the query's first row over views of one all-null row: a literal of the wrong type
        (``WHERE id = 'abc'`` on an integer) fails only when a row is evaluated, and is told now,
        before any endpoint is read (as PostgreSQL refuses it at parse time). Only conversion
        errors are told: a null row converts to null, so theirs are the literals'.

        Raises:
            EngineFailure: the statement failed, or was stopped.
        """
        stack = contextlib.ExitStack()
        try:
            spec = DatabaseSpec(frozenset(), self.settings.threads)
            database, watch, lease = self._start(stack, cancelled, spec)
            try:
                for name, schema in views.items():
                    database.register(name, schema.empty_table())
                with watch.busy():
                    schema = database.connection.sql(sql).limit(0).to_arrow_reader(BATCH_ROWS).schema
                for name, view in views.items():
                    database.register(name, _null_row(view))
                if views:
                    with watch.busy():
                        _literals_converted(database.connection, sql)
                lease.ok = watch.reason is None
                return schema
            except Exception as err:
                raise (stopped_failure(watch, self.settings) or engine_failure(err, self.settings)) from err
        finally:
            stack.close()

    def run(
        self,
        sql: str,
        views: Mapping[str, pa.RecordBatchReader | ds.Dataset],
        cancelled: Callable[[], bool] | None = None,
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """Run ``sql`` over the ``views`` (streamed readers, or datasets the engine scans with
        its projection and filters pushed: by its own Parquet reader when their files are
        local, :mod:`.native_files`); the result schema and its batches (streamed).

        The connection and its watch live as long as the batch iterator and are given back when
        it ends or is dropped.

        Raises:
            EngineFailure: the statement failed, or was stopped (also while its batches stream).
        """
        files = native_files.parquet_views(views) if self.settings.native_reader else {}
        spec = DatabaseSpec(native_files.file_set(files), self._threads(views, files))
        stack = contextlib.ExitStack()
        try:
            database, watch, lease = self._start(stack, cancelled, spec)
        except BaseException:
            stack.close()
            raise
        try:
            with watch.busy():
                if files:
                    native_files.check_table_names(database.connection, sql)
                self._show_views(database, views, files)
                result = database.statement(sql).to_arrow_reader(BATCH_ROWS)
        except Exception as err:
            stack.close()
            raise (stopped_failure(watch, self.settings) or engine_failure(err, self.settings, files)) from err
        except BaseException:
            stack.close()
            raise
        batches = self._batches(stack, watch, lease, result, files)
        # a stream refused before its first batch never runs the generator's ``with``: give back
        # the connection and the watch when it is dropped
        weakref.finalize(batches, stack.close)
        return result.schema, batches

    def _threads(
        self, views: Mapping[str, pa.RecordBatchReader | ds.Dataset], files: Mapping[str, ParquetFiles]
    ) -> int:
        """The threads a query over ``views`` runs on: one per :data:`ROWS_PER_THREAD` rows of
        its natively read files, up to ``sql_threads``; all of them when a view streams (its
        size is not known before it is read)."""
        if len(files) < len(views):
            return self.settings.threads
        rows = sum(view.rows for view in files.values())
        return max(1, min(self.settings.threads, -(-rows // ROWS_PER_THREAD)))

    def _show_views(
        self,
        database: Database,
        views: Mapping[str, pa.RecordBatchReader | ds.Dataset],
        files: Mapping[str, ParquetFiles],
    ) -> None:
        """Put the query's views on ``database``: native views over the files the engine reads
        itself (kept from an earlier query over the same files), the others registered."""
        native = []
        for name, reader in views.items():
            found = files.get(name)
            if found is not None and self.file_views.readable(
                database.connection, found, shown=database.views.get(name) == found
            ):
                database.show_view(name, found)
                native.append(name)
            else:
                database.register(name, reader)
        database.keep_views(native)

    def _start(
        self, stack: contextlib.ExitStack, cancelled: Callable[[], bool] | None, spec: DatabaseSpec
    ) -> tuple[Database, Watch, _Lease]:
        """Take a pooled database made for exactly ``spec`` (:mod:`.databases`) and watch the
        query on its connection; closing ``stack`` undoes it all in reverse order.

        The database is given back for reuse only when the query ended well, its watch was
        released without an interrupt (none can come after the release, so the next query on
        the connection is never interrupted for this one), and its registered views are dropped.
        """
        if self.watchdog.closed:
            raise EngineFailure(SHUTDOWN, self.settings)
        database, lease = self.databases.take(spec), _Lease()
        watches: list[Watch] = []  # the watch, once made (a database is given back, closed, if watching fails)

        def give_back() -> None:
            for watch in watches:
                self.watchdog.release(watch)
            reusable = lease.ok and all(watch.reason is None for watch in watches) and database.end_query()
            self.databases.give_back(database, reusable, spec)

        stack.callback(give_back)
        watches.append(self.watchdog.watch(database.connection, self.settings.timeout_seconds, cancelled))
        return database, watches[0], lease

    def _batches(
        self,
        stack: contextlib.ExitStack,
        watch: Watch,
        lease: _Lease,
        result: pa.RecordBatchReader,
        files: Mapping[str, ParquetFiles],
    ) -> Iterator[pa.RecordBatch]:
        limit = self.settings.max_result_bytes
        streamed = 0
        with stack:
            while True:
                stopped = stopped_failure(watch, self.settings)
                if stopped is not None:
                    raise stopped
                try:
                    with watch.busy():
                        batch = result.read_next_batch()
                except StopIteration:
                    lease.ok = watch.reason is None
                    return
                except Exception as err:
                    raise (stopped_failure(watch, self.settings) or engine_failure(err, self.settings, files)) from err
                streamed += batch.nbytes
                if streamed > limit:
                    raise EngineFailure(INVALID, self.settings, result_bytes_exceeded(limit))
                yield batch


def result_bytes_exceeded(limit: int) -> str:
    """What a client is told of a result past ``sql_max_result_bytes``."""
    return f"limit sql_max_result_bytes ({limit}) exceeded: the query's result is larger"


__all__ = [
    "BATCH_ROWS", "ROWS_PER_THREAD", "Engine", "connect", "engine_failure", "result_bytes_exceeded", "stopped_failure",
]
