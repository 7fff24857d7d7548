"""hudi-flight's catalog: read Apache Hudi tables into Arrow without a JVM.

>>> from catalog import HudiTable                     # doctest: +SKIP
>>> HudiTable.open("/data/trips").read(columns=["id"])  # doctest: +SKIP
"""

from .exceptions import (
    ColumnNotFoundError,
    CorruptTableError,
    HudiError,
    InvalidInstantError,
    InvalidQueryError,
    TableNotFoundError,
    UnknownTableError,
    UnsupportedTableError,
)
from .scan import ScanOptions, TableScan
from .table import HudiTable

__all__ = [
    "ColumnNotFoundError",
    "CorruptTableError",
    "HudiError",
    "HudiTable",
    "InvalidInstantError",
    "InvalidQueryError",
    "ScanOptions",
    "TableNotFoundError",
    "TableScan",
    "UnknownTableError",
    "UnsupportedTableError",
]
