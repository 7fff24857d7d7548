"""The state of a table at one timeline: config, timeline, schema, file listing, file-system view.

A :class:`TableState` is what planning reads. It is built from storage once and is immutable in
meaning: everything derived from it (schema, listing, slices) describes the table as of its
timeline, so it can be reused while the table has no newer instant. :meth:`TableState.refreshed`
checks that with one listing of the active timeline and, when the table moved, builds the next
state from this one, reading only what changed (the new instant files, ``hoodie.properties``,
and the metadata table's new log files; see ``catalog.listing.mdt_listing``).
"""

from __future__ import annotations

from functools import cached_property

import pyarrow as pa
import pyarrow.parquet as pq

from catalog.errors import CorruptTableError, UnsupportedTableError
from catalog.format.avro import avro_to_arrow_schema, with_meta_columns, without_meta_columns
from catalog.format.lance import lance_file_module
from catalog.fs_view import FileListing, FileSystemView
from catalog.listing.mdt_listing import MetadataTableListing, choose_listing
from catalog.listing.metadata_table import MetadataTable
from catalog.storage import Storage
from catalog.table.bootstrap import BootstrapIndex, bootstrap_base_path
from catalog.table.config import TableConfig
from catalog.table.files import BaseFile
from catalog.table.internal_schema import (
    LATEST_SCHEMA_KEY,
    SCHEMA_COMMIT,
    SCHEMA_DIR,
    InternalSchema,
    SchemaHistory,
    parse_internal_schemas,
)
from catalog.table.partitions import with_dropped_partition_columns, with_timestamp_partition_text
from catalog.timeline import Timeline
from catalog.timeline.active import load_config_and_timeline
from catalog.timeline.instant_files import written_file_groups

AVRO_SCHEMA_KEY = b"parquet.avro.schema"


class TableState:
    """A table as of its timeline (copy-on-write or merge-on-read).

    Args:
        storage: the table's storage.
        config: its ``hoodie.properties``.
        timeline: its timeline.
        use_metadata_table: plan from the metadata table where it is usable.
        use_record_index: ``None``: use the record index where the timeline proves keys unique;
            ``True``: always (where present); ``False``: never.
    """

    def __init__(
        self,
        storage: Storage,
        config: TableConfig,
        timeline: Timeline,
        use_metadata_table: bool = True,
        use_record_index: bool | None = None,
    ):
        if config.base_file_format == "LANCE":
            lance_file_module()  # a missing extra is refused when the table is opened, by name
        elif config.base_file_format not in ("PARQUET", "ORC"):
            raise UnsupportedTableError(f"unsupported base file format: {config.base_file_format.lower()}")
        self.storage = storage
        self.config = config
        self.timeline = timeline
        self.use_metadata_table = use_metadata_table
        self.use_record_index = use_record_index
        self._previous_listing: FileListing | None = None

    @classmethod
    def load(
        cls, storage: Storage, use_metadata_table: bool = True, use_record_index: bool | None = None
    ) -> "TableState":
        """Read the config and the timeline of the table at ``storage`` (at once, see
        :func:`~catalog.timeline.active.load_config_and_timeline`)."""
        config, timeline = load_config_and_timeline(storage)
        return cls(storage, config, timeline, use_metadata_table, use_record_index)

    def refreshed(self) -> "TableState":
        """The state of the table now: ``self`` when the active timeline shows no instant file
        added or removed (one storage request), else the next state, built from this one."""
        timeline = self.timeline.refreshed()
        if timeline is self.timeline:
            return self
        config = TableConfig.load(self.storage)
        if (config.timeline_layout_version, config.timeline_path) != (
            self.config.timeline_layout_version,
            self.config.timeline_path,
        ):  # upgraded: the timeline lives elsewhere now
            return TableState.load(self.storage, self.use_metadata_table, self.use_record_index)
        state = TableState(self.storage, config, timeline, self.use_metadata_table, self.use_record_index)
        state._previous_listing = self.__dict__.get("listing", self._previous_listing)
        return state

    @property
    def latest_instant(self) -> str | None:
        """Requested time of the latest completed write: the version of this state."""
        latest = self.timeline.latest_commit
        return latest.requested_time if latest is not None else None

    def estimated_bytes(self) -> int:
        """Approximate memory this state keeps (listing, slices, decoded instant files), for
        caches bounded in bytes; it grows as planning fills the state's memos."""
        total = 4096 + 300 * (len(self.timeline.completed) + len(self.timeline.pending))
        total += 4 * self.timeline.metadata_bytes
        listing = self.__dict__.get("listing")
        if listing is not None:
            total += listing.estimated_bytes()
        view = self.__dict__.get("fs_view")
        if view is not None:
            total += 200 * view.memo_files
        return total

    @cached_property
    def schema(self) -> pa.Schema:
        """Table schema, meta columns first (format doc 2.5 for where it comes from).

        Tables written with ``hoodie.populate.meta.fields=false`` have no meta columns in their
        schema (Java's TableSchemaResolver includes them only when populated; hudi-rs agrees).
        """
        text = self.timeline.latest_schema_json() or self.config.create_schema
        return self._table_schema(avro_to_arrow_schema(text) if text else self._schema_from_base_file())

    def _table_schema(self, data: pa.Schema) -> pa.Schema:
        """A writer's schema as the table's: meta columns first (when populated), dropped partition
        columns appended, a timestamp key generator's partition fields typed as Hudi reads them."""
        data = with_timestamp_partition_text(with_dropped_partition_columns(data, self.config), self.config)
        return with_meta_columns(data) if self.config.populate_meta_fields else without_meta_columns(data)

    @cached_property
    def schema_history(self) -> SchemaHistory | None:
        """Schema on read: the internal schema versions (``None`` unless the latest commit
        records a ``latest_schema``); see :mod:`catalog.table.internal_schema`."""
        latest = self.timeline.latest_commit
        if latest is None:
            return None
        text = (self.timeline.commit_metadata(latest).get("extraMetadata") or {}).get(LATEST_SCHEMA_KEY)
        if not text:
            return None
        current = parse_internal_schemas(text, f"{self.storage.uri} commit {latest.requested_time}")[-1]
        return SchemaHistory.of(self._schema_commits(), current)

    def _schema_commits(self) -> list[InternalSchema]:
        """The history in the newest ``.hoodie/.schema/<instant>.schemacommit`` of a committed
        instant (Java's FileBasedInternalSchemaStorageManager ignores uncommitted ones). Table
        version 8+ names the file ``<requested>_<completed>.schemacommit``, as its timeline does."""
        try:
            entries = self.storage.ls(SCHEMA_DIR)
        except FileNotFoundError:
            return []
        suffix = f".{SCHEMA_COMMIT}"
        stems = [e["name"][: -len(suffix)] for e in entries if e["type"] == "file" and e["name"].endswith(suffix)]
        committed = {}
        for stem in stems:
            requested, _, completed = stem.partition("_")
            if requested.isdigit() and (not completed or completed.isdigit()) and self.timeline.is_committed(requested):
                committed[requested] = stem
        if not committed:
            return []
        path = f"{SCHEMA_DIR}/{committed[max(committed)]}{suffix}"
        return parse_internal_schemas(self.storage.read_bytes(path), f"{self.storage.uri}/{path}")

    def schema_as_of(self, instant: str | None) -> pa.Schema:
        """The table schema a read as of ``instant`` returns: the schema of the latest write at or
        before it (time travel sees the columns as they were, as Java does: a column a later write
        added is not there yet, with or without schema on read); else :attr:`schema`."""
        latest = self.timeline.latest_commit
        if instant is None or latest is None or instant >= latest.requested_time:
            return self.schema
        text = self.timeline.latest_schema_json(instant)
        if not text:
            return self.schema
        return self._table_schema(avro_to_arrow_schema(text))

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
        raise CorruptTableError(f"{self.storage.uri}: no schema in the timeline, hoodie.properties or any base file")

    @cached_property
    def listing(self) -> FileListing:
        """Where planning finds files: the metadata table when enabled and usable, else storage."""
        self._check_partitioning()
        previous, self._previous_listing = self._previous_listing, None
        return choose_listing(self.storage, self.config, self.timeline, self.use_metadata_table, previous)

    def _check_partitioning(self) -> None:
        """A table without ``hoodie.table.partition.fields`` whose latest commit wrote into
        partitions has a damaged ``hoodie.properties``: listing only its root would read no rows."""
        latest = self.timeline.latest_commit
        if self.config.is_partitioned or latest is None:
            return
        partitions = sorted({p for p, _ in written_file_groups(self.timeline.commit_metadata(latest)) if p})
        if partitions:
            raise CorruptTableError(
                f"{self.storage.uri}/.hoodie/hoodie.properties names no hoodie.table.partition.fields, "
                f"but commit {latest.requested_time} wrote into partitions {partitions[:3]}: the properties file "
                "is incomplete"
            )

    @property
    def metadata_table(self) -> MetadataTable | None:
        """The metadata table planning uses (for index pruning); ``None`` when listing storage."""
        listing = self.listing
        return listing.mdt if isinstance(listing, MetadataTableListing) else None

    @cached_property
    def bootstrap_index(self) -> BootstrapIndex | None:
        """Where skeleton files' data columns are (``None`` unless the table was bootstrapped)."""
        if bootstrap_base_path(self.config) is None:
            return None
        return BootstrapIndex(self.storage)

    @cached_property
    def fs_view(self) -> FileSystemView:
        return FileSystemView(self.config, self.timeline, self.listing)


__all__ = ["TableState"]
