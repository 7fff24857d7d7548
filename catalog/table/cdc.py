"""What a change data capture (CDC) query reads: the changes of each file group, commit by commit.

Hudi's CDC query (Spark's ``hoodie.datasource.query.incremental.format=cdc``) returns one row
per changed record with the columns of :data:`CDC_SCHEMA`. The planner
(``catalog.plan.cdc``) turns the commits of the query range into :class:`FileGroupChange`
values, one per (commit, file group), each saying *how* its rows are found (the inference cases
of Hudi's ``HoodieCDCExtractor``); the reader (``catalog.read.cdc``) turns them into rows.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping

import pyarrow as pa

from catalog.table.files import FileSlice

#: Spark's CDC result columns: operation (``i``/``u``/``d``), the commit's requested time, and
#: the record before and after the change as JSON text.
CDC_SCHEMA = pa.schema(
    [
        pa.field("op", pa.string()),
        pa.field("ts_ms", pa.string()),
        pa.field("before", pa.string()),
        pa.field("after", pa.string()),
    ]
)

#: ``hoodie.table.cdc.supplemental.logging.mode`` values: what a ``.cdc`` log record holds.
OP_KEY_ONLY = "OP_KEY_ONLY"  # operation and record key
DATA_BEFORE = "DATA_BEFORE"  # ... plus the before image
DATA_BEFORE_AFTER = "DATA_BEFORE_AFTER"  # operation, commit time, before and after images
LOGGING_MODES = (OP_KEY_ONLY, DATA_BEFORE, DATA_BEFORE_AFTER)


class ChangeKind(enum.Enum):
    """How the changes of one file group in one commit are found (Hudi's inference cases)."""

    #: the commit wrote ``.cdc`` log files for the group: read them (images from the file
    #: slices before and after the commit where the logging mode leaves them out)
    CDC_LOG = "AS_IS"
    #: a new base file of inserts only: every row is an insert
    BASE_FILE_INSERT = "BASE_FILE_INSERT"
    #: a delete emptied the group (no new file): every row of the previous slice is a delete
    BASE_FILE_DELETE = "BASE_FILE_DELETE"
    #: a merge-on-read log file: the group's rows before and after the commit, compared by key
    LOG_FILE = "LOG_FILE"
    #: a replacecommit retired the group: every row of its last slice is a delete
    REPLACED = "REPLACE_COMMIT"


@dataclass(frozen=True, eq=False)
class FileGroupChange:
    """What one commit changed in one file group.

    Attributes:
        instant: the commit's requested time (the ``ts_ms`` of its rows).
        kind: how the rows are found.
        cdc_files: ``.cdc`` log files of the commit (paths relative to the table), for ``CDC_LOG``.
        before: the group's file slice before the commit (``None``: the group did not exist).
        before_instant: the query instant to read ``before`` at (log blocks after it do not count).
        after: the group's file slice after the commit (``None``: the group is gone).
        after_instant: the query instant to read ``after`` at.
    """

    instant: str
    kind: ChangeKind
    cdc_files: tuple[str, ...] = ()
    before: FileSlice | None = None
    before_instant: str | None = None
    after: FileSlice | None = None
    after_instant: str | None = None


@dataclass(frozen=True, eq=False)
class CdcPlan:
    """The changes a CDC query returns, per file group, oldest commit first.

    Attributes:
        start: range start (exclusive, requested time); ``None``: from the first commit.
        end: range end (inclusive, requested time).
        logging_mode: the table's supplemental logging mode (one of :data:`LOGGING_MODES`).
        changes: ``(partition, file id)`` -> the group's changes in commit order.
    """

    start: str | None
    end: str | None
    logging_mode: str
    changes: Mapping[tuple[str, str], tuple[FileGroupChange, ...]] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str | None, str | None]:
        """What, besides the table state, decides the rows of a group (split-result caches)."""
        return (self.start, self.end)


__all__ = [
    "CDC_SCHEMA",
    "DATA_BEFORE",
    "DATA_BEFORE_AFTER",
    "LOGGING_MODES",
    "OP_KEY_ONLY",
    "CdcPlan",
    "ChangeKind",
    "FileGroupChange",
]
