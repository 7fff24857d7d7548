"""The reader's answers from footers alone: ``ScanPlan.count`` (footer row counts, column
statistics under filters) and ``ScanPlan.to_dataset`` (the plain Parquet base files as an Arrow
dataset); each agrees with reading the splits, or declines (``None``)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from catalog import HudiTable
from catalog.plan.dataset import Fragments
from catalog.plan.splits import FooterCache
from catalog.read.split_reader import read_splits
from hudi_generator.generator import COPY_ON_WRITE, MERGE_ON_READ, GeneratorSpec, generate


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("scan-features")
    generate(str(root / "cow"), GeneratorSpec(rows=60, partitions=2, files_per_partition=2, commits=2,
                                              table_type=COPY_ON_WRITE, workers=1))
    generate(str(root / "mor"), GeneratorSpec(rows=60, partitions=2, files_per_partition=1, commits=3,
                                              table_type=MERGE_ON_READ, update_fraction=0.2, workers=1))
    return {"cow": str(root / "cow"), "mor": str(root / "mor")}


def _rows(path: str, **options) -> int:
    scan = HudiTable.open(path).scan(**options)
    return sum(b.num_rows for b in read_splits(scan.context, list(scan.splits), scan.options.limit))


def test_a_plain_parquet_scan_is_counted_from_its_footers(tables):
    assert HudiTable.open(tables["cow"]).scan().count() == _rows(tables["cow"]) > 0
    assert HudiTable.open(tables["cow"]).scan(limit=7).count() == 7
    ro = {"query_type": "read_optimized"}
    assert HudiTable.open(tables["mor"]).scan(**ro).count() == _rows(tables["mor"], **ro)


def test_filters_are_counted_only_where_the_statistics_decide(tables):
    footers = FooterCache()
    decided = HudiTable.open(tables["cow"]).scan(filters=[("ts", ">", 0)])
    assert decided.count(footers) == _rows(tables["cow"], filters=[("ts", ">", 0)])
    assert footers.stats().misses > 0  # read through the cache handed in
    open_question = HudiTable.open(tables["cow"]).scan(filters=[("fare", ">", 10.0)])  # floating point
    assert open_question.count() is None


def test_merges_increments_and_changes_are_read(tables):
    assert HudiTable.open(tables["mor"]).scan().count() is None  # logs to merge
    first = HudiTable.open(tables["cow"]).timeline.commits[0].requested_time
    assert HudiTable.open(tables["cow"]).scan(query_type="incremental", start=first).count() is None


def test_the_dataset_holds_what_the_reader_returns(tables):
    fragments = Fragments()
    dataset = HudiTable.open(tables["cow"]).scan(columns=["uuid", "ts"]).to_dataset(fragments)
    assert dataset is not None and fragments.stats().misses == len(dataset.files)
    table = HudiTable.open(tables["cow"]).read(columns=["uuid", "ts"])
    assert dataset.to_table().sort_by("uuid").equals(table.sort_by("uuid"))
    again = HudiTable.open(tables["cow"]).scan(columns=["uuid", "ts"]).to_dataset(fragments)
    assert again is not None and fragments.stats().hits == len(again.files)  # no footer read again
    assert again is dataset  # the same files in the same schema: the same dataset
    other = HudiTable.open(tables["cow"]).scan(columns=["uuid"]).to_dataset(fragments)
    assert other is not None and other is not dataset and other.schema.names == ["uuid"]
    assert HudiTable.open(tables["mor"]).scan().to_dataset() is None  # logs to merge
    assert isinstance(dataset.schema, pa.Schema) and dataset.schema.names == ["uuid", "ts"]
