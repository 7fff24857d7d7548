"""Tables for the metadata table's bloom-filter index (issue 30): ``hoodie.index.type=BLOOM`` with
the filters kept in the metadata table's ``bloom_filters`` partition, no record index, and several
file groups per partition so a record-key lookup has files to leave out.

Pure Python, like ``specs``; ``specs.all_specs`` adds these.
"""

from __future__ import annotations

from tests.data.factory.specs import COW, INLINE_COMPACT, MOR, Sql, TableSpec, Write, ids

#: the metadata table's bloom filters, read by the bloom index; no small-file packing (each
#: insert write opens new file groups)
BLOOM_INDEX = {
    "hoodie.index.type": "BLOOM",
    "hoodie.metadata.index.bloom.filter.enable": "true",
    "hoodie.bloom.index.use.metadata": "true",
    "hoodie.metadata.record.index.enable": "false",
    "hoodie.parquet.small.file.limit": "0",
}
#: Hudi's default filter kind, started at two keys a row so the files of four keys hold two rows
DYNAMIC = {"hoodie.bloom.index.filter.type": "DYNAMIC_V0", "hoodie.index.bloom.num_entries": "2",
           "hoodie.bloom.index.filter.dynamic.max.entries": "64"}

#: even then odd ids (key ranges overlap, so column stats cannot tell the file groups apart), new
#: ids, updates of ids in the first two writes' file groups (on merge-on-read: log files), a delete
BLOOM_STEPS = (
    Write("insert", tuple(range(0, 24, 2)), 1),
    Write("insert", tuple(range(1, 24, 2)), 1),
    Write("upsert", (2, 3, *ids(24, 27)), 2),
    Write("delete", (4, 5), 3),
)


def bloom_specs() -> list[TableSpec]:
    releases = ("0.15.0", "1.0.2", "1.1.1", "1.2.0")
    return [
        TableSpec("cow_bloom_index", COW, BLOOM_STEPS, {**BLOOM_INDEX, **DYNAMIC}, features=("bloom_index",),
                  releases=releases),
        TableSpec("mor_bloom_index", MOR, BLOOM_STEPS, BLOOM_INDEX, features=("bloom_index",), releases=releases),
        # a bucket index writes new keys into the log files of file groups that have a base file:
        # that base file's bloom filter does not hold them, so a slice with log files is kept
        TableSpec("mor_bloom_bucket_logs", MOR, (
            Write("insert", ids(0, 12), 1), Write("upsert", ids(0, 3), 2), Write("insert", ids(12, 15), 3),
        ), {**BLOOM_INDEX, **INLINE_COMPACT, "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "1",
            "hoodie.index.bucket.engine": "SIMPLE"}, features=("bloom_index", "bucket_index", "compaction"),
            releases=("1.2.0",)),
        # Hudi 1.x's bloom-filter expression index on a non-key column (its own MDT partition,
        # ``expr_index_<name>``), beside the record-key filters
        TableSpec("cow_bloom_expression_index", COW, (
            BLOOM_STEPS[0],
            # Hudi builds an index asynchronously and asks for a lock provider even for one writer
            Sql("SET hoodie.write.lock.provider=org.apache.hudi.client.transaction.lock.InProcessLockProvider"),
            Sql("CREATE INDEX idx_bloom_name ON {table} USING bloom_filters(name) OPTIONS(expr='identity')"),
            *BLOOM_STEPS[1:],
        ), BLOOM_INDEX, features=("bloom_index", "expression_index"), releases=("1.0.2", "1.2.0")),
    ]
