"""A statement's views, as the serving process hands them to the engine, and what went wrong
reading them, carried as data.

Each view is a streamed Arrow reader (its rows read in the serving process and sent to the engine
process as they come) or a dataset of local base files (which the engine reads itself). A view
that reads a catalog table names it, so that a failure reading it is told as the reader tells it
(a file gone since planning is NOT_FOUND, naming the table, not a server path): the first error
raised by a streamed view's source is kept here by whoever reads it (:mod:`.sandbox`'s pumps),
and :mod:`.client_errors` prefers it to the engine's own words.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Iterator, Mapping, TypeAlias

import pyarrow as pa
import pyarrow.dataset as ds

#: what a view's rows come from: a stream, or a dataset of local base files
Source: TypeAlias = "pa.RecordBatchReader | ds.Dataset"


@dataclass(frozen=True)
class View:
    """One view of a statement: its name in the engine SQL, its rows, and the catalog table they
    are read from (``None``: rows of no table, e.g. a metadata table's)."""

    name: str
    source: Source
    table: str | None = None


class Views:
    """The views of one statement, and the first error raised reading a streamed one."""

    def __init__(self, views: tuple[View, ...] = ()):
        self.views = views
        self._failure: Exception | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, sources: Mapping[str, Source]) -> "Views":
        """Views of no catalog table, by name."""
        return cls(tuple(View(name, source) for name, source in sources.items()))

    def __iter__(self) -> Iterator[View]:
        return iter(self.views)

    def failed(self, err: Exception) -> None:
        """Keep ``err``, raised by a streamed view's source (only the first counts)."""
        with self._lock:
            if self._failure is None:
                self._failure = err

    @property
    def failure(self) -> Exception | None:
        """The first error a streamed view's source raised (``None``: none did)."""
        with self._lock:
            return self._failure

    def native_tables(self) -> dict[str, str]:
        """The tables of the views the engine reads itself (view name -> table)."""
        return {v.name: v.table for v in self.views if isinstance(v.source, ds.Dataset) and v.table is not None}


__all__ = ["Source", "View", "Views"]
