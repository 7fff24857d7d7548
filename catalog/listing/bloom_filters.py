"""The metadata table's ``bloom_filters`` partition: each base file's record-key bloom filter.

One ``BloomFilterMetadata`` record per data base file, keyed by the Base64 xxh64 of its partition
path followed by the Base64 MD5 of its file name (the column-stats key without the column part),
sharded over the partition's file groups like every keyed MDT lookup (Java ``String.hashCode`` of
the key). A record marked deleted (its file was cleaned or replaced) or absent answers nothing.
Hudi 1.x's bloom-filter expression indexes (``expr_index_<name>``) keep the filters of a column's
values the same way.
"""

from __future__ import annotations

from typing import Any, Iterable

from catalog.errors import HudiError
from catalog.format.bloom_filter import BloomFilter, parse_bloom_filter
from catalog.listing.metadata_table import KeySelection, MetadataTable, file_hash, partition_hash, shard_of

BLOOM_FILTERS = "bloom_filters"
#: MDT partitions of expression indexes (bloom-filter ones among them)
EXPRESSION_INDEX_PREFIX = "expr_index_"


def bloom_filter_key(partition: str, file_name: str) -> str:
    return partition_hash(partition) + file_hash(file_name)


def base_file_filters(
    mdt: MetadataTable, files: Iterable[tuple[str, str]], index: str = BLOOM_FILTERS
) -> dict[tuple[str, str], BloomFilter]:
    """(partition, base file name) -> its bloom filter, for the files the MDT partition ``index``
    holds a live, readable filter of (a filter that does not decode is left out, so the file is kept).

    Raises:
        MetadataTableError: the partition cannot be read.
    """
    by_key = {bloom_filter_key(partition, name): (partition, name) for partition, name in files}
    if not by_key:
        return {}
    shards = mdt.shards(index)
    wanted: dict[int, set[str]] = {}
    if shards is None:  # not the plain sharded layout: ask every file group
        shards = mdt.file_slices(index)
        wanted = {shard: set(by_key) for shard in range(len(shards))}
    else:
        for key in by_key:
            wanted.setdefault(shard_of(key, len(shards)), set()).add(key)
    records: dict[str, dict[str, Any]] = {}
    for shard, keys in wanted.items():
        # not remembered: a filter is up to hundreds of kilobytes, and each lookup's files differ
        records.update(mdt.read_slice(shards[shard], KeySelection(keys=frozenset(keys)), remember=False))
    out: dict[tuple[str, str], BloomFilter] = {}
    for key, record in records.items():
        info = record.get("BloomFilterMetadata")
        if key not in by_key or info is None or info.get("isDeleted") or not info.get("bloomFilter"):
            continue
        partition, name = by_key[key]
        try:
            out[partition, name] = parse_bloom_filter(info["bloomFilter"], info.get("type"), f"{partition}/{name}")
        except HudiError:
            continue  # an unknown kind or a corrupt filter proves nothing: the file is kept
    return out


__all__ = ["BLOOM_FILTERS", "EXPRESSION_INDEX_PREFIX", "base_file_filters", "bloom_filter_key"]
