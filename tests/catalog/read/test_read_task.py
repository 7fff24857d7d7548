"""A read task (a read context and a split) is a plain value; the caches are given to the reader
beside it, so a task moved to another process is read through that process's own caches."""

from __future__ import annotations

import pickle

import pyarrow as pa

from catalog import HudiTable
from catalog.format.caches import ReadCaches
from catalog.format.log_cache import DecodedLogBlocks
from catalog.format.row_groups import DecodedRowGroups
from catalog.plan.options import ReadOptions
from catalog.plan.planner import plan
from catalog.read.split_reader import read_split
from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec

MOR = GeneratorSpec(rows=1000, partitions=2, row_group_size=250, commits=2, table_type=MERGE_ON_READ,
                    record_index=True)


def test_a_pickled_task_reads_the_same_rows_through_the_caches_it_is_given(generated_table):
    table = HudiTable.open(generated_table(MOR))
    key = table.read(columns=["uuid"])["uuid"][7].as_py()
    scan = plan(table.state, ReadOptions(filters=[("uuid", "=", key)]))
    (split,) = list(scan.splits)
    assert split.file_slice.has_logs and scan.context.point is not None
    task = pickle.dumps((scan.context, split))
    assert b"DecodedRowGroups" not in task and b"FooterCache" not in task  # nothing of a process in it

    context, moved = pickle.loads(task)
    assert context.point == scan.context.point  # the lookup travels as it was planned
    caches = ReadCaches(row_groups=DecodedRowGroups(16 << 20), log_blocks=DecodedLogBlocks(16 << 20))
    got = pa.Table.from_batches(list(read_split(context, moved, caches)), schema=scan.schema)
    plain = pa.Table.from_batches(list(read_split(scan.context, split)), schema=scan.schema)
    assert got.equals(plain) and got.num_rows == 1
    assert caches.row_groups is not None and caches.row_groups.stats().entries > 0
    assert caches.log_blocks is not None and caches.log_blocks.stats().entries > 0
