"""Planning through the metadata table: a ``FileListing`` over the MDT ``files`` partition.

:class:`MetadataTableListing` answers ``list_partitions`` / ``list_files`` from the MDT ``files``
partition (format doc 6.6) with a handful of requests, whatever the partition count, and keeps
the opened :class:`~catalog.listing.metadata_table.MetadataTable` for the index pruners of
``catalog.plan.prune`` (column stats, partition stats, record index).

:func:`choose_listing` picks this listing, or falls back to storage listing with a
:class:`MetadataTableFallbackWarning` whenever the metadata table cannot be trusted: the MDT is
an index, and a wrong file set must never be planned.
"""

from __future__ import annotations

import warnings
from typing import Sequence

from catalog.errors import HudiError, MetadataTableFallbackWarning
from catalog.fs_view import FileListing
from catalog.listing.metadata_table import (
    ALL_PARTITIONS_KEY,
    FILES,
    NON_PARTITIONED_KEY,
    MetadataTable,
    MetadataTableError,
    live_files,
)
from catalog.listing.storage import StorageListing
from catalog.storage import Storage
from catalog.table.config import TableConfig
from catalog.timeline import Timeline


def _mdt_key(partition: str) -> str:
    return partition or NON_PARTITIONED_KEY


class MetadataTableListing:
    """A FileListing backed by the MDT ``files`` partition, read once and cached."""

    def __init__(self, mdt: MetadataTable):
        self.mdt = mdt
        self._files = mdt.read(FILES)
        mdt.check_complete(FILES)
        if ALL_PARTITIONS_KEY not in self._files:
            raise MetadataTableError(f"{mdt.storage.uri}: files partition has no {ALL_PARTITIONS_KEY} record")
        self._partitions: list[str] | None = None

    def list_partitions(self) -> list[str]:
        if self._partitions is None:
            names = live_files(self._files[ALL_PARTITIONS_KEY])
            if not self.mdt.data_config.is_partitioned:
                self._partitions = [""]
            else:
                self._partitions = sorted("" if p == NON_PARTITIONED_KEY else p for p in names)
        return list(self._partitions)

    def list_files(self, partitions: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        return {p: sorted(live_files(self._files.get(_mdt_key(p))).items()) for p in partitions}

    def estimated_bytes(self) -> int:
        return self.mdt.estimated_bytes() + 100 * len(self._partitions or ())


def choose_listing(
    storage: Storage,
    config: TableConfig,
    timeline: Timeline,
    use_metadata_table: bool,
    previous: FileListing | None = None,
) -> FileListing:
    """The MDT listing when enabled and usable (any supported table version that declares the
    ``files`` partition), else storage listing, with a warning when the MDT is declared usable
    but cannot be trusted.

    ``previous``: the listing of the same table as of an older timeline; an MDT listing is then
    brought up to date from it (see :class:`MetadataTable`), storage listing starts afresh.
    """
    if not use_metadata_table or FILES not in config.usable_metadata_partitions:
        return StorageListing(storage, config)
    try:
        old = previous.mdt if isinstance(previous, MetadataTableListing) else None
        mdt = MetadataTable(storage, config, timeline, previous=old)
        mdt.check_in_sync()
        return MetadataTableListing(mdt)
    except (HudiError, OSError) as err:
        warnings.warn(MetadataTableFallbackWarning(f"planning with storage listing: {err}"), stacklevel=2)
        return StorageListing(storage, config)


__all__ = ["MetadataTableListing", "choose_listing"]
