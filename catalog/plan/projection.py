"""Projection: the columns a read returns, named as top-level columns or as dotted paths into structs.

An entry of ``columns`` names a top-level column, or with dots a field nested in structs
(``"s.a"``, ``"s.b.c"``); a top-level column (or a struct field) whose whole name matches is
taken first, so a column may itself be called ``"a.b"``. The result holds each top-level column
once, in the order the entries first name it; a struct named only by paths keeps just the fields
they name, in the table's order, and a path naming a whole struct keeps it whole. Only the fields
of structs can be named: a path into a list or a map names nothing.

Readers decode only the leaves a projected struct keeps where the format allows it (Parquet
column chunks: ``catalog.format.parquet.leaf_paths``); every reader casts what it decoded to the
projected type.
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from catalog.errors import ColumnNotFoundError

#: what a top-level column keeps: ``None`` the whole column, else its struct fields by name
Selection = dict[str, "Selection | None"] | None


def output_schema(schema: pa.Schema, columns: Sequence[str] | None) -> pa.Schema:
    """``schema`` projected on ``columns`` (all of it for ``None``; see the module docstring).

    Raises:
        ColumnNotFoundError: an entry names no column or nested field (the message names it).
    """
    if columns is None:
        return schema
    chosen: dict[str, Selection] = {}
    missing = []
    for entry in columns:
        path = resolve_path(schema, entry)
        if path is None:
            missing.append(entry)
            continue
        top, rest = path[0], path[1:]
        if top in chosen:
            chosen[top] = _merged(chosen[top], rest)
        else:
            chosen[top] = _merged({}, rest) if rest else None
    if missing:
        raise ColumnNotFoundError(f"column(s) not in the table schema: {', '.join(map(repr, missing))}")
    return pa.schema([_pruned(schema.field(name), kept) for name, kept in chosen.items()], metadata=schema.metadata)


def resolve_path(schema: pa.Schema, entry: str) -> list[str] | None:
    """The field names along ``entry``, a top-level column or a dotted path into structs
    (``None``: it names nothing)."""
    if schema.get_field_index(entry) >= 0:
        return [entry]
    return _walk([schema.field(i) for i in range(len(schema))], entry.split("."))


def _walk(fields: list[pa.Field], parts: list[str]) -> list[str] | None:
    """The names along ``parts`` among ``fields``: the longest name made of leading parts first."""
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        field = next((f for f in fields if f.name == name), None)
        if field is None:
            continue
        if cut == len(parts):
            return [name]
        if pa.types.is_struct(field.type):
            rest = _walk(list(field.type), parts[cut:])
            if rest is not None:
                return [name, *rest]
    return None


def _merged(kept: Selection, path: list[str]) -> Selection:
    """``kept`` with ``path`` added (a whole field absorbs the paths under it)."""
    if kept is None or not path:
        return None
    head, rest = path[0], path[1:]
    if head in kept:
        kept[head] = _merged(kept[head], rest)
    else:
        kept[head] = _merged({}, rest) if rest else None
    return kept


def _pruned(field: pa.Field, kept: Selection) -> pa.Field:
    if kept is None:
        return field
    children = [_pruned(child, kept[child.name]) for child in field.type if child.name in kept]
    return field.with_type(pa.struct(children))


def prunes_nested(projected: pa.Schema, schema: pa.Schema) -> bool:
    """Whether ``projected`` (an :func:`output_schema` of ``schema``) keeps a struct only in part."""
    return any(not field.type.equals(schema.field(field.name).type) for field in projected)


__all__ = ["output_schema", "prunes_nested", "resolve_path"]
