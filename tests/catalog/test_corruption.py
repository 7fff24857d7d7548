"""Damaged tables never give a silent wrong answer: a corrupt metadata-table block makes planning
fall back to storage listing, a corrupt base-file page or an incomplete hoodie.properties is a
clear CorruptTableError naming what is wrong."""

from __future__ import annotations

import re
import shutil
import warnings
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from catalog import HudiTable
from catalog.errors import CorruptTableError, MetadataTableFallbackWarning
from catalog.listing.storage import StorageListing
from tests.support.compare import assert_same_rows

MOR_V6 = "trino/hudi_multi_fg_pt_v6_mor"
#: the MDT files-partition log holding the data table's last deltacommit (its 4 data log files)
LAST_MDT_LOG = ".files-0000-0_20250522045923957001.log.1_2-127-307"


def truncated_mdt_copy(external_table, tmp_path: Path) -> Path:
    """A copy of the v6 MOR table whose latest MDT ``files`` log lost its last 100 bytes."""
    dest = tmp_path / "t"
    shutil.copytree(external_table(MOR_V6), dest)
    log = dest / ".hoodie/metadata/files" / LAST_MDT_LOG
    log.write_bytes(log.read_bytes()[:-100])
    return dest


def test_truncated_mdt_log_falls_back_with_all_rows(external_table, tmp_path):
    path = truncated_mdt_copy(external_table, tmp_path)
    table = HudiTable.open(str(path))
    with pytest.warns(MetadataTableFallbackWarning, match=re.escape(LAST_MDT_LOG)):
        assert isinstance(table.state.listing, StorageListing)
    # skipping the block (as data logs are) would lose the last commit's log files: the
    # prices would be the older 100/101/200/201
    snap = table.read()
    assert sorted(snap["price"].to_pylist()) == [101.0, 102.0, 201.0, 202.0]
    assert_same_rows(snap, HudiTable.open(str(path), use_metadata_table=False).read(), "fallback")


def test_corrupt_base_file_page_names_the_file(fixture_table, tmp_path):
    dest = tmp_path / "t"
    shutil.copytree(fixture_table("sample_table/cow/v6_nonpartitioned"), dest)
    base = sorted(dest.glob("*.parquet"))[-1]
    meta = pq.ParquetFile(base).metadata
    column = meta.row_group(0).column(meta.num_columns - 1)
    assert column.compression != "UNCOMPRESSED"  # damaged compressed pages fail to decompress
    start = column.data_page_offset
    data = bytearray(base.read_bytes())
    data[start + 20 : start + column.total_compressed_size] = b"\xff" * (column.total_compressed_size - 20)
    base.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MetadataTableFallbackWarning)
        table = HudiTable.open(str(dest))
        with pytest.raises(CorruptTableError, match=re.escape(base.name)):
            table.read()


def test_properties_without_partition_fields_of_a_partitioned_table(external_table, tmp_path):
    dest = tmp_path / "t"
    shutil.copytree(external_table("hudi-rs-history/trips_0x_cow_partitioned"), dest)
    props = dest / ".hoodie/hoodie.properties"
    text = props.read_text()
    assert "hoodie.table.partition.fields=city" in text
    props.write_text(re.sub(r"(?m)^hoodie\.table\.partition\.fields=.*\n", "", text))
    for use_mdt in (True, False):
        table = HudiTable.open(str(dest), use_metadata_table=use_mdt)
        with pytest.raises(CorruptTableError, match="no hoodie.table.partition.fields.*wrote into partitions"):
            table.read()
