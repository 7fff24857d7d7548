"""Metadata tables of a table's settings: ``properties`` and ``indexes`` (the metadata table's
partitions, their state and the data-table instant they are current to)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from catalog.errors import HudiError
from catalog.listing.metadata_table import METADATA_DIR
from catalog.meta.redact import redacted
from catalog.state import TableState
from catalog.table.config import TableConfig
from catalog.timeline import Timeline

PROPERTIES_SCHEMA = pa.schema([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.string())])

INDEXES_SCHEMA = pa.schema(
    [
        pa.field("index", pa.string(), nullable=False),
        pa.field("state", pa.string(), nullable=False),
        pa.field("current_to", pa.string()),
        pa.field("data_latest", pa.string()),
        pa.field("instants_behind", pa.int64()),
    ]
)

#: data-table actions whose completion the metadata table records (a compaction completes as a
#: ``commit``, a clustering as a ``replacecommit``)
SYNCED_ACTIONS = frozenset({"commit", "deltacommit", "replacecommit", "clean", "rollback", "restore"})


def properties_table(config: TableConfig) -> pa.Table:
    """``hoodie.properties`` as key/value rows, sorted by key; secrets redacted (``meta.redact``)."""
    shown = redacted(config.properties)
    rows = [{"key": k, "value": shown[k]} for k in sorted(shown)]
    return pa.Table.from_pylist(rows, schema=PROPERTIES_SCHEMA)


@dataclass(frozen=True)
class MetadataLag:
    """How far the metadata table is behind its data table.

    Attributes:
        current_to: the metadata table's latest completed deltacommit (a data-table instant).
        data_latest: the data table's latest completed instant the metadata table records.
        behind: completed data-table instants newer than ``current_to`` (``SYNCED_ACTIONS``).
    """

    current_to: str | None
    data_latest: str | None
    behind: int


def metadata_timeline(state: TableState) -> Timeline | None:
    """The metadata table's timeline (``None``: the table has none, or it cannot be read)."""
    mdt = state.metadata_table
    if mdt is not None:
        return mdt.timeline
    if not state.config.metadata_partitions:
        return None
    storage = state.storage.child(METADATA_DIR)
    try:
        config = TableConfig.load(storage)
        return Timeline.load(storage, config)
    except (HudiError, OSError):
        return None


def metadata_lag(data: Timeline, mdt: Timeline) -> MetadataLag:
    """The lag of the metadata table whose timeline is ``mdt`` behind ``data``."""
    done = [i.requested_time for i in mdt.completed if i.action == "deltacommit"]
    current = max(done) if done else None
    synced = [i.requested_time for i in data.completed if i.action in SYNCED_ACTIONS]
    behind = sum(1 for t in synced if current is None or t > current)
    return MetadataLag(current, max(synced) if synced else None, behind)


def indexes_table(state: TableState) -> pa.Table:
    """One row per metadata-table partition ``hoodie.properties`` declares (``files``,
    ``column_stats``, ``record_index``, secondary indexes...): ``COMPLETED`` or ``INFLIGHT``
    (being built), and the instant the metadata table is current to."""
    config = state.config
    names = list(dict.fromkeys(config.metadata_partitions + config.metadata_partitions_inflight))
    mdt = metadata_timeline(state) if names else None
    lag = metadata_lag(state.timeline, mdt) if mdt is not None else None
    rows = [
        {
            "index": name,
            "state": "INFLIGHT" if name in config.metadata_partitions_inflight else "COMPLETED",
            "current_to": lag.current_to if lag else None,
            "data_latest": lag.data_latest if lag else None,
            "instants_behind": lag.behind if lag else None,
        }
        for name in names
    ]
    return pa.Table.from_pylist(rows, schema=INDEXES_SCHEMA)


__all__ = [
    "INDEXES_SCHEMA",
    "PROPERTIES_SCHEMA",
    "SYNCED_ACTIONS",
    "MetadataLag",
    "indexes_table",
    "metadata_lag",
    "metadata_timeline",
    "properties_table",
]
