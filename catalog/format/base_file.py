"""What to read of one base file, as one value: the decoders of every base file format take it.

:func:`catalog.read.cow.read_base` builds it from a read task and a file slice; Parquet
(:func:`catalog.format.parquet.read_parquet`), ORC and Lance readers read it. It names the
file and the query's part of it (columns, row groups, filter); the caches a read goes through
are given beside it (:class:`catalog.format.caches.ReadCaches`), never inside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from catalog.format.row_groups import PointLookup


@dataclass(frozen=True)
class BaseFileRead:
    """The read of one base file.

    Attributes:
        path: the file, relative to the table's storage.
        schema: the columns to return plus those ``filter`` needs, in the table's types.
        size: the file's size from the listing (``None``: unknown, asked when needed).
        row_groups: the Parquet row groups (ORC: stripes) to read; ``None``: all.
        filter: the exact row filter (pushed into the decoder where the file's types allow).
        filter_columns: the columns ``filter`` reads.
        constants: values of columns the data files leave out (dropped partition columns).
        source_names: schema on read: the names of ``schema`` -> the file's column names
            (columns it leaves out are absent from the file).
        adapt: schema on read: maps nested fields of a decoded batch to the query's names.
        point: a lookup of record keys (a point read), or ``None``.
        nested: ``schema`` keeps some structs only in part (the query named nested fields): a
            Parquet read decodes only their leaves (``catalog.format.parquet.leaf_paths``).
    """

    path: str
    schema: pa.Schema
    size: int | None = None
    row_groups: tuple[int, ...] | None = None
    filter: pc.Expression | None = None
    filter_columns: tuple[str, ...] = ()
    constants: Mapping[str, pa.Scalar] | None = None
    source_names: Mapping[str, str] | None = None
    adapt: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None
    point: PointLookup | None = None
    nested: bool = False


__all__ = ["BaseFileRead"]
