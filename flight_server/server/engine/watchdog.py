"""Stopping SQL queries from outside: at their deadline, when their client goes away, when the
server shuts down, or when the engine's memory grows past the server's SQL budget.

DuckDB checks for an interrupt between the chunks it processes, so ``connection.interrupt()``
from another thread stops even a query that never yields a row (a recursive CTE without end).
One daemon thread polls the running queries every ``POLL_SECONDS``.

The client's cancellation is only asked while the query's thread is inside the engine (a
blocking DuckDB call): the RPC cannot end during that time, so its call context is alive; between
engine calls the stream itself checks the context (``HudiFlightServer._until_cancelled``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

from flight_server.server.engine import failures

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1

#: why a query was interrupted: the failure kind it ends with (:mod:`.failures`)
DEADLINE, CANCELLED, SHUTDOWN, MEMORY = failures.TIMEOUT, failures.CANCELLED, failures.SHUTDOWN, failures.GREW


class Interruptible(Protocol):
    """What the watchdog needs of a connection (``duckdb.DuckDBPyConnection``)."""

    def interrupt(self) -> None: ...


class _Statm:
    """``/proc/self/statm`` kept open: a reading is one ``pread`` (opening the file anew costs
    seven system calls and two file objects, and a watch of an engine process with a memory
    bound reads it once per statement). Opened again in a forked child (``/proc/self`` named the
    parent when it was opened)."""

    def __init__(self) -> None:
        self._opened: tuple[int, int] | None = None  # (pid, descriptor)
        self._lock = threading.Lock()

    def read(self) -> bytes:
        opened = self._opened
        if opened is None or opened[0] != os.getpid():
            with self._lock:
                opened = self._opened
                if opened is None or opened[0] != os.getpid():
                    opened = self._opened = (os.getpid(), os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC))
        return os.pread(opened[1], 256, 0)


_STATM = _Statm()
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    """The resident set size of this process (0 where ``/proc`` is not available)."""
    try:
        return int(_STATM.read().split()[1]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return 0


@dataclass(eq=False)
class Watch:
    """One running query, registered with the :class:`Watchdog` until it is released."""

    connection: Interruptible
    deadline: float
    cancelled: Callable[[], bool] | None
    rss_at_start: int
    reason: str | None = None
    _busy: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def busy(self) -> "Watch":
        """Mark a blocking engine call (``with watch.busy():``): the client's cancellation is asked
        meanwhile. The watch is its own context manager (several calls per statement: cheaper
        than a generator's)."""
        return self

    def __enter__(self) -> None:
        with self._lock:
            self._busy += 1

    def __exit__(self, *_: object) -> None:
        with self._lock:
            self._busy -= 1

    def stop(self, reason: str) -> bool:
        """Interrupt the query (once; the first reason is kept); ``False``: it already was."""
        with self._lock:
            if self.reason is not None:
                return False
            self.reason = reason
        self.connection.interrupt()
        return True

    def client_gone(self) -> bool:
        with self._lock:
            if not self._busy or self.cancelled is None:
                return False
            try:
                return bool(self.cancelled())
            except Exception:  # a context that cannot answer: keep the query, its deadline still holds
                return False


class Watchdog:
    """Interrupts registered queries at their deadline, on cancellation, on :meth:`stop_all`,
    and when the process has grown by more than ``memory_bytes`` since the oldest running query
    started (DuckDB's ``memory_limit`` does not count every list and string value)."""

    def __init__(self, memory_bytes: int | None = None, rss: Callable[[], int] = rss_bytes):
        self.memory_bytes = memory_bytes
        self._rss = rss
        self._watches: set[Watch] = set()
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self.closed = False  # stop_all was called: no query starts any more

    def watch(self, connection: Interruptible, seconds: float, cancelled: Callable[[], bool] | None) -> Watch:
        # the size at the start matters only to a memory bound (reading it costs a file read)
        start = self._rss() if self.memory_bytes is not None else 0
        entry = Watch(connection, time.monotonic() + seconds, cancelled, start)
        with self._lock:
            self._watches.add(entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="hudi-sql-watchdog", daemon=True)
                self._thread.start()
            self._lock.notify_all()
            closed = self.closed
        if closed:  # the server began to stop while this query started: it never runs
            entry.stop(SHUTDOWN)
        return entry

    def release(self, entry: Watch) -> None:
        """Forget ``entry`` (before its connection is closed: it is never interrupted after)."""
        with self._lock:
            self._watches.discard(entry)

    def running(self) -> int:
        with self._lock:
            return len(self._watches)

    def stop_all(self, reason: str = SHUTDOWN) -> None:
        """Interrupt every running query now and refuse new ones (server shutdown)."""
        with self._lock:
            self.closed = True
            for entry in list(self._watches):
                entry.stop(reason)

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._watches:
                    self._lock.wait()
                self._check(list(self._watches))
            time.sleep(POLL_SECONDS)

    def _check(self, watches: list[Watch]) -> None:
        now = time.monotonic()
        for entry in watches:
            if now > entry.deadline:
                entry.stop(DEADLINE)
            elif entry.client_gone():
                entry.stop(CANCELLED)
        if self.memory_bytes is not None and watches:
            grown = self._rss() - min(e.rss_at_start for e in watches)
            if grown > self.memory_bytes:
                stopped = sum(entry.stop(MEMORY) for entry in watches)
                if stopped:
                    log.warning("SQL queries grew the server by %d MiB: interrupted %d", grown >> 20, stopped)


__all__ = ["CANCELLED", "DEADLINE", "MEMORY", "SHUTDOWN", "Watch", "Watchdog", "rss_bytes"]
