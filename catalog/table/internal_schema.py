"""Schema on read (``hoodie.schema.on.read.enable``, format doc 2.5 and 9.3): columns by field id.

Writers with schema on read keep an *internal schema* per commit: ``extraMetadata["latest_schema"]``
holds ``SerDeHelper.toJson`` of the commit's schema (``{"max_column_id", "version_id", "type":
"record", "fields": [{"id", "name", "optional", "type"}]}``, ``version_id`` = the commit instant as
a number) and ``.hoodie/.schema/<instant>.schemacommit`` the whole history (``{"schemas": [...]}``).
A file is read with the schema of the commit that wrote it (the newest schema whose version is not
after the file's instant, as Java's ``InternalSchemaUtils.searchSchema``) and its columns are
matched to the query schema *by id*: renamed columns come out under their new name, dropped ones
vanish (even if a new column reuses the name), added ones are null. Fields of nested records
(``"type": {"type": "record", "fields": [...]}``) are matched by id the same way, at any depth.
Types are then cast by the usual by-name rules. Records inside arrays and maps still match by
name.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple, Union

import pyarrow as pa

from catalog.errors import CorruptTableError

LATEST_SCHEMA_KEY = "latest_schema"
SCHEMA_DIR = ".hoodie/.schema"
SCHEMA_COMMIT = "schemacommit"

#: file field name -> (query field name, or ``None`` for a field the query schema no longer has;
#: for a record field whose own fields differ, the same map for them, else ``None``)
ColumnMap = Mapping[str, Tuple[Optional[str], Optional["ColumnMap"]]]


@dataclass(frozen=True)
class InternalField:
    """One field of an internal schema: its id, name and, for a record, its fields."""

    id: int
    name: str
    fields: tuple["InternalField", ...] | None = None


def _fields(docs: Any) -> tuple[InternalField, ...]:
    out = []
    for f in docs or []:
        ftype = f.get("type")
        nested = _fields(ftype.get("fields")) if isinstance(ftype, dict) and ftype.get("type") == "record" else None
        out.append(InternalField(int(f["id"]), str(f["name"]), nested))
    return tuple(out)


@dataclass(frozen=True)
class InternalSchema:
    """One version of the internal schema: its version (an instant) and fields (top level; records
    carry their own)."""

    version_id: str
    fields: tuple[InternalField, ...]

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], where: str = "") -> "InternalSchema":
        try:
            version = str(doc.get("version_id", 0))
            fields = _fields(doc.get("fields"))
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
        return _field_map(file_schema.fields, self.current.fields)


def _field_map(file_fields: tuple[InternalField, ...], query_fields: tuple[InternalField, ...]) -> ColumnMap | None:
    """How the fields of a file (or record) map onto the query's, by id; ``None``: identical."""
    query = {f.id: f for f in query_fields}
    out: dict[str, tuple[str | None, ColumnMap | None]] = {}
    changed = False
    for f in file_fields:
        q = query.get(f.id)
        nested = _field_map(f.fields, q.fields) if q is not None and f.fields is not None and q.fields is not None \
            else None
        target = q.name if q is not None else None
        out[f.name] = (target, nested)
        changed = changed or target != f.name or nested is not None
    return out if changed else None


Columnar = Union[pa.Table, pa.RecordBatch]


def rename_columns(data: pa.Table, mapping: ColumnMap | None) -> pa.Table:
    """``data`` (a file's or log block's records) with its columns, nested fields included,
    renamed to the query schema's names and dropped ones removed."""
    if not mapping:
        return data
    keep = [n for n in data.column_names if mapping.get(n, (n, None))[0] is not None]
    data = data.select(keep)
    data = data.rename_columns([mapping[n][0] if n in mapping else n for n in keep])
    return rename_nested(data, mapping)


def rename_nested(data: Columnar, mapping: ColumnMap | None) -> Columnar:
    """``data`` whose top-level columns already carry the query names: rename, drop and reorder
    nothing at the top, but map the fields of nested records by id (``mapping`` as for the file)."""
    if not mapping:
        return data
    for target, nested in mapping.values():
        if target is None or nested is None or target not in data.column_names:
            continue
        idx = data.column_names.index(target)
        column = _restructure(data.column(idx), nested)
        data = data.set_column(idx, pa.field(target, column.type), column)
    return data


def _restructure(arr: Any, mapping: ColumnMap) -> Any:
    """A struct array with its fields renamed / dropped per ``mapping`` (recursively)."""
    if isinstance(arr, pa.ChunkedArray):
        chunks = [_restructure(c, mapping) for c in arr.chunks]
        return pa.chunked_array(chunks) if chunks else pa.chunked_array([], _restructured_type(arr.type, mapping))
    if not pa.types.is_struct(arr.type):
        return arr
    names, children = [], []
    for i in range(arr.type.num_fields):
        name = arr.type.field(i).name
        target, nested = mapping.get(name, (name, None))
        if target is None:
            continue
        child = arr.field(i)
        names.append(target)
        children.append(_restructure(child, nested) if nested else child)
    if not children:  # every field dropped
        return pa.array([{} if valid else None for valid in arr.is_valid().to_pylist()], pa.struct([]))
    return pa.StructArray.from_arrays(children, names=names, mask=arr.is_null())


def _restructured_type(dtype: pa.DataType, mapping: ColumnMap) -> pa.DataType:
    if not pa.types.is_struct(dtype):
        return dtype
    fields = []
    for i in range(dtype.num_fields):
        f = dtype.field(i)
        target, nested = mapping.get(f.name, (f.name, None))
        if target is not None:
            fields.append(pa.field(target, _restructured_type(f.type, nested) if nested else f.type))
    return pa.struct(fields)


def file_columns(names: list[str], mapping: ColumnMap | None) -> dict[str, str]:
    """For query columns ``names``: query name -> file column name, for the columns a file written
    with ``mapping`` can provide."""
    if not mapping:
        return {n: n for n in names}
    inverse = {target: source for source, (target, _) in mapping.items() if target is not None}
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
    "InternalField",
    "InternalSchema",
    "SchemaHistory",
    "file_columns",
    "parse_internal_schemas",
    "rename_columns",
    "rename_nested",
]
