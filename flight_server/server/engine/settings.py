"""The SQL engine's settings: what the serving process decides and each engine process is told.

Each field is the server configuration key ``sql_<name>`` (``sql_memory_limit``, ``sql_threads``,
...). The serving process sends them to every engine process it starts (as JSON), so this module
imports nothing of the server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


@dataclass(frozen=True)
class EngineSettings:
    """The engine's bounds and its admission (the configuration keys ``sql_<name>``)."""

    memory_limit: str = "1GB"  # per query (DuckDB's memory_limit)
    threads: int = 2  # the most a query runs on (fewer for a small scan: ROWS_PER_THREAD)
    temp_dir: str | None = None  # a private folder; None: no spilling
    max_temp_size: str = "4GB"  # spilled bytes per query (DuckDB's max_temp_directory_size)
    timeout_seconds: float = 300.0  # a query is interrupted after this long
    max_result_bytes: int = 4 << 30  # Arrow bytes one query may stream
    memory_budget: str = "2GB"  # all running queries together (admission's slots; process growth)
    admission_wait_seconds: float = 60.0  # the longest a statement waits in the queue before refused
    queries_per_user: int = 0  # SQL work of one user at once (0: half the slots, at least 1)
    queries_per_connection: int = 0  # ... of one connection (0: as per user; anonymous callers count only here)
    queue_per_user: int = 64  # SQL work of one user waiting at once (past it: refused with a retry hint)
    queue_per_connection: int = 32  # ... of one connection
    queue_total: int = 256  # ... of everyone
    native_scan: bool = True  # plain Parquet base files are scanned by the engine (.native_files)
    native_reader: bool = True  # ... local ones by its own Parquet reader (.native_files); False: through Arrow
    process_memory: str = ""  # how far an engine process may grow (.sandbox; "": twice memory_limit + 1 GiB)

    @property
    def slots(self) -> int:
        """How many statements run at once: the budget's share of ``memory_limit`` each (at least one)."""
        return max(1, parse_bytes(self.memory_budget) // max(1, parse_bytes(self.memory_limit)))

    def process_allowance(self) -> int:
        """How far an engine process's address space may grow past its start (``sql_process_memory``)."""
        if self.process_memory:
            return parse_bytes(self.process_memory)
        return 2 * parse_bytes(self.memory_limit) + (1 << 30)

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
        admission = ("queries_per_user", "queries_per_connection", "queue_per_user", "queue_per_connection",
                     "queue_total", "admission_wait_seconds")
        negative = [f"sql_{key}" for key in admission if getattr(self, key) < 0]
        if negative:
            raise ValueError(f"{' and '.join(negative)} must not be negative")


__all__ = ["EngineSettings", "parse_bytes"]
