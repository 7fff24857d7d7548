"""Freshness without waiting: a thread that keeps recently queried tables' states current.

With ``max_staleness_ms`` a query reuses a state checked less than that long ago. Without help
the first query after the bound lists the timeline (a request to the store, ~25 ms on S3) while
its caller waits. :class:`BackgroundRefresh` makes that listing ahead of it: every table queried
within the last ``RECENT_INTERVALS`` intervals is checked once its last check is ``DUE`` of the
interval old, so it is checked about once per interval and a query finds a state checked less
than the interval ago. Tables not queried for a while are dropped from the round (no listing
for tables nobody reads); at most ``max_tables`` (the most recently queried) are kept current.

Errors of a refresh are logged and the table stays in the round; the queries then check for
themselves once the bound passes. The thread starts with the first query and stops on
:meth:`BackgroundRefresh.close` (server shutdown).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Generic, Hashable, TypeVar

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)
#: a table is checked once its last check is this fraction of the interval old
DUE = 0.75
#: the round wakes this many times per interval
TICKS = 4
#: tables not queried within this many intervals (at least ``RECENT_SECONDS``) leave the round
RECENT_INTERVALS = 10
RECENT_SECONDS = 60.0
#: the bound of tables kept current
REFRESHED_TABLES = 64


class BackgroundRefresh(Generic[K]):
    """Re-checks recently queried tables ahead of their queries (see the module docstring).

    Args:
        interval: seconds a state may be old (the server's ``max_staleness_ms``).
        refresh: ``refresh(key, now)`` checks one table (one timeline listing) and records ``now``
            as its last check.
        checked: the time of a table's last check (``-inf``: never).
        clock: monotonic seconds (a test's own clock).
        max_tables: at most this many recently queried tables are kept current.
    """

    def __init__(
        self,
        interval: float,
        refresh: Callable[[K, float], None],
        checked: Callable[[K], float],
        clock: Callable[[], float] = time.monotonic,
        max_tables: int = REFRESHED_TABLES,
    ):
        self.interval = interval
        self._refresh = refresh
        self._checked = checked
        self._clock = clock
        self._max_tables = max_tables
        self._queried: dict[K, float] = {}  # insertion order: least recently queried first
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refreshes = 0
        self.failures = 0

    def queried(self, key: K) -> None:
        """``key`` was just queried: keep it current (the thread starts with the first query)."""
        with self._lock:
            self._queried.pop(key, None)
            self._queried[key] = self._clock()
            while len(self._queried) > self._max_tables:
                del self._queried[next(iter(self._queried))]
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._loop, name="hudi-table-refresh", daemon=True)
                self._thread.start()

    def forget(self, key: K) -> None:
        with self._lock:
            self._queried.pop(key, None)

    def tables(self) -> list[K]:
        """The tables in the round, least recently queried first."""
        with self._lock:
            return list(self._queried)

    @property
    def running(self) -> bool:
        """Whether the thread is alive."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def run_once(self) -> int:
        """One round: check every recent table whose check is due; returns how many were checked."""
        now = self._clock()
        recent = max(RECENT_SECONDS, RECENT_INTERVALS * self.interval)
        with self._lock:
            for key in [k for k, at in self._queried.items() if now - at > recent]:
                del self._queried[key]
            keys = list(self._queried)
        done = 0
        for key in keys:
            if self._stop.is_set():
                break
            if now - self._checked(key) < DUE * self.interval:
                continue
            try:
                self._refresh(key, self._clock())
                done += 1
            except Exception:  # a store down, a table dropped: the queries check for themselves
                self.failures += 1
                log.warning("background refresh of %s failed", key, exc_info=True)
        self.refreshes += done
        return done

    def _loop(self) -> None:
        while not self._stop.wait(self.interval / TICKS):
            self.run_once()

    def close(self) -> None:
        """Stop the thread (waiting for a round under way)."""
        self._stop.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()


__all__ = ["BackgroundRefresh"]
