"""MDT planning on generated tables (catalog.testing.generator): same slices and rows as storage
listing, a request count that does not grow with the partition count, column-stats pruning."""

from __future__ import annotations

import warnings

import pyarrow.compute as pc
import pytest

import catalog.scan as scan_module
from catalog.exceptions import MetadataTableFallbackWarning
from catalog.mdt_listing import MetadataTableListing
from catalog.table import HudiTable
from catalog.testing.generator import COPY_ON_WRITE, MERGE_ON_READ, GeneratorSpec, expected_table, generate


def _spec(table_type: str, partitions: int) -> GeneratorSpec:
    return GeneratorSpec(rows=partitions * 20, partitions=partitions, commits=4, table_type=table_type,
                         column_stats=True, workers=2)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    cache: dict[tuple[str, int], str] = {}

    def get(table_type: str, partitions: int) -> str:
        key = (table_type, partitions)
        if key not in cache:
            path = tmp_path_factory.mktemp("gen") / f"{table_type}-{partitions}"
            generate(str(path), _spec(table_type, partitions))
            cache[key] = str(path)
        return cache[key]

    return get


def _keys(table: HudiTable, **options) -> list[tuple]:
    return sorted((s.partition, s.file_id, s.base_instant, s.base_file.name if s.base_file else None,
                   tuple(lf.name for lf in s.log_files)) for s in table.scan(**options).plan_slices())


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_generated_tables_plan_identically(generated, table_type):
    path = generated(table_type, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)
        mdt = HudiTable.open(path)
        assert isinstance(mdt.listing, MetadataTableListing)
    plain = HudiTable.open(path, use_metadata_table=False)
    for inst in plain.timeline.commits:
        assert _keys(mdt, as_of=inst.requested_time) == _keys(plain, as_of=inst.requested_time)
    key = [("_hoodie_record_key", "ascending")]
    assert mdt.read().sort_by(key).equals(plain.read().sort_by(key))


def _planning_requests(path: str) -> int:
    table = HudiTable.open(path)
    before = table.storage.stats.total
    list(table.scan().plan_slices())
    assert isinstance(table.listing, MetadataTableListing)
    return table.storage.stats.total - before


def test_mdt_request_count_does_not_grow_with_partitions(generated):
    small, large = generated(MERGE_ON_READ, 12), generated(MERGE_ON_READ, 60)
    n_small, n_large = _planning_requests(small), _planning_requests(large)
    assert n_small == n_large <= 30
    plain = HudiTable.open(large, use_metadata_table=False)
    before = plain.storage.stats.total
    list(plain.scan().plan_slices())
    assert plain.storage.stats.total - before >= 60  # one listing per partition at least


def test_column_stats_prune_generated_table(generated, monkeypatch):
    path = generated(COPY_ON_WRITE, 12)
    opened: list[str] = []
    real = scan_module.read_parquet
    monkeypatch.setattr(scan_module, "read_parquet", lambda s, a, p, *r, **k: opened.append(p) or real(s, a, p, *r, **k))
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
