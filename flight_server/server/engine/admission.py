"""Admission of SQL queries: fair shares first, the process-wide SQL memory budget as a backstop.

Each running query holds its ``sql_memory_limit`` of ``sql_memory_budget``. Before it may take a
share of the budget, a query must fit its caller's own share: at most ``sql_queries_per_user``
queries of one user and ``sql_queries_per_connection`` of one connection run at once (anonymous
callers count by connection only: ``security.budgets.CallKeys``), so one user looping heavy SQL
holds at most their share and never the slots another user's query needs. A query past its share,
or finding the whole budget spent, waits up to ``sql_admission_wait_seconds``, then is refused as
a busy server (UNAVAILABLE with a retry hint, ``security.budgets``) naming the bound."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from flight_server.server.engine.settings import parse_bytes
from flight_server.server.security.budgets import Budget, CallKeys, ServerBusyError

RETRY_SECONDS = 1.0


def default_share(slots: int) -> int:
    """The queries one user or connection may run at once when not configured: a quarter of the
    budget's (at least one), so three others always find room."""
    return max(1, slots // 4)


class MemoryBudget:
    """Admission of SQL queries: at most ``budget // per_query`` run at once (at least one), at
    most ``per_user`` of one user and ``per_connection`` of one connection (``0``: the
    :func:`default_share`)."""

    def __init__(self, budget: str, per_query: str, wait_seconds: float, per_user: int = 0, per_connection: int = 0):
        self.budget = budget
        self.per_query = per_query
        self.slots = max(1, parse_bytes(budget) // max(1, parse_bytes(per_query)))
        self.wait_seconds = wait_seconds
        self._free = threading.BoundedSemaphore(self.slots)
        share = default_share(self.slots)
        self.shares = Budget(
            "queries", per_user or share, per_connection or share, 0, RETRY_SECONDS, wait_seconds,
            setting="sql_{name}_per_{kind}",
        )

    @contextlib.contextmanager
    def admitted(self, keys: CallKeys | None = None) -> Iterator[None]:
        """Hold one query's share of the budget for the block: first one of the caller's own
        share (``keys``; ``None``: a query of the server itself, the budget only).

        Raises:
            ServerBusyError: the caller's share, or the budget, stayed spent for ``wait_seconds``.
        """
        if keys is None:
            self._take()
            try:
                yield
            finally:
                self._free.release()
            return
        with self.shares.held(keys):
            self._take()
            try:
                yield
            finally:
                self._free.release()

    def _take(self) -> None:
        """One slot of the budget (given back with ``self._free.release()``)."""
        if not self._free.acquire(timeout=self.wait_seconds):
            raise ServerBusyError(
                "sql_memory_budget", self.slots,
                f"{self.slots} SQL queries of sql_memory_limit {self.per_query} hold all of {self.budget}",
                RETRY_SECONDS,
            )


__all__ = ["RETRY_SECONDS", "MemoryBudget", "default_share"]
