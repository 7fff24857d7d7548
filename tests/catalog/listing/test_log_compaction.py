"""Log-compacted metadata-table blocks (Hudi 0.14+ log compaction) are applied, not a reason to
fall back: the generator log-compacts the MDT ``files`` blocks of every data commit into one
HFILE_DATA block whose ``COMPACTED_BLOCK_TIMES`` header lists them (the originals stay in their
log files), on version 6 and version 8 tables."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import fastavro
import pytest

from catalog import HudiTable
from catalog.errors import MetadataTableFallbackWarning
from catalog.format.hfile import HFileReader
from catalog.format.log_file import BlockType, iter_log_blocks_in
from catalog.listing.mdt_listing import MetadataTableListing
from catalog.plan.options import ReadOptions
from catalog.plan.planner import file_slices
from hudi_generator import metadata_table as writer
from hudi_generator.generator import COPY_ON_WRITE, MERGE_ON_READ, GeneratorSpec, expected_table
from hudi_generator.log_writer import hfile_data_block
from tests.support.compare import assert_same_rows

SMALL = dict(rows=300, partitions=3, files_per_partition=2, commits=3, update_fraction=0.25, delete_fraction=0.05)


def _slices(table: HudiTable, **options) -> list[tuple]:
    return sorted((s.partition, s.file_id, s.base_file.name if s.base_file else None,
                   tuple(lf.name for lf in s.log_files)) for s in file_slices(table.state, ReadOptions(**options)))


def _files_blocks(table: HudiTable) -> list[tuple[str, str | None, str | None]]:
    mdt = table.state.listing.mdt
    (fs,) = mdt.file_slices("files")
    return [(b.block_type.name, b.instant_time, b.header.get("COMPACTED_BLOCK_TIMES")) for b in mdt._valid_blocks(fs.log_file_paths)[0]]


@pytest.mark.parametrize("version", [8, 6])
@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_log_compacted_files_partition_plans_like_listing(generated_table, version, table_type):
    spec = GeneratorSpec(**SMALL, table_type=table_type, table_version=version, mdt_log_compaction=True)
    path = generated_table(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)
        table = HudiTable.open(path)
        assert isinstance(table.state.listing, MetadataTableListing)
        requested = [r for r, _ in spec.instants()]
        # the compacted block stands in for the three data commits' blocks
        assert _files_blocks(table)[1:] == [("HFILE_DATA", requested[-1] + "005", ",".join(requested))]
        listed = HudiTable.open(path, use_metadata_table=False)
        assert _slices(table) == _slices(listed)
        for instant, _ in spec.instants():  # time travel to every commit
            assert _slices(table, as_of=instant) == _slices(listed, as_of=instant)
        expected = expected_table(spec, with_meta=True)
        assert_same_rows(table.read(columns=expected.column_names), expected, "log-compacted")


def test_the_compacted_block_replaces_its_originals(generated_copy):
    """Proof that the originals are not read: a file dropped from the compacted block alone
    disappears from the metadata-table listing."""
    spec = GeneratorSpec(**SMALL, table_type=MERGE_ON_READ, mdt_log_compaction=True)
    path = Path(generated_copy(spec))
    (log,) = (path / ".hoodie/metadata/files").glob(".files-0000-0_*005.log.1_*")
    (block,) = list(iter_log_blocks_in(log.read_bytes(), log.name))
    records = {key.decode(): fastavro.schemaless_reader(io.BytesIO(value), writer._PARSED)
               for key, value in HFileReader.from_bytes(block.content, log.name).scan()}
    partition = "region=region-00000"
    victim = sorted(records[partition]["filesystemMetadata"])[0]
    del records[partition]["filesystemMetadata"][victim]
    hfile = writer.records_hfile({k: writer._encode(v) for k, v in records.items()})
    log.write_bytes(hfile_data_block(block.instant_time, block.header["SCHEMA"], hfile,
                                     block.header["COMPACTED_BLOCK_TIMES"].split(",")))
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)
        table = HudiTable.open(str(path))
        files = table.state.listing.list_files([partition])[partition]
    assert victim not in {name for name, _ in files}
    assert victim in {p.name for p in (path / partition).iterdir()}
    assert BlockType.HFILE_DATA.name in {b[0] for b in _files_blocks(table)}
