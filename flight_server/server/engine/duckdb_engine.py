"""The embedded SQL engine: a locked-down, in-memory DuckDB over streamed Arrow readers.

Every connection is created with external access (files, URLs, ATTACH, COPY), extension
installation and autoloading, community and unsigned extensions and Python replacement scans
(DuckDB's lookup of unknown table names among Python variables) switched off, a memory limit and
a spill bound from the server configuration, as many threads as its scan needs (up to the
configured count: :data:`ROWS_PER_THREAD`), spilling only into the server's
private temp folder, and then the configuration locked, so SQL cannot change any of it. The only
data it sees are the query's views: Arrow ``RecordBatchReader`` s, or Arrow datasets naming exactly
a plan's base files (:mod:`.native_scan`). The local files of such a dataset are read by DuckDB's
own Parquet reader, on a database that may read exactly those files and nothing else
(:mod:`.native_files`).

Every query of an :class:`Engine` runs on the connection of a pooled database
(:mod:`.databases`: one query at a time, its native views and bound statements kept), is
admitted against its caller's share and the process-wide memory budget (:mod:`.admission`), watched until it ends
(:mod:`.watchdog`: deadline, client cancellation, shutdown, memory growth) and its result is
bounded in bytes while it streams.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.flight as flight

from catalog.errors import InvalidQueryError
from catalog.lru import BoundedLRU, CacheListener
from flight_server.server.engine import native_files
from flight_server.server.engine.admission import RETRY_SECONDS, MemoryBudget, parse_bytes
from flight_server.server.engine.databases import Database, DatabasePool, DatabaseSpec
from flight_server.server.engine.native_files import FileViews, ParquetFiles
from flight_server.server.engine.watchdog import CANCELLED, DEADLINE, MEMORY, Watch, Watchdog
from flight_server.server.security.budgets import CallKeys, ServerBusyError
from flight_server.server.security.limits import LimitExceededError

BATCH_ROWS = 64 * 1024
#: rows of natively read files per engine thread: a smaller scan runs on fewer threads than
#: ``sql_threads`` (measured: 10,000 rows cost 20% more CPU and no less time on two threads than
#: on one; 200,000 rows take 13% less time on two)
ROWS_PER_THREAD = 100_000
#: bytes of result schemas remembered (a statement's SQL and its schema: a few kilobytes)
SCHEMA_CACHE_BYTES = 4 << 20
_SHUTTING_DOWN = "the server is shutting down"


@dataclass(frozen=True)
class EngineSettings:
    """The engine's bounds; each is the server configuration key ``sql_<name>``
    (``sql_memory_limit``, ``sql_threads``, ...)."""

    memory_limit: str = "1GB"  # per query (DuckDB's memory_limit)
    threads: int = 2  # the most a query runs on (fewer for a small scan: ROWS_PER_THREAD)
    temp_dir: str | None = None  # a private folder; None: no spilling
    max_temp_size: str = "4GB"  # spilled bytes per query (DuckDB's max_temp_directory_size)
    timeout_seconds: float = 300.0  # a query is interrupted after this long
    max_result_bytes: int = 4 << 30  # Arrow bytes one query may stream
    memory_budget: str = "2GB"  # all running queries together (admission; process growth)
    admission_wait_seconds: float = 5.0  # how long a query waits for the budget before refused
    queries_per_user: int = 0  # queries of one user at once (0: a quarter of the budget's, at least 1)
    queries_per_connection: int = 0  # ... of one connection (anonymous callers count only here)
    native_scan: bool = True  # plain Parquet base files are scanned by the engine (.native_scan)
    native_reader: bool = True  # ... local ones by its own Parquet reader (.native_files); False: through Arrow
    process_memory: str = ""  # how far an engine process may grow (.sandbox; "": twice memory_limit + 1 GiB)

    def check(self) -> None:
        """Refuse unusable values at start-up (a clear message naming the key)."""
        for key in ("memory_limit", "max_temp_size", "memory_budget", "process_memory"):
            if key == "process_memory" and not self.process_memory:
                continue
            try:
                parse_bytes(getattr(self, key))
            except ValueError as err:
                raise ValueError(f"sql_{key}: {err}") from err
        if parse_bytes(self.memory_budget) < parse_bytes(self.memory_limit):
            raise ValueError("sql_memory_budget must be at least sql_memory_limit")
        if self.timeout_seconds <= 0 or self.threads < 1 or self.max_result_bytes < 1:
            raise ValueError("sql_timeout_seconds, sql_threads and sql_max_result_bytes must be positive")
        if self.queries_per_user < 0 or self.queries_per_connection < 0:
            raise ValueError("sql_queries_per_user and sql_queries_per_connection must not be negative")


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


def _engine_error(
    err: duckdb.Error, settings: EngineSettings, files: Mapping[str, ParquetFiles] | None = None
) -> Exception:
    """The client's error for an engine error (no server path: a failure reading a native
    view's file is told in :func:`.native_files.read_failure`'s words)."""
    text = str(err)
    if isinstance(err, duckdb.OutOfMemoryException) or "Out of Memory" in text:
        return InvalidQueryError(
            f"limit sql_memory_limit ({settings.memory_limit}) exceeded: the query needs more memory"
        )
    failure = native_files.read_failure(err, files) if files else None
    first = failure or (text.splitlines()[0] if text else type(err).__name__)
    return InvalidQueryError(f"SQL engine: {first[:300]}")


def stopped_error(watch: Watch, settings: EngineSettings) -> Exception | None:
    """The error of a query the watchdog interrupted (``None``: it was not)."""
    if watch.reason == DEADLINE:
        return flight.FlightTimedOutError(
            f"limit sql_timeout_seconds ({settings.timeout_seconds:g}) exceeded: the query was cancelled"
        )
    if watch.reason == MEMORY:
        return ServerBusyError(
            "sql_memory_budget", parse_bytes(settings.memory_budget) >> 20,
            f"the server's SQL queries grew past {settings.memory_budget} (MiB above); the query was cancelled",
            RETRY_SECONDS,
        )
    if watch.reason == CANCELLED:
        return flight.FlightCancelledError("the query was cancelled: the client went away")
    if watch.reason is not None:
        return flight.FlightUnavailableError(f"{_SHUTTING_DOWN}; the query was cancelled")
    return None


SchemaKey = tuple[str, tuple[tuple[str, bytes], ...]]
#: result schemas by :func:`schema_key`
ResultSchemas = BoundedLRU[SchemaKey, pa.Schema]


def admission(settings: EngineSettings) -> MemoryBudget:
    """The admission of an engine's statements: its budget, per-user and per-connection shares."""
    return MemoryBudget(
        settings.memory_budget, settings.memory_limit, settings.admission_wait_seconds,
        settings.queries_per_user, settings.queries_per_connection,
    )


def schema_key(sql: str, views: Mapping[str, pa.Schema]) -> SchemaKey:
    """What a result schema is a function of: the SQL and its views' schemas (serialised)."""
    return sql, tuple((name, schema.serialize().to_pybytes()) for name, schema in sorted(views.items()))


def result_schemas(max_bytes: int = SCHEMA_CACHE_BYTES, listener: CacheListener | None = None) -> ResultSchemas:
    """The cache of result schemas an engine keeps (each entry costs its SQL, views and schema)."""
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


@dataclass
class _Lease:
    """Whether the query on a pooled database ended well (the database may serve the next one)."""

    ok: bool = False


class Engine:
    """Runs the SQL of one server, every query bounded (see the module docstring)."""

    def __init__(self, settings: EngineSettings):
        settings.check()
        self.settings = settings
        self.budget = admission(settings)
        # the process may grow by the budget plus one query's worth of Arrow input and output
        growth = parse_bytes(settings.memory_budget) + parse_bytes(settings.memory_limit)
        self.watchdog = Watchdog(memory_bytes=growth)
        idle = max(1, parse_bytes(settings.memory_budget) // parse_bytes(settings.memory_limit))
        self.databases = DatabasePool(lambda spec: connect(settings, spec), idle)
        self.file_views = FileViews()
        self._schemas = result_schemas()

    def stop_all(self) -> None:
        """Interrupt every running query (the server is shutting down)."""
        self.watchdog.stop_all()
        self.databases.close()

    def result_schema(
        self, sql: str, views: Mapping[str, pa.Schema], cancelled: Callable[[], bool] | None = None
    ) -> pa.Schema:
        """The schema of ``sql``'s result over views of these schemas.

        A result schema is a function of the SQL and the views' schemas alone, so it is asked of
        the engine once (the query wrapped in ``LIMIT 0`` over empty views) and then remembered:
        a statement planned again, or prepared and executed, costs no engine query until it reads.
        That query (over empty views, planned at once) takes a slot of the budget but not of its
        caller's share: a client may plan its next statement while it still reads a result.
        """
        return remembered_schema(self._schemas, sql, views, lambda _: self._engine_result_schema(sql, views, cancelled))

    def _engine_result_schema(
        self, sql: str, views: Mapping[str, pa.Schema], cancelled: Callable[[], bool] | None
    ) -> pa.Schema:
        stack = contextlib.ExitStack()
        try:
            spec = DatabaseSpec(frozenset(), self.settings.threads)
            database, watch, lease = self._start(stack, cancelled, None, spec)
            try:
                for name, schema in views.items():
                    database.register(name, schema.empty_table())
                with watch.busy():
                    schema = database.connection.sql(sql).limit(0).to_arrow_reader(BATCH_ROWS).schema
                lease.ok = watch.reason is None
                return schema
            except duckdb.Error as err:
                raise (stopped_error(watch, self.settings) or _engine_error(err, self.settings)) from err
        finally:
            stack.close()

    def run(
        self,
        sql: str,
        views: Mapping[str, pa.RecordBatchReader | ds.Dataset],
        cancelled: Callable[[], bool] | None = None,
        keys: CallKeys | None = None,
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """Run ``sql`` over the ``views`` (streamed readers, or datasets the engine scans with
        its projection and filters pushed: by its own Parquet reader when their files are
        local, :mod:`.native_files`); the result schema and its batches (streamed).

        The connection, its watch and its share of the budget (and of its caller's, ``keys``)
        live as long as the batch iterator and are given back when it ends or is dropped.

        Raises:
            ServerBusyError: the caller's share or the SQL memory budget stayed spent
                (UNAVAILABLE, retryable).
        """
        files = native_files.parquet_views(views) if self.settings.native_reader else {}
        spec = DatabaseSpec(native_files.file_set(files), self._threads(views, files))
        stack = contextlib.ExitStack()
        try:
            database, watch, lease = self._start(stack, cancelled, keys, spec)
        except BaseException:
            stack.close()
            raise
        try:
            with watch.busy():
                if files:
                    native_files.check_table_names(database.connection, sql)
                self._show_views(database, views, files)
                result = database.statement(sql).to_arrow_reader(BATCH_ROWS)
        except duckdb.Error as err:
            stack.close()
            raise (stopped_error(watch, self.settings) or _engine_error(err, self.settings, files)) from err
        except BaseException:
            stack.close()
            raise
        batches = self._batches(stack, watch, lease, result, files)
        # a stream refused before its first batch never runs the generator's ``with``: give back
        # the connection, the watch and the budget share when it is dropped
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
        self,
        stack: contextlib.ExitStack,
        cancelled: Callable[[], bool] | None,
        keys: CallKeys | None,
        spec: DatabaseSpec,
    ) -> tuple[Database, Watch, _Lease]:
        """Admit, take a pooled database made for exactly ``spec`` (:mod:`.databases`) and watch
        the query on its connection; closing ``stack`` undoes it all in reverse order.

        The database is given back for reuse only when the query ended well, its watch was
        released without an interrupt (none can come after the release, so the next query on
        the connection is never interrupted for this one), and its registered views are dropped.
        """
        if self.watchdog.closed:
            raise flight.FlightUnavailableError(_SHUTTING_DOWN)
        stack.enter_context(self.budget.admitted(keys))
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
                stopped = stopped_error(watch, self.settings)
                if stopped is not None:
                    raise stopped
                try:
                    with watch.busy():
                        batch = result.read_next_batch()
                except StopIteration:
                    lease.ok = watch.reason is None
                    return
                except duckdb.Error as err:
                    raise (stopped_error(watch, self.settings) or _engine_error(err, self.settings, files)) from err
                except pa.ArrowException as err:
                    stopped = stopped_error(watch, self.settings)
                    if stopped is not None:
                        raise stopped from err
                    raise InvalidQueryError(f"SQL engine: {str(err).splitlines()[0][:300]}") from err
                streamed += batch.nbytes
                if streamed > limit:
                    raise LimitExceededError("sql_max_result_bytes", limit, "the query's result is larger")
                yield batch


__all__ = [
    "ROWS_PER_THREAD", "SCHEMA_CACHE_BYTES", "Engine", "EngineSettings", "ResultSchemas", "SchemaKey", "admission",
    "connect", "remembered_schema", "result_schemas", "schema_key", "stopped_error",
]
