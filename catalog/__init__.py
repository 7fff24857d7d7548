"""hudi-flight's catalog: read Apache Hudi tables into Arrow without a JVM.

>>> from catalog import HudiTable                     # doctest: +SKIP
>>> HudiTable.open("/data/trips").read(columns=["id"])  # doctest: +SKIP

Rooms, lowest first (imports point down only): ``errors``/``storage``; ``format`` (bytes ->
Arrow); ``table`` (config, file names, partition paths); ``timeline``; ``fs_view``; ``listing``
(storage and metadata table); ``state``; ``read`` (one split -> rows); ``plan`` (options ->
splits); ``meta`` (metadata tables: timeline, commits, file groups, health...); ``hudi_table``
(the public API).
"""

from catalog.errors import (
    ColumnNotFoundError,
    CorruptTableError,
    HudiError,
    InvalidInstantError,
    InvalidQueryError,
    MissingExtraError,
    TableNotFoundError,
    UnansweredError,
    UnknownTableError,
    UnsupportedTableError,
)
from catalog.hudi_table import HudiTable
from catalog.plan.options import ReadOptions

__all__ = [
    "ColumnNotFoundError",
    "CorruptTableError",
    "HudiError",
    "HudiTable",
    "InvalidInstantError",
    "InvalidQueryError",
    "MissingExtraError",
    "ReadOptions",
    "TableNotFoundError",
    "UnansweredError",
    "UnknownTableError",
    "UnsupportedTableError",
]
