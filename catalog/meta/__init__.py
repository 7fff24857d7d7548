"""Metadata tables: a Hudi table's history, layout, settings and health as small Arrow tables.

Served as ``"<table>$<name>"`` in SQL (Trino's Hudi connector names ``$timeline`` so) and by
:meth:`catalog.HudiTable.metadata_table`. Each is built from the table's :class:`TableState`:
its timeline and commit metadata, its file-system view, ``hoodie.properties`` and its metadata
table. Time travel applies to the tables that describe data as of an instant (``commits``,
``file_groups``, ``partitions``); the others refuse it by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pyarrow as pa

from catalog.errors import InvalidQueryError, shown
from catalog.format.parquet import cast_array
from catalog.meta.config import INDEXES_SCHEMA, PROPERTIES_SCHEMA, indexes_table, properties_table
from catalog.meta.health import HEALTH_SCHEMA, health_table
from catalog.meta.layout import FILE_GROUPS_SCHEMA, PARTITIONS_SCHEMA, file_groups_table, partitions_table
from catalog.meta.timeline import (
    COMMITS_SCHEMA,
    TIMELINE_SCHEMA,
    archived_timeline_table,
    commits_table,
    timeline_table,
)
from catalog.plan.filters import bind_filters, to_expression
from catalog.plan.options import ReadOptions, resolve
from catalog.plan.projection import output_schema
from catalog.state import TableState

#: what separates a table's name from its metadata table's in SQL: ``"trips$timeline"``
SEPARATOR = "$"


@dataclass(frozen=True)
class MetaTable:
    """One metadata table: its schema, and how it is built (``as_of``: a resolved instant, or
    ``None`` for now; only passed when :attr:`time_travel`)."""

    schema: pa.Schema
    build: Callable[[TableState, str | None], pa.Table]
    time_travel: bool


META_TABLES: dict[str, MetaTable] = {
    "timeline": MetaTable(TIMELINE_SCHEMA, lambda s, _: timeline_table(s.timeline), False),
    "archived_timeline": MetaTable(TIMELINE_SCHEMA, lambda s, _: archived_timeline_table(s.timeline), False),
    "commits": MetaTable(COMMITS_SCHEMA, lambda s, at: commits_table(s.timeline, at), True),
    "file_groups": MetaTable(FILE_GROUPS_SCHEMA, lambda s, at: file_groups_table(s.fs_view, at), True),
    "partitions": MetaTable(PARTITIONS_SCHEMA, lambda s, at: partitions_table(s.fs_view, at), True),
    "properties": MetaTable(PROPERTIES_SCHEMA, lambda s, _: properties_table(s.config), False),
    "indexes": MetaTable(INDEXES_SCHEMA, lambda s, _: indexes_table(s), False),
    "health": MetaTable(HEALTH_SCHEMA, lambda s, _: health_table(s), False),
}


def meta_table_named(name: str, as_of: str | None = None) -> MetaTable:
    """The metadata table called ``name``, to be read as of ``as_of``.

    Raises:
        InvalidQueryError: no metadata table has that name (the message lists them), or ``as_of``
            for one where time travel means nothing.
    """
    found = META_TABLES.get(name.lower())
    if found is None:
        raise InvalidQueryError(f"no metadata table '{shown(name, 40)}'; there are {', '.join(sorted(META_TABLES))}")
    if as_of is not None and not found.time_travel:
        raise InvalidQueryError(
            f"time travel does not apply to the {name.lower()} metadata table; it applies to "
            f"{', '.join(n for n, t in META_TABLES.items() if t.time_travel)}"
        )
    return found


def meta_table(state: TableState, name: str, as_of: str | None = None) -> pa.Table:
    """The metadata table ``name`` of the table ``state`` describes.

    Args:
        state: the table.
        name: one of :data:`META_TABLES`.
        as_of: time travel (any instant form of docs/filters.md), for ``commits``,
            ``file_groups`` and ``partitions``.

    Raises:
        InvalidQueryError: an unknown name, or ``as_of`` for a table where it means nothing.
        InvalidInstantError: ``as_of`` malformed, or before the table's first commit.
    """
    table = meta_table_named(name, as_of)
    instant = resolve(ReadOptions(as_of=as_of), state.timeline).instant if as_of is not None else None
    return table.build(state, instant)


#: the read options a metadata table takes besides time travel: its rows are built whole, then
#: narrowed by them (:func:`narrowed`)
NARROWING_OPTIONS = ("columns", "filters", "limit")


def check_narrowing(name: str, options: ReadOptions) -> None:
    """Refuse every option of ``options`` but :data:`NARROWING_OPTIONS`, by name.

    Raises:
        InvalidQueryError: ``options`` sets another option (``as_of``, ``query_type``, ...).
    """
    defaults = ReadOptions()
    for option in ReadOptions.field_names():
        if option not in NARROWING_OPTIONS and getattr(options, option) != getattr(defaults, option):
            raise InvalidQueryError(
                f"option {option!r} does not apply to the metadata table {name!r}; "
                f"it takes {', '.join(NARROWING_OPTIONS)}"
            )


def narrowed_schema(name: str, options: ReadOptions) -> pa.Schema:
    """The schema of the metadata table ``name`` read with ``options`` (its ``columns``), its
    filters checked against it.

    Raises:
        InvalidQueryError: an unknown metadata table, column or filter.
    """
    schema = meta_table_named(name).schema
    bind_filters(list(options.filters), schema)
    return output_schema(schema, options.columns)


def narrowed(rows: pa.Table, options: ReadOptions) -> pa.Table:
    """``rows`` of a metadata table with ``options``' filters (applied exactly), ``columns`` and ``limit``."""
    expr = to_expression(bind_filters(list(options.filters), rows.schema))
    if expr is not None:
        rows = rows.filter(expr)
    if options.columns is not None:
        schema = output_schema(rows.schema, options.columns)
        rows = rows.select(schema.names)  # (keeps the rows with no column left)
        if not rows.schema.equals(schema):  # a struct kept in part
            rows = pa.Table.from_arrays([cast_array(rows.column(f.name), f.type) for f in schema], schema=schema)
    return rows if options.limit is None else rows.slice(0, options.limit)


__all__ = [
    "META_TABLES",
    "NARROWING_OPTIONS",
    "SEPARATOR",
    "MetaTable",
    "check_narrowing",
    "meta_table",
    "meta_table_named",
    "narrowed",
    "narrowed_schema",
]
