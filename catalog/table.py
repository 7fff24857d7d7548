"""``HudiTable``: the public entry point of the library (interfaces.md section 1)."""

from __future__ import annotations

from functools import cached_property
from typing import Any, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from .avro_arrow import avro_to_arrow_schema, with_meta_columns, without_meta_columns
from .config import TableConfig
from .exceptions import CorruptTableError, UnsupportedTableError
from .file_slices import BaseFile
from .fs_view import FileSystemView
from .listing import FileListing
from .mdt_listing import choose_listing
from .partitions import PartitionScheme
from .scan import ScanOptions, TableScan
from .storage import Storage, open_table_storage
from .timeline import Timeline

AVRO_SCHEMA_KEY = b"parquet.avro.schema"


class HudiTable:
    """A Hudi table opened for reading (copy-on-write or merge-on-read; versions 6, 8, 9).

    >>> t = HudiTable.open("/data/trips")                       # doctest: +SKIP
    >>> t.read(columns=["id"], filters=[("city", "=", "sf")])   # doctest: +SKIP
    """

    def __init__(self, storage: Storage, config: TableConfig, timeline: Timeline, use_metadata_table: bool = True):
        self.storage = storage
        self.config = config
        self.timeline = timeline
        self.use_metadata_table = use_metadata_table
        if config.base_file_format != "PARQUET":
            raise UnsupportedTableError(f"unsupported base file format: {config.base_file_format.lower()}")

    @classmethod
    def open(
        cls, uri: str, storage_options: Mapping[str, Any] | None = None, use_metadata_table: bool = True
    ) -> "HudiTable":
        """Open the table at ``uri`` (a path or any fsspec URL); reads config and timeline."""
        storage = open_table_storage(uri, storage_options)
        config = TableConfig.load(storage)
        return cls(storage, config, Timeline.load(storage, config), use_metadata_table)

    # -- attributes ---------------------------------------------------------------------
    @property
    def uri(self) -> str:
        return self.storage.uri

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

    @cached_property
    def schema(self) -> pa.Schema:
        """Table schema, meta columns first (format doc 2.5 for where it comes from).

        Tables written with ``hoodie.populate.meta.fields=false`` have no meta columns in their
        schema (Java's TableSchemaResolver includes them only when populated; hudi-rs agrees).
        """
        text = self.timeline.latest_schema_json() or self.config.create_schema
        data = avro_to_arrow_schema(text) if text else self._schema_from_base_file()
        if self.config.populate_meta_fields:
            return with_meta_columns(data)
        return without_meta_columns(data)

    def _schema_from_base_file(self) -> pa.Schema:
        files = self.listing.list_files(self.listing.list_partitions())
        for partition, entries in files.items():
            for name, _ in entries:
                base = BaseFile.parse(name)
                if base is None or not self.timeline.is_committed(base.instant):
                    continue
                path = f"{partition}/{name}" if partition else name
                with self.storage.open(path) as fh:
                    meta = pq.read_schema(fh)
                avro = (meta.metadata or {}).get(AVRO_SCHEMA_KEY)
                return avro_to_arrow_schema(avro.decode()) if avro else meta.remove_metadata()
        raise CorruptTableError(f"{self.uri}: no schema in the timeline, hoodie.properties or any base file")

    @cached_property
    def listing(self) -> FileListing:
        """THE seam where planning picks its file listing.

        The metadata-table listing (``catalog.mdt_listing``) when ``use_metadata_table`` is set
        and the table's ``files`` MDT partition is usable, else storage listing.
        """
        return choose_listing(self.storage, self.config, self.timeline, self.use_metadata_table)

    @cached_property
    def fs_view(self) -> FileSystemView:
        return FileSystemView(self.config, self.timeline, self.listing)

    @cached_property
    def partition_scheme(self) -> PartitionScheme:
        return PartitionScheme(self.config, self.schema)

    # -- reading ------------------------------------------------------------------------
    def scan(
        self,
        columns: Sequence[str] | None = None,
        filters: Sequence[Any] | None = None,
        query_type: str = "snapshot",
        as_of: str | None = None,
        start: str | None = None,
        end: str | None = None,
        limit: int | None = None,
    ) -> TableScan:
        """A planned, lazy query; nothing is read until its batches are asked for."""
        return TableScan(self, ScanOptions.create(columns, filters, query_type, as_of, start, end, limit))

    def read(
        self,
        columns: Sequence[str] | None = None,
        filters: Sequence[Any] | None = None,
        query_type: str = "snapshot",
        as_of: str | None = None,
        start: str | None = None,
        end: str | None = None,
    ) -> pa.Table:
        """The query result as one ``pyarrow.Table``."""
        return self.scan(columns, filters, query_type, as_of, start, end).to_arrow()

    def read_batches(
        self,
        columns: Sequence[str] | None = None,
        filters: Sequence[Any] | None = None,
        query_type: str = "snapshot",
        as_of: str | None = None,
        start: str | None = None,
        end: str | None = None,
        limit: int | None = None,
    ) -> pa.RecordBatchReader:
        """The query result streamed as record batches."""
        return self.scan(columns, filters, query_type, as_of, start, end, limit).to_reader()

    def __repr__(self) -> str:
        return f"HudiTable({self.uri!r}, {self.table_type}, v{self.table_version})"


__all__ = ["HudiTable"]
