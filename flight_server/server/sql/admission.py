"""The process-wide SQL memory budget: each running query holds its ``sql_memory_limit`` of
``sql_memory_budget``; a query that finds the budget spent waits a moment, then is refused as a
busy server (UNAVAILABLE with a retry hint, ``security.budgets``) naming the budget."""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Iterator

from flight_server.server.security.budgets import ServerBusyError

RETRY_SECONDS = 1.0
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def parse_bytes(text: str) -> int:
    """``"1GB"``, ``"512MiB"``, ``"2048"`` -> bytes (DuckDB's units: KB = 1000, KiB = 1024).

    Raises:
        ValueError: not a size.
    """
    found = _SIZE.match(text)
    if not found:
        raise ValueError(f"not a size: {text[:32]!r} (expected e.g. 512MB or 2GiB)")
    number, unit = float(found.group(1)), found.group(2).lower()
    if "i" in unit:
        factor = 1024 ** ("bkmgt".index(unit[0]))
    else:
        factor = _UNITS[unit.rstrip("b")]
    return int(number * factor)


class MemoryBudget:
    """Admission of SQL queries: at most ``budget // per_query`` run at once (at least one)."""

    def __init__(self, budget: str, per_query: str, wait_seconds: float):
        self.budget = budget
        self.per_query = per_query
        self.slots = max(1, parse_bytes(budget) // max(1, parse_bytes(per_query)))
        self.wait_seconds = wait_seconds
        self._free = threading.BoundedSemaphore(self.slots)

    @contextlib.contextmanager
    def admitted(self) -> Iterator[None]:
        """Hold one query's share of the budget for the block.

        Raises:
            ServerBusyError: the budget stayed spent for ``wait_seconds``.
        """
        if not self._free.acquire(timeout=self.wait_seconds):
            raise ServerBusyError(
                "sql_memory_budget", self.slots,
                f"{self.slots} SQL queries of sql_memory_limit {self.per_query} hold all of {self.budget}",
                RETRY_SECONDS,
            )
        try:
            yield
        finally:
            self._free.release()


__all__ = ["MemoryBudget", "parse_bytes"]
