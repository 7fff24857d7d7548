"""A stand-in for the table resolver the SQL analysis calls (name, schema and read options)."""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from catalog.plan.options import ReadOptions


class CountingResolver:
    """Resolves table ``name`` to ``ns.name`` with ``schemas[name]``; counts its calls; refuses
    (as a revoked right does) while :attr:`refused`."""

    def __init__(self, schemas: dict[str, pa.Schema]) -> None:
        self.schemas = schemas
        self.calls = 0
        self.refused = False

    def __call__(self, table: exp.Table) -> tuple[str, pa.Schema, ReadOptions]:
        self.calls += 1
        if self.refused:
            raise PermissionError(f"no read right on table {table.name}")
        return f"ns.{table.name}", self.schemas[table.name], ReadOptions()
