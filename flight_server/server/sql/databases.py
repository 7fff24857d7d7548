"""Idle locked-down DuckDB databases, reused by one query at a time.

Creating an in-memory DuckDB database costs about 18 ms of CPU, more than a small aggregate over
a natively scanned table, and every statement needs two (its result schema when planned, its run
when read). A query therefore takes an idle database and runs on a fresh connection of it
(``cursor()``: its own registered views, temporary objects and interrupt), which it closes when
it ends; the database goes back to the pool only when the query ended without error.

Nothing a query can do outlives its connection: the configuration (external access, memory
limit, threads, spill bound) is set when the database is created and then locked, statements
that change the catalog are refused before they reach the engine
(:mod:`flight_server.server.sql.query`), and a database one query failed on (out of memory,
interrupted, any engine error) is closed rather than reused. One database serves one query at a
time, so its memory limit and spill bound stay per query.
"""

from __future__ import annotations

import threading
from typing import Callable

import duckdb


class DatabasePool:
    """At most ``idle`` idle databases made by ``create``, each lent to one query at a time."""

    def __init__(self, create: Callable[[], duckdb.DuckDBPyConnection], idle: int):
        self._create = create
        self._idle_max = idle
        self._idle: list[duckdb.DuckDBPyConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> duckdb.DuckDBPyConnection:
        """An idle database, or a new one."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self._create()

    def give_back(self, database: duckdb.DuckDBPyConnection, reusable: bool) -> None:
        """Keep ``database`` for the next query when ``reusable`` and there is room; else close it."""
        with self._lock:
            if reusable and not self._closed and len(self._idle) < self._idle_max:
                self._idle.append(database)
                return
        database.close()

    def close(self) -> None:
        """Close every idle database; databases given back afterwards are closed too."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for database in idle:
            database.close()


__all__ = ["DatabasePool"]
