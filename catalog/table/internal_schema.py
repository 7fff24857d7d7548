"""Schema on read (``hoodie.schema.on.read.enable``, format doc 2.5 and 9.3): columns by field id.

Writers with schema on read keep an *internal schema* per commit: ``extraMetadata["latest_schema"]``
holds ``SerDeHelper.toJson`` of the commit's schema (``{"max_column_id", "version_id", "type":
"record", "fields": [{"id", "name", "optional", "type"}]}``, ``version_id`` = the commit instant as
a number) and ``.hoodie/.schema/<instant>.schemacommit`` the whole history (``{"schemas": [...]}``).
A file is read with the schema of the commit that wrote it (the newest schema whose version is not
after the file's instant, as Java's ``InternalSchemaUtils.searchSchema``) and its columns are
matched to the query schema *by id*: renamed columns come out under their new name, dropped ones
vanish (even if a new column reuses the name), added ones are null. Types are then cast by the
usual by-name rules. Only top-level columns are mapped by id; nested fields still match by name.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow as pa

from catalog.errors import CorruptTableError

LATEST_SCHEMA_KEY = "latest_schema"
SCHEMA_DIR = ".hoodie/.schema"
SCHEMA_COMMIT = "schemacommit"

#: file column name -> query column name, or ``None`` for a column the query schema no longer has
ColumnMap = Mapping[str, "str | None"]


@dataclass(frozen=True)
class InternalSchema:
    """One version of the internal schema: its version (an instant) and top-level (id, name)."""

    version_id: str
    fields: tuple[tuple[int, str], ...]

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], where: str = "") -> "InternalSchema":
        try:
            version = str(doc.get("version_id", 0))
            fields = tuple((int(f["id"]), str(f["name"])) for f in doc.get("fields") or [])
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise CorruptTableError(f"cannot decode internal schema {where}: {err}") from err
        return cls(version, fields)


def parse_internal_schemas(text: str | bytes, where: str = "") -> list[InternalSchema]:
    """The schemas of a ``latest_schema`` value or a ``.schemacommit`` file (history)."""
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise CorruptTableError(f"cannot decode internal schema {where}: {err}") from err
    if not isinstance(doc, dict):
        raise CorruptTableError(f"internal schema {where} is not a JSON object")
    if "schemas" in doc:
        return [InternalSchema.from_json(s, where) for s in doc.get("schemas") or []]
    return [InternalSchema.from_json(doc, where)]


@dataclass(frozen=True)
class SchemaHistory:
    """The versions of a table's internal schema (oldest first) and the query's version."""

    versions: tuple[InternalSchema, ...]
    current: InternalSchema

    @classmethod
    def of(cls, schemas: list[InternalSchema], current: InternalSchema) -> "SchemaHistory":
        by_version = {s.version_id: s for s in schemas}
        by_version.setdefault(current.version_id, current)
        ordered = tuple(sorted(by_version.values(), key=lambda s: (len(s.version_id), s.version_id)))
        return cls(ordered, current)

    def at(self, instant: str) -> InternalSchema:
        """The schema a file written at ``instant`` has (the oldest one for older files)."""
        keys = [(len(s.version_id), s.version_id) for s in self.versions]
        pos = bisect.bisect_right(keys, (len(instant), instant))
        return self.versions[pos - 1] if pos else self.versions[0]

    def as_of(self, instant: str | None) -> "SchemaHistory":
        """The history with the query schema of a read as of ``instant`` (time travel)."""
        if instant is None:
            return self
        return SchemaHistory(self.versions, self.at(instant))

    def column_map(self, instant: str | None) -> ColumnMap | None:
        """How to rename/drop the columns of a file written at ``instant``; ``None``: nothing to do."""
        if instant is None:
            return None
        file_schema = self.at(instant)
        if file_schema == self.current:
            return None
        current = dict(self.current.fields)
        out: dict[str, str | None] = {}
        for fid, name in file_schema.fields:
            target = current.get(fid)
            if target != name:
                out[name] = target
        return out or None


def rename_columns(data: pa.Table, mapping: ColumnMap | None) -> pa.Table:
    """``data`` (a file's or log block's records) with its columns renamed to the query schema's
    names and dropped columns removed."""
    if not mapping:
        return data
    keep = [n for n in data.column_names if mapping.get(n, n) is not None]
    data = data.select(keep)
    return data.rename_columns([mapping.get(n) or n for n in keep])


def file_columns(names: list[str], mapping: ColumnMap | None) -> dict[str, str]:
    """For query columns ``names``: query name -> file column name, for the columns a file written
    with ``mapping`` can provide."""
    if not mapping:
        return {n: n for n in names}
    inverse = {target: source for source, target in mapping.items() if target is not None}
    out: dict[str, str] = {}
    for name in names:
        if name in inverse:
            out[name] = inverse[name]
        elif name not in mapping:
            out[name] = name
    return out


__all__ = [
    "LATEST_SCHEMA_KEY",
    "SCHEMA_COMMIT",
    "SCHEMA_DIR",
    "ColumnMap",
    "InternalSchema",
    "SchemaHistory",
    "file_columns",
    "parse_internal_schemas",
    "rename_columns",
]
