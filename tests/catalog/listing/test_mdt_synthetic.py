"""MDT planning on generated tables (hudi_generator): same slices and rows as storage
listing, a request count that does not grow with the partition count, column-stats pruning."""

from __future__ import annotations

import warnings

import pyarrow.compute as pc
import pytest

import catalog.read.cow as cow_module
from catalog.errors import MetadataTableFallbackWarning
from catalog.hudi_table import HudiTable
from catalog.listing.mdt_listing import MetadataTableListing
from catalog.plan.options import ReadOptions
from catalog.plan.planner import file_slices
from hudi_generator.generator import COPY_ON_WRITE, MERGE_ON_READ, GeneratorSpec, expected_table


def _spec(table_type: str, partitions: int) -> GeneratorSpec:
    return GeneratorSpec(rows=partitions * 20, partitions=partitions, commits=4, table_type=table_type,
                         column_stats=True, workers=2)


@pytest.fixture
def generated(generated_table):
    return lambda table_type, partitions: generated_table(_spec(table_type, partitions))


def _keys(table: HudiTable, **options) -> list[tuple]:
    return sorted((s.partition, s.file_id, s.base_instant, s.base_file.name if s.base_file else None,
                   tuple(lf.name for lf in s.log_files)) for s in file_slices(table.state, ReadOptions(**options)))


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_generated_tables_plan_identically(generated, table_type):
    path = generated(table_type, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)
        mdt = HudiTable.open(path)
        assert isinstance(mdt.state.listing, MetadataTableListing)
    plain = HudiTable.open(path, use_metadata_table=False)
    for inst in plain.timeline.commits:
        assert _keys(mdt, as_of=inst.requested_time) == _keys(plain, as_of=inst.requested_time)
    key = [("_hoodie_record_key", "ascending")]
    assert mdt.read().sort_by(key).equals(plain.read().sort_by(key))


def _planning_requests(path: str) -> int:
    table = HudiTable.open(path)
    before = table.storage.stats.total
    list(file_slices(table.state, ReadOptions()))
    assert isinstance(table.state.listing, MetadataTableListing)
    return table.storage.stats.total - before


def test_mdt_request_count_does_not_grow_with_partitions(generated):
    small, large = generated(MERGE_ON_READ, 12), generated(MERGE_ON_READ, 60)
    n_small, n_large = _planning_requests(small), _planning_requests(large)
    assert n_small == n_large <= 30
    plain = HudiTable.open(large, use_metadata_table=False)
    before = plain.storage.stats.total
    list(file_slices(plain.state, ReadOptions()))
    assert plain.storage.stats.total - before >= 60  # one listing per partition at least


def test_column_stats_prune_generated_table(generated, monkeypatch):
    path = generated(COPY_ON_WRITE, 12)
    opened: list[str] = []
    real = cow_module.read_parquet
    monkeypatch.setattr(cow_module, "read_parquet", lambda s, f, *r, **k: opened.append(f.path) or real(s, f, *r, **k))
    expected = expected_table(_spec(COPY_ON_WRITE, 12), with_meta=False)
    column = "ts"
    cut = pc.max(expected[column]).as_py()
    filters = [(column, ">=", cut)]
    got = HudiTable.open(path).read(filters=filters, columns=[column])
    assert got.num_rows == expected.filter(pc.field(column) >= cut).num_rows >= 1
    n_mdt = len(set(opened))
    opened.clear()
    HudiTable.open(path, use_metadata_table=False).read(filters=filters, columns=[column])
    assert n_mdt < len(set(opened))
