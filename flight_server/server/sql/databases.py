"""Idle locked-down DuckDB databases, reused by one query at a time.

Creating an in-memory DuckDB database costs about 18 ms of CPU, more than a small aggregate over
a natively scanned table, and every statement needs two (its result schema when planned, its run
when read). A query therefore takes an idle database and runs on a fresh connection of it
(``cursor()``: its own registered views, temporary objects and interrupt), which it closes when
it ends; the database goes back to the pool only when the query ended without error.

Nothing a query can do outlives its connection: the configuration (external access and the
files it may still read, memory limit, threads, spill bound) is set when the database is created
and then locked, statements that change the catalog are refused before they reach the engine
(:mod:`flight_server.server.sql.query`), and a database one query failed on (out of memory,
interrupted, any engine error) is closed rather than reused. One database serves one query at a
time, so its memory limit and spill bound stay per query.
"""

from __future__ import annotations

import threading
from typing import Callable

import duckdb

#: the files a database may read (its ``allowed_paths``); empty: none
Files = frozenset[str]


class DatabasePool:
    """At most ``idle`` idle databases made by ``create(files)``, each lent to one query at a time.

    A database is made for the set of files it may read (empty for a query over streamed views
    only: :mod:`.native_files`) and lent only to a query reading exactly that set; past the
    bound, the database given back longest ago is closed.
    """

    def __init__(self, create: Callable[[Files], duckdb.DuckDBPyConnection], idle: int):
        self._create = create
        self._idle_max = idle
        self._idle: list[tuple[Files, duckdb.DuckDBPyConnection]] = []  # oldest first
        self._lock = threading.Lock()
        self._closed = False
        self.created = 0

    def take(self, files: Files = frozenset()) -> duckdb.DuckDBPyConnection:
        """An idle database that may read exactly ``files``, or a new one."""
        with self._lock:
            for i in range(len(self._idle) - 1, -1, -1):
                if self._idle[i][0] == files:
                    return self._idle.pop(i)[1]
            self.created += 1
        return self._create(files)

    def give_back(self, database: duckdb.DuckDBPyConnection, reusable: bool, files: Files = frozenset()) -> None:
        """Keep ``database`` (made for ``files``) for the next query when ``reusable``; else close it."""
        evicted = None
        with self._lock:
            if reusable and not self._closed:
                self._idle.append((files, database))
                if len(self._idle) <= self._idle_max:
                    return
                evicted = self._idle.pop(0)[1]
        (evicted or database).close()

    def idle(self) -> list[duckdb.DuckDBPyConnection]:
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


__all__ = ["DatabasePool", "Files"]
