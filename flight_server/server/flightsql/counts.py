"""Metadata counts (``SELECT count(*)`` answered without reading rows), kept per table state.

Counting from metadata lists every split of the scan only to add up its row counts: most of a
warm ``count(*)``'s server time. A count is a function of the table state it was planned on (the
timeline, and the file listing the state holds) and of the pinned scan (table, instant, options
with their filters): it is kept for that very state object, which the table cache replaces as soon
as one timeline listing shows an instant file added or removed. So the next count after a commit
plans again, and a state no longer cached is not kept alive by its counts (a weak reference).
"""

from __future__ import annotations

import json
import weakref
from typing import Callable

from catalog.lru import BoundedLRU
from catalog.state import TableState
from flight_server.server.query.queries import PlannedScan

#: counts kept (an entry is its pinned scan's text and two numbers)
COUNT_ENTRIES = 1024
_NONE = -1  # kept for scans that must be counted by reading


class MetadataCounts:
    """The metadata counts of recent scans, by pinned scan, each for the table state it holds for."""

    def __init__(self, entries: int = COUNT_ENTRIES):
        self._kept: BoundedLRU[str, tuple[weakref.ref[TableState], int]] = BoundedLRU("sql metadata counts", entries)

    def count(self, planned: PlannedScan, compute: Callable[[], int | None]) -> int | None:
        """The rows of ``planned`` by ``compute`` (``None``: count by reading), computed once per
        table state and pinned scan."""
        key = json.dumps(planned.pinned.to_json(), sort_keys=True, separators=(",", ":"))
        state = planned.table.state
        kept = self._kept.get(key)
        if kept is not None and kept[0]() is state:
            return None if kept[1] == _NONE else kept[1]
        counted = compute()
        self._kept.put(key, (weakref.ref(state), _NONE if counted is None else counted), 1)
        return counted


__all__ = ["MetadataCounts"]
