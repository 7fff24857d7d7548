"""Idle locked-down DuckDB databases, reused by one query at a time.

Creating an in-memory DuckDB database costs about 18 ms of CPU, more than a small aggregate over
a natively scanned table, and every statement needs two (its result schema when planned, its run
when read). A query therefore takes an idle :class:`Database` and runs on its one connection;
the database goes back to the pool only when the query ended without error (and without an
interrupt: :mod:`.watchdog`), after the query's registered Arrow views are dropped again.

What a connection keeps from one query to the next is what the engine itself made for the
database's exact file set: the native views over those files (:mod:`.native_files`: created
once, not for every statement) and the statements bound over them (:meth:`Database.statement`:
bound once, not for every run). Nothing a query can do outlives it: the configuration (external
access and the files it may still read, memory limit, threads, spill bound) is set when the
database is created and then locked, statements that change the catalog are refused before they
reach the engine (:mod:`flight_server.server.sql.query`), and a database one query failed on
(out of memory, interrupted, any engine error) is closed rather than reused. One database serves
one query at a time, so its memory limit and spill bound stay per query.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Iterable

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds

from flight_server.server.engine.native_files import ParquetFiles, sql_identifier

#: the files a database may read (its ``allowed_paths``); empty: none
Files = frozenset[str]


@dataclass(frozen=True)
class DatabaseSpec:
    """What a database is made for: the ``files`` it may read and the ``threads`` its queries
    run on. Both are fixed when it is made (its configuration is locked), so a query is lent only
    a database of exactly its spec."""

    files: Files
    threads: int
#: statements kept bound per database (a few per client: a dashboard's handful)
STATEMENTS_KEPT = 64


class Database:
    """A pooled database and the connection its queries run on, one query at a time.

    Attributes:
        connection: the connection every query of this database runs on (its interrupt is the
            query's: the watchdog stops it through this).
        views: the native views on ``connection`` (name -> the files each reads), kept between queries.
        bound: how many statements were bound on ``connection`` (a statement kept is bound once).
    """

    def __init__(self, database: duckdb.DuckDBPyConnection):
        self._database = database
        self.connection = database.cursor()
        self.views: dict[str, ParquetFiles] = {}
        self.bound = 0
        self._registered: list[str] = []
        self._statements: dict[str, duckdb.DuckDBPyRelation] = {}  # bound over ``views`` as they are

    def register(self, name: str, view: pa.RecordBatchReader | ds.Dataset | pa.Table) -> None:
        """Register ``view`` as ``name`` for this query only (dropped by :meth:`end_query`)."""
        self.drop_view(name)
        self.connection.register(name, view)
        self._registered.append(name)

    def show_view(self, name: str, files: ParquetFiles) -> None:
        """Have the native view ``name`` read ``files`` (created once: kept for the next query)."""
        if self.views.get(name) == files:
            return
        self.drop_view(name)
        self.connection.execute(f"CREATE TEMPORARY VIEW {sql_identifier(name)} AS {files.select_sql()}")
        self.views[name] = files
        self._statements.clear()

    def keep_views(self, names: Iterable[str]) -> None:
        """Drop the native views other than ``names`` (an earlier query's): a query sees only its own."""
        for name in set(self.views).difference(names):
            self.drop_view(name)

    def drop_view(self, name: str) -> None:
        """Drop the native view ``name`` (if there is one) and every statement bound over views."""
        if self.views.pop(name, None) is not None:
            self._statements.clear()
            self.connection.execute(f"DROP VIEW IF EXISTS {sql_identifier(name)}")

    def statement(self, sql: str) -> duckdb.DuckDBPyRelation:
        """``sql`` bound on the connection: kept while the query's views are native views only,
        and until the views change (binding a statement costs more than a small aggregate's run)."""
        if self._registered:
            return self._bind(sql)
        bound = self._statements.pop(sql, None)
        if bound is None:
            bound = self._bind(sql)
            if len(self._statements) >= STATEMENTS_KEPT:
                del self._statements[next(iter(self._statements))]  # the least recently used
        self._statements[sql] = bound
        return bound

    def _bind(self, sql: str) -> duckdb.DuckDBPyRelation:
        self.bound += 1
        return self.connection.sql(sql)

    def end_query(self) -> bool:
        """Drop the query's registered views; ``False``: the connection could not (do not reuse it)."""
        try:
            for name in self._registered:
                self.connection.unregister(name)
        except duckdb.Error:
            return False
        self._registered.clear()
        return True

    def close(self) -> None:
        self._statements.clear()
        self.connection.close()
        self._database.close()


class DatabasePool:
    """At most ``idle`` idle databases made by ``create(spec)``, each lent to one query at a time.

    A database is made for a :class:`DatabaseSpec` (the set of files it may read: empty for a
    query over streamed views only, :mod:`.native_files`; and its thread count) and lent only to
    a query of exactly that spec; past the bound, the database given back longest ago is closed.
    """

    def __init__(self, create: Callable[[DatabaseSpec], duckdb.DuckDBPyConnection], idle: int):
        self._create = create
        self._idle_max = idle
        self._idle: list[tuple[DatabaseSpec, Database]] = []  # oldest first
        self._lock = threading.Lock()
        self._closed = False
        self.created = 0

    def take(self, spec: DatabaseSpec) -> Database:
        """An idle database made for exactly ``spec``, or a new one."""
        with self._lock:
            for i in range(len(self._idle) - 1, -1, -1):
                if self._idle[i][0] == spec:
                    return self._idle.pop(i)[1]
            self.created += 1
        return Database(self._create(spec))

    def give_back(self, database: Database, reusable: bool, spec: DatabaseSpec) -> None:
        """Keep ``database`` (made for ``spec``) for the next query when ``reusable``; else close it."""
        evicted = None
        with self._lock:
            if reusable and not self._closed:
                self._idle.append((spec, database))
                if len(self._idle) <= self._idle_max:
                    return
                evicted = self._idle.pop(0)[1]
        (evicted or database).close()

    def idle(self) -> list[Database]:
        """The idle databases, oldest first."""
        with self._lock:
            return [database for _, database in self._idle]

    def close(self) -> None:
        """Close every idle database; databases given back afterwards are closed too."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for _, database in idle:
            database.close()


__all__ = ["Database", "DatabasePool", "DatabaseSpec", "Files"]
