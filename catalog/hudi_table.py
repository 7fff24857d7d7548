"""``HudiTable``: the public entry point of the library (docs/reading.md).

Reading is the planner plus the split reader, nothing else: the same two steps a Flight
``do_get`` runs, so the library and the service cannot disagree.
"""

from __future__ import annotations

from typing import Any, Mapping

import pyarrow as pa

from catalog.format.caches import ReadCaches
from catalog.meta import meta_table
from catalog.plan.options import ReadOptions, read_options
from catalog.plan.planner import ScanPlan, plan
from catalog.plan.splits import default_footer_cache
from catalog.read.split_reader import read_splits
from catalog.state import TableState
from catalog.storage import Storage, open_table_storage
from catalog.table.config import TableConfig
from catalog.timeline import Timeline

#: what the library reads through: the footers planning read (a remote read takes them from there)
_LIBRARY_CACHES = ReadCaches(footers=default_footer_cache())


class HudiTable:
    """A Hudi table opened for reading (copy-on-write or merge-on-read).

    Read options are the fields of :class:`~catalog.plan.options.ReadOptions`, given as
    keyword arguments (``columns``, ``filters``, ``query_type``, ``as_of``, ``start``, ``end``,
    ``limit``) or as one ``ReadOptions`` value.

    >>> t = HudiTable.open("/data/trips")                       # doctest: +SKIP
    >>> t.read(columns=["id"], filters=[("city", "=", "sf")])   # doctest: +SKIP
    """

    def __init__(self, state: TableState):
        self.state = state

    @classmethod
    def open(
        cls,
        uri: str,
        storage_options: Mapping[str, Any] | None = None,
        use_metadata_table: bool = True,
        use_record_index: bool | None = None,
    ) -> "HudiTable":
        """Open the table at ``uri`` (a path or any fsspec URL); reads config and timeline.

        Args:
            uri: the table's base path.
            storage_options: passed to the fsspec filesystem.
            use_metadata_table: plan from the metadata table where it is usable.
            use_record_index: ``None`` (default): prune by the record index only where the
                timeline proves record keys unique; ``True``: always; ``False``: never.

        Raises:
            TableNotFoundError: no Hudi table there.
            UnsupportedTableError: a table version or base file format this reader refuses.
            CorruptTableError: unreadable ``hoodie.properties``.
        """
        storage = open_table_storage(uri, storage_options)
        return cls(TableState.load(storage, use_metadata_table, use_record_index))

    # -- attributes ---------------------------------------------------------------------
    @property
    def uri(self) -> str:
        return self.state.storage.uri

    @property
    def storage(self) -> Storage:
        """The table's storage (its ``stats`` count the requests made)."""
        return self.state.storage

    @property
    def config(self) -> TableConfig:
        return self.state.config

    @property
    def timeline(self) -> Timeline:
        return self.state.timeline

    @property
    def schema(self) -> pa.Schema:
        return self.state.schema

    @property
    def table_type(self) -> str:
        return self.config.table_type

    @property
    def table_version(self) -> int:
        return self.config.table_version

    @property
    def partition_fields(self) -> list[str]:
        return list(self.config.partition_fields)

    @property
    def record_key_fields(self) -> list[str]:
        return list(self.config.record_key_fields)

    # -- reading ------------------------------------------------------------------------
    def scan(self, options: ReadOptions | None = None, /, **kwargs: Any) -> ScanPlan:
        """Plan a read; nothing is read until the plan's splits are read."""
        return plan(self.state, read_options(options, **kwargs))

    def read_batches(self, options: ReadOptions | None = None, /, **kwargs: Any) -> pa.RecordBatchReader:
        """The result streamed as record batches (splits read in parallel, any order)."""
        scan = self.scan(options, **kwargs)
        batches = read_splits(scan.context, scan.splits, scan.options.limit, caches=_LIBRARY_CACHES)
        return pa.RecordBatchReader.from_batches(scan.schema, batches)

    def read(self, options: ReadOptions | None = None, /, **kwargs: Any) -> pa.Table:
        """The result as one ``pyarrow.Table``."""
        return self.read_batches(options, **kwargs).read_all()

    # -- metadata tables ----------------------------------------------------------------
    def metadata_table(self, name: str, as_of: str | None = None) -> pa.Table:
        """A metadata table of this table (``catalog.meta``; SQL serves it as ``"t$name"``):
        ``timeline``, ``archived_timeline``, ``commits``, ``file_groups``, ``partitions``,
        ``properties``, ``indexes`` or ``health``.

        ``as_of``: time travel, for ``commits``, ``file_groups`` and ``partitions`` only.

        >>> t.metadata_table("file_groups", as_of="2025-01-01")  # doctest: +SKIP
        """
        return meta_table(self.state, name, as_of)

    def __repr__(self) -> str:
        return f"HudiTable({self.uri!r}, {self.table_type}, v{self.table_version})"


__all__ = ["HudiTable"]
