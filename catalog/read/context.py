"""A read task's query half: the table facts and options every split of one query is read with.

The planner (``catalog.plan.planner``) builds a :class:`ReadContext` once per query; a read task
is that context plus a split, both plain frozen values (they pickle whole: the storage by URL
and options), so the library, a Flight ``do_get`` and any other process that receives them run
exactly the same code. What a process keeps between reads (footers, decoded row groups, decoded
log blocks) is never part of it: the reader is given those beside the task
(:class:`catalog.format.caches.ReadCaches`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc

from catalog.errors import UnsupportedTableError
from catalog.format.row_groups import PointLookup
from catalog.storage import Storage
from catalog.table.cdc import CdcPlan
from catalog.table.config import TableConfig
from catalog.table.internal_schema import ColumnMap, SchemaHistory
from catalog.table.partitions import PartitionScheme, dropped_partition_columns
from catalog.timeline import CommitSet

COMMIT_TIME_COLUMN = "_hoodie_commit_time"


@dataclass(frozen=True, eq=False)
class ReadContext:
    """The table facts and the query of one planned read.

    Attributes:
        storage: the table's storage (pickles by URL and options).
        config: the table's ``hoodie.properties``.
        commits: which instants are committed (decides which log blocks count).
        table_schema: the full table schema.
        read_schema: the columns read: output columns plus those the row filter needs.
        output_schema: the columns returned.
        instant: the query instant (log blocks after it are ignored); ``None``: no commits.
        read_optimized: read base files only, ignoring log files.
        row_filter: the exact row filter (query filters, plus the incremental commit-time
            filter); ``None`` when every row counts.
        filter_columns: the columns ``row_filter`` reads.
        schema_history: schema on read: the internal schema versions, to match the columns of
            files written with older schemas by field id; ``None`` for other tables.
        cdc: the changes of a CDC query (``None`` for every other query); its splits name file
            groups, whose rows ``catalog.read.cdc`` builds from these changes.
        point: the record keys the filters pin (``=`` / ``in`` on a plain record key), when they
            do: a point read (``None``: any other read).
        prunes_nested: ``read_schema`` keeps some structs only in part (the query named nested
            fields: ``catalog.plan.projection``), so readers decode only those fields' leaves.
    """

    storage: Storage
    config: TableConfig
    commits: CommitSet
    table_schema: pa.Schema
    read_schema: pa.Schema
    output_schema: pa.Schema
    instant: str | None
    read_optimized: bool = False
    row_filter: pc.Expression | None = None
    filter_columns: tuple[str, ...] = ()
    schema_history: SchemaHistory | None = None
    cdc: CdcPlan | None = None
    point: PointLookup | None = None
    prunes_nested: bool = False

    @cached_property
    def partition_scheme(self) -> PartitionScheme:
        return PartitionScheme(self.config, self.table_schema)

    def column_map(self, instant: str | None) -> ColumnMap | None:
        """Renames/drops for a file or log block written at ``instant`` (schema on read)."""
        return self.schema_history.column_map(instant) if self.schema_history is not None else None

    def partition_constants(self, partition: str) -> dict[str, pa.Scalar] | None:
        """Typed partition values for tables whose data files leave partition columns out.

        A dropped column the path gives no value for (a timestamp key generator's formatted
        date, a segment that does not parse as the column's type) is refused by name: it would
        otherwise read as null."""
        if not self.config.drop_partition_columns:
            return None
        values = self.partition_scheme.typed_values(partition)
        unfilled = dropped_partition_columns(self.config) - values.keys()
        missing = sorted(n for n in unfilled if n in self.read_schema.names)
        if missing:
            raise UnsupportedTableError(
                f"{self.storage.uri}: partition column(s) {', '.join(missing)} are left out of the data files "
                f"(hoodie.datasource.write.drop.partition.columns) and partition path {partition!r} gives no "
                "value of their type: reading them is not supported"
            )
        return values


__all__ = ["COMMIT_TIME_COLUMN", "ReadContext"]
