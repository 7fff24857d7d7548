"""Records of the metadata table's ``column_stats`` partition (format digest section 6.7,
index version V1: the wrapper record alone carries the value type)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

#: Hudi hashes with seed 0xdabadaba held in a Java int, i.e. sign-extended to 64 bits.
_SEED = 0xFFFFFFFFDABADABA
_NS = "org.apache.hudi.avro.model."


def _b64_xxh64(text: str) -> str:
    return base64.b64encode(xxhash.xxh64(text.encode("utf-8"), seed=_SEED).digest()).decode()


def column_stats_key(column: str, partition: str, file_name: str) -> str:
    """``b64(xxh64(column)) + b64(xxh64(partition or '.')) + b64(md5(file name))``."""
    md5 = base64.b64encode(hashlib.md5(file_name.encode("utf-8")).digest()).decode()
    return _b64_xxh64(column) + _b64_xxh64(partition or ".") + md5


def _wrapper(dtype: pa.DataType) -> str | None:
    if pa.types.is_string(dtype):
        return "StringWrapper"
    if pa.types.is_int64(dtype):
        return "LongWrapper"
    if pa.types.is_int32(dtype):
        return "IntWrapper"
    if pa.types.is_float64(dtype):
        return "DoubleWrapper"
    if pa.types.is_boolean(dtype):
        return "BooleanWrapper"
    if pa.types.is_decimal(dtype):
        return "DecimalWrapper"
    if pa.types.is_timestamp(dtype) and dtype.unit == "us":
        return "TimestampMicrosWrapper"
    if pa.types.is_date32(dtype):
        return "DateWrapper"
    return None  # nested and other types are not indexed


def indexed_columns(schema: pa.Schema) -> list[str]:
    """Top-level columns with a V1 wrapper type, in schema order."""
    return [f.name for f in schema if _wrapper(f.type) is not None]


def _sizes(md: pq.FileMetaData | None) -> dict[str, tuple[int, int]]:
    """Column -> (compressed, uncompressed) bytes summed over row groups of a parquet file."""
    if md is None:
        return {}
    out: dict[str, list[int]] = {}
    for rg in range(md.num_row_groups):
        group = md.row_group(rg)
        for c in range(group.num_columns):
            col = group.column(c)
            top = col.path_in_schema.split(".")[0]
            acc = out.setdefault(top, [0, 0])
            acc[0] += col.total_compressed_size
            acc[1] += col.total_uncompressed_size
    return {k: (v[0], v[1]) for k, v in out.items()}


def column_stats_records(table: pa.Table, partition: str, file_name: str,
                         parquet_metadata: pq.FileMetaData | None = None) -> Iterator[tuple[str, dict]]:
    """(MDT key, ``ColumnStatsMetadata`` payload) per indexed column of one data or log file.
    Log files (no parquet metadata) get ``totalSize`` 0 like Hudi writes them."""
    sizes = _sizes(parquet_metadata)
    for name in indexed_columns(table.schema):
        col = table.column(name)
        wrapper = _wrapper(col.type)
        assert wrapper is not None  # indexed_columns keeps only wrapped types
        mm = pc.min_max(col)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        total, uncompressed = sizes.get(name, (0, 0))
        yield column_stats_key(name, partition, file_name), {
            "fileName": file_name,
            "columnName": name,
            "minValue": None if lo is None else (_NS + wrapper, {"value": lo}),
            "maxValue": None if hi is None else (_NS + wrapper, {"value": hi}),
            "valueCount": len(col),
            "nullCount": col.null_count,
            "totalSize": total,
            "totalUncompressedSize": uncompressed,
            "isDeleted": False,
            "isTightBound": True,
        }
