"""Schema evolution on write with ``hoodie.schema.on.read.enable`` (Hudi 0.11+), as the generator
simulates it: every column has a field id, and the history of id -> name/type schemas goes to

* ``extraMetadata["latest_schema"]`` of every commit: ``SerDeHelper.toJson(InternalSchema)``, i.e.
  ``{"max_column_id", "version_id", "type": "record", "fields": [{"id", "name", "optional",
  "type"}]}`` with ``version_id`` the commit's instant as a number;
* ``.hoodie/.schema/<instant>.schemacommit``: ``{"schemas": [...]}``, the whole history, newest
  first (``SerDeHelper.inheritSchemas``), written with ``.requested`` / ``.inflight`` files first.

The generator's evolution of the trips schema: commit 2 renames ``driver`` to ``driver_name`` and
the nested ``location.lat`` to ``location.latitude``; commit 3 adds ``tip`` (double, set on rows
written from commit 3 on) and the nested ``location.accuracy`` (likewise), and promotes
``trip_count`` from int to long; commit 4 drops ``rider`` and the nested ``location.zone``. Files
keep the names and types of the schema they were written with, so a reader must match columns,
nested fields included, by id to read old files.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

RENAME_AT, ADD_AT, DROP_AT = 2, 3, 4
RENAMED, NEW_NAME = "driver", "driver_name"
ADDED, PROMOTED, DROPPED = "tip", "trip_count", "rider"
#: the nested struct evolved alongside: its renamed, added and dropped fields
NESTED, NESTED_RENAMED, NESTED_NEW_NAME = "location", "lat", "latitude"
NESTED_ADDED, NESTED_DROPPED = "accuracy", "zone"

_INTERNAL_TYPES = {
    pa.string(): "string", pa.int64(): "long", pa.int32(): "int", pa.float64(): "double",
    pa.float32(): "float", pa.bool_(): "boolean", pa.date32(): "date",
}


def _internal_type(dtype: pa.DataType, next_id: list[int], ids: dict[str, int] | None = None,
                   path: str = "") -> object:
    """The internal-schema type of ``dtype``; struct fields get the next ids (recorded in ``ids``
    under their dotted path) unless ``ids`` already holds one for them."""
    if pa.types.is_decimal(dtype):
        return f"decimal({dtype.precision},{dtype.scale})"
    if pa.types.is_timestamp(dtype):
        return "timestamp"
    if pa.types.is_struct(dtype):
        fields = []
        for child in dtype:
            key = f"{path}.{child.name}"
            if ids is not None and key in ids:
                fid = ids[key]
            else:
                fid = next_id[0]
                next_id[0] += 1
                if ids is not None:
                    ids[key] = fid
            fields.append({"id": fid, "name": child.name, "optional": True,
                           "type": _internal_type(child.type, next_id, ids, key)})
        return {"type": "record", "fields": fields}
    return _INTERNAL_TYPES[dtype]


def _evolve_nested(data: pa.Table, k: int, version: np.ndarray) -> pa.Table:
    """``location`` in the schema of commit ``k``: ``lat`` renamed, ``accuracy`` added (set on rows
    written from commit 3 on), ``zone`` dropped."""
    if k < RENAME_AT or NESTED not in data.column_names:
        return data
    idx = data.column_names.index(NESTED)
    loc = data.column(NESTED).combine_chunks()
    names = [loc.type.field(i).name for i in range(loc.type.num_fields)]
    children = [loc.field(i) for i in range(len(names))]
    names = [NESTED_NEW_NAME if n == NESTED_RENAMED else n for n in names]
    if k >= ADD_AT:
        lat = children[names.index(NESTED_NEW_NAME)]
        accuracy = pc.round(pc.abs(pc.multiply(lat, 0.01)), 3)
        children.append(pc.if_else(pa.array(version >= ADD_AT), accuracy, pa.nulls(len(data), pa.float64())))
        names.append(NESTED_ADDED)
    if k >= DROP_AT:
        drop = names.index(NESTED_DROPPED)
        del names[drop], children[drop]
    evolved = pa.StructArray.from_arrays(children, names=names, mask=loc.is_null())
    return data.set_column(idx, pa.field(NESTED, evolved.type), evolved)


def evolve(data: pa.Table, k: int, version: np.ndarray) -> pa.Table:
    """The data columns of rows written by commit ``k`` (``version``: the commit each row's values
    come from) in the schema of commit ``k``."""
    data = _evolve_nested(data, k, version)
    if k >= RENAME_AT:
        data = data.rename_columns([NEW_NAME if n == RENAMED else n for n in data.column_names])
    if k >= ADD_AT:
        idx = data.column_names.index(PROMOTED)
        data = data.set_column(idx, pa.field(PROMOTED, pa.int64()), data.column(PROMOTED).cast(pa.int64()))
        tip = pc.round(pc.multiply(data.column("fare"), 0.1), 2)
        tip = pc.if_else(pa.array(version >= ADD_AT), tip, pa.nulls(len(data), pa.float64()))
        data = data.append_column(pa.field(ADDED, pa.float64()), tip)
    if k >= DROP_AT:
        data = data.drop_columns([DROPPED])
    return data


def evolved_schema(base: pa.Schema, k: int) -> pa.Schema:
    """The data schema (no meta columns) of commit ``k``."""
    return evolve(base.empty_table(), k, np.zeros(0, dtype=np.int64)).schema


class SchemaHistory:
    """Field ids of the trips schema (data columns only, in schema order; the added column gets
    the next id) and the history JSON of every commit."""

    def __init__(self, base: pa.Schema, instants: list[str]):
        self.base = base
        self.instants = instants
        self.ids: dict[str, int] = {}
        #: ids of nested fields by dotted path of their original names ("location.lat")
        self.nested_ids: dict[str, int] = {}
        next_id = [len(base)]  # top-level ids first, nested ids after them (as Hudi's converter)
        for i, f in enumerate(base):
            self.ids[f.name] = i
            _internal_type(f.type, next_id, self.nested_ids, f.name)
        self.ids[ADDED] = next_id[0]
        self.nested_ids[f"{NESTED}.{NESTED_ADDED}"] = next_id[0] + 1
        self.max_id = next_id[0] + 1

    def internal_schema(self, k: int) -> dict:
        fields = []
        # nested fields keep their ids under a rename: key them by their original name
        renamed = k >= RENAME_AT
        ids = {(f"{NESTED}.{NESTED_NEW_NAME}" if renamed and key == f"{NESTED}.{NESTED_RENAMED}" else key): fid
               for key, fid in self.nested_ids.items()}
        for f in evolved_schema(self.base, k):
            original = RENAMED if f.name == NEW_NAME else f.name
            fid = self.ids[original]
            ftype = _internal_type(f.type, [self.max_id + 1], ids, f.name)
            if f.name == PROMOTED:
                ftype = "long" if k >= ADD_AT else "int"
            fields.append({"id": fid, "name": f.name, "optional": True, "type": ftype})
        max_id = self.max_id if k >= ADD_AT else self.max_id - 2
        return {"max_column_id": max_id, "version_id": int(self.instants[k - 1]), "type": "record",
                "fields": fields}

    def latest_schema_json(self, k: int) -> str:
        return json.dumps(self.internal_schema(k))

    def history_json(self, k: int) -> str:
        """``.schemacommit`` content after commit ``k``: every schema so far, newest first."""
        return json.dumps({"schemas": [self.internal_schema(j) for j in range(k, 0, -1)]})


__all__ = ["SchemaHistory", "evolve", "evolved_schema"]
