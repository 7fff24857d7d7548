"""Planning helpers for tests: the partitions a read plans, and the rows of a planned scan."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from catalog import HudiTable, ReadOptions
from catalog.plan.planner import ScanPlan, file_slices
from catalog.read.split_reader import read_splits


def planned_partitions(table: HudiTable, **options: Any) -> list[str]:
    """The partitions the planner builds file slices for (after partition pruning), in order."""
    view = table.state.fs_view
    seen: list[str] = []
    original = view.latest_file_slices

    def spy(partitions, *args, **kwargs):
        seen.extend(partitions)
        return original(partitions, *args, **kwargs)

    view.latest_file_slices = spy  # type: ignore[method-assign]
    try:
        for _ in file_slices(table.state, ReadOptions(**options)):
            pass
    finally:
        del view.latest_file_slices
    return seen


def scan_rows(scan: ScanPlan) -> pa.Table:
    """Every row of a planned scan (its splits are consumed)."""
    return pa.Table.from_batches(list(read_splits(scan.context, scan.splits, scan.options.limit)), scan.schema)


__all__ = ["planned_partitions", "scan_rows"]
