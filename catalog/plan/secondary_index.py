"""Secondary indexes of the metadata table (format doc 6.10): the record keys holding a value.

An index ``secondary_index_<name>`` on one column stores one MDT key per row,
``<escaped value>$<escaped record key>``, so the rows of a value are the keys starting with
``<escaped value>$``: a prefix seek in the MDT HFiles (base and log blocks, merged like every
MDT read, deletes applied). Escaping puts ``\\`` before ``\\``, ``$`` and NUL; a null value is the
single character NUL.

Index version 2 (``"version": "V2"`` in ``index.json``) shards a key by its ``<escaped value>$``
part, so one shard holds all rows of a value. Version 1 (Hudi 1.0) shards by the whole key: every
shard is searched. Hudi 1.0 escapes neither NUL nor null values, so under version 1 (and when the
version is not stated) null values and values holding NUL are not looked up. An index of any
other version is not used.

Values are looked up only where this reader renders them exactly as Hudi's writer does (checked
against indexes Hudi 1.0.2 and 1.1.1 wrote through Spark): strings as themselves; under version 2
also signed integers in decimal, dates as their epoch-day number and timestamps with a time zone
as UTC epoch microseconds (Spark's internal values). Floating-point values (Java's
``Double.toString``), timestamps without a zone or in other units, and every non-string type of a
version 1 index are not looked up (no pruning, never a wrong answer); Hudi refuses secondary
indexes on booleans and decimals. On merge-on-read tables only strings are looked up: Hudi 1.1.1
leaves its integer, date and timestamp indexes unchanged by updates and deletes written to log
files (its string indexes follow them), so those indexes may point to values the rows no longer hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import pyarrow as pa

from catalog.errors import CorruptTableError
from catalog.listing.metadata_table import KeySelection, MetadataTable, shard_of
from catalog.plan.filters import BoundFilter

SECONDARY_INDEX_TYPE = "secondary_index"
_ESCAPE, _SEPARATOR, _NULL = "\\", "$", "\x00"
#: ``index.json`` version -> index version; Hudi 1.0 states none (a version not known: not used)
_VERSIONS: dict[str | None, int] = {None: 1, "V1": 1, "V2": 2}


@dataclass(frozen=True)
class SecondaryIndex:
    """A complete secondary index of the table.

    Attributes:
        partition: its MDT partition (``secondary_index_<name>``).
        column: the indexed (top-level) column.
        version: the index version, 1 or 2 (1 when ``index.json`` does not say).
    """

    partition: str
    column: str
    version: int

    def prefixes(self, f: BoundFilter) -> set[str] | None:
        """The key prefixes of the values ``f`` admits (rows of other values cannot match it);
        ``None`` when ``f`` is not an ``=`` / ``in`` / ``is null`` test this index can answer."""
        if f.column != self.column:
            return None
        if f.op == "=":
            values = pa.array([f.value.as_py()], f.type)
        elif f.op == "in":
            values = f.value
        elif f.op == "is null":
            values = pa.nulls(1, f.type)
        else:
            return None
        try:
            return {escaped(text) + _SEPARATOR for text in self.rendered(values)}
        except ValueError:
            return None

    def rendered(self, values: pa.Array) -> list[str | None]:
        """``values`` as Hudi writes them into this index's keys (``None``: a null value).

        Raises:
            ValueError: this reader does not know how Hudi renders them.
        """
        dtype = values.type
        if values.null_count and self.version != 2:
            raise ValueError("Hudi 1.0 writes no secondary-index key for a null value")
        if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
            texts: list[str | None] = values.to_pylist()
            if self.version != 2 and any(_NULL in t for t in texts if t is not None):
                raise ValueError("Hudi 1.0 leaves NUL unescaped in secondary-index keys")
            return texts
        if self.version != 2:
            raise ValueError(f"{dtype} values are not looked up in a version 1 index")
        # Spark's internal value, as Hudi 1.1 writes it: epoch days, UTC epoch microseconds
        if pa.types.is_date32(dtype):
            values = values.cast(pa.int32())
        elif pa.types.is_timestamp(dtype) and dtype.unit == "us" and dtype.tz is not None:
            values = values.cast(pa.int64())
        elif not pa.types.is_signed_integer(dtype):
            raise ValueError(f"{dtype} values are not looked up in a secondary index")
        return [None if v is None else str(v) for v in values.to_pylist()]


def escaped(value: str | None) -> str:
    """The key form of a secondary value (or of a record key)."""
    if value is None:
        return _NULL
    return "".join(_ESCAPE + c if c in (_ESCAPE, _SEPARATOR, _NULL) else c for c in value)


def record_key_of(key: str) -> str:
    """The record key of an index key ``<escaped value>$<escaped record key>``."""
    i, n = 0, len(key)
    while i < n and key[i] != _SEPARATOR:
        i += 2 if key[i] == _ESCAPE else 1
    if i >= n:
        raise CorruptTableError(f"secondary index key without separator: {key[:64]!r}")
    out, escape = [], False
    for c in key[i + 1 :]:
        if escape or c != _ESCAPE:
            out.append(c)
            escape = False
        else:
            escape = True
    return "".join(out)


def secondary_indexes(mdt: MetadataTable) -> dict[str, SecondaryIndex]:
    """Column -> the complete, single-column, identity secondary index on it.

    Indexes defined in ``index.json`` but not (or not yet completely) built in the MDT are left
    out. Raises ``MetadataTableError`` / ``OSError`` when the definitions cannot be read.
    """
    usable = {p for p in mdt.data_config.usable_metadata_partitions if p.startswith(SECONDARY_INDEX_TYPE + "_")}
    if not usable:
        return {}
    out: dict[str, SecondaryIndex] = {}
    for name, spec in sorted(mdt.index_definitions.items()):
        fields = spec.get("sourceFields") or []
        version = _VERSIONS.get(spec.get("version"))
        if (
            version is not None
            and name in usable
            and spec.get("indexType") == SECONDARY_INDEX_TYPE
            and (spec.get("indexFunction") or "identity") == "identity"
            and len(fields) == 1
            and isinstance(fields[0], str)
            and fields[0] not in out
        ):
            out[fields[0]] = SecondaryIndex(name, fields[0], version)
    return out


def record_keys(mdt: MetadataTable, index: SecondaryIndex, prefixes: Iterable[str]) -> set[str] | None:
    """Record keys of the rows whose value has one of ``prefixes``; ``None`` if the index's file
    groups are not the plain sharded layout (version 2)."""
    wanted = sorted(set(prefixes))
    if index.version == 2:
        slices = mdt.shards(index.partition)
        if slices is None:
            return None
        by_shard: dict[int, list[str]] = {}
        for prefix in wanted:
            by_shard.setdefault(shard_of(prefix, len(slices)), []).append(prefix)
        records: dict[str, dict[str, Any]] = {}
        for shard, group in sorted(by_shard.items()):
            records.update(mdt.read_slice(slices[shard], KeySelection(prefixes=tuple(group))))
    else:
        records = mdt.read(index.partition, KeySelection(prefixes=tuple(wanted)))
    out = set()
    for key, record in records.items():
        info = record.get("SecondaryIndexMetadata")
        if info is not None and not info.get("isDeleted"):
            out.add(record_key_of(key))
    return out


__all__ = [
    "SecondaryIndex",
    "escaped",
    "record_key_of",
    "record_keys",
    "secondary_indexes",
]
