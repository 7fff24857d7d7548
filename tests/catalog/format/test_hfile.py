"""HFile v3 reader against the HBase/Hudi-written HFiles in fixtures/hfile (format doc section 5)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from catalog.errors import CorruptTableError
from catalog.format.hfile import HFileReader
from catalog.storage import Storage
from tests.support.fixtures import FIXTURES_DIR

HFILE_DIR = FIXTURES_DIR / "hfile"
ALL = sorted(p.name for p in HFILE_DIR.glob("*.hfile"))


def expected_cells(name: str) -> list[tuple[bytes, bytes]]:
    """The cells each fixture was written with, derived from its name (see fixtures/README.md)."""
    if name.endswith("no_entry.hfile"):
        return []
    count = int(re.search(r"_(GZ|NONE)_(\d+)", name).group(2))  # type: ignore[union-attr]
    if "non_unique" in name:
        dups = int(re.search(r"_(\d+)_non_unique", name).group(1))  # type: ignore[union-attr]
        out = []
        for i in range(count):
            key = f"hudi-key-{i:09d}".encode()
            out.append((key, f"hudi-value-{i:09d}".encode()))
            out.extend((key, f"hudi-value-{i:09d}_{j}".encode()) for j in range(dups))
        return out
    if "large_keys" in name:
        fmt = "hudi-key-" + "a" * 100 + "-{:09d}"
    elif "fake_first_key" in name:
        fmt = "hudi-key-{:09d}-abcdefghij"
    else:
        fmt = "hudi-key-{:09d}"
    return [(fmt.format(i).encode(), f"hudi-value-{i:09d}".encode()) for i in range(count)]


def test_every_fixture_file_is_covered():
    assert len(ALL) == 9
    assert {n for n in ALL if "deep_index" in n or "non_unique" in n or "fake_first" in n or "no_entry" in n}


@pytest.mark.parametrize("name", ALL)
def test_full_scan_matches_expected_cells(name):
    reader = HFileReader.from_bytes((HFILE_DIR / name).read_bytes(), name)
    cells = list(reader.scan())
    assert cells == expected_cells(name)
    assert reader.entry_count == len(cells)
    assert reader.trailer.major == 3


@pytest.mark.parametrize("name", ALL)
def test_point_and_prefix_seeks(name):
    reader = HFileReader.from_bytes((HFILE_DIR / name).read_bytes(), name)
    cells = expected_cells(name)
    by_key: dict[bytes, list[bytes]] = {}
    for k, v in cells:
        by_key.setdefault(k, []).append(v)
    keys = sorted(by_key)
    rng = random.Random(7)
    sample = keys[:3] + keys[-3:] + rng.sample(keys, min(200, len(keys)))
    for key in sample:
        assert [v for _, v in reader.seek(key)] == by_key[key]
        assert reader.get(key) == by_key[key][0]
    # absent keys: before the first, after the last, between two keys, a proper prefix of a key
    for absent in (b"a", b"zzz", b"hudi-key-", (keys[0] + b"\x00") if keys else b"x"):
        assert list(reader.seek(absent)) == []
    if not keys:
        assert list(reader.seek_prefix(b"hudi")) == []
        return
    # prefix: every key sharing the first key's text up to its last two characters
    prefix = keys[len(keys) // 2][:-2]
    assert list(reader.seek_prefix(prefix)) == [(k, v) for k, v in cells if k.startswith(prefix)]
    assert list(reader.lookup([keys[5], keys[1], keys[5]])) == [
        (k, v) for k, v in cells if k in (keys[1], keys[5])
    ]


def test_file_info_and_index_shapes():
    deep = HFileReader.from_bytes((HFILE_DIR / ALL[1]).read_bytes())
    assert "deep_index" in ALL[1] and deep.trailer.index_levels == 3
    assert deep.info("hudi_hfile_testing.custom_key") == b"hudi_custom_value"
    fake = HFileReader.from_bytes((HFILE_DIR / ALL[0]).read_bytes())
    real_first_rows = {k for k, _ in expected_cells(ALL[0])}
    # the index holds shortened keys that are not rows of the file
    assert any(e.row not in real_first_rows for e in fake.root_index)


def test_stored_lookup_reads_only_needed_blocks(tmp_path):
    name = "hudi_1_0_hbase_2_4_9_16KB_NONE_5000.hfile"
    storage = Storage(str(HFILE_DIR))
    size = (HFILE_DIR / name).stat().st_size
    reader = HFileReader.from_storage(storage, name, size=size)
    assert storage.stats.counts["read"] == 1 and "info" not in storage.stats.counts
    assert reader.get("hudi-key-000000042") == b"hudi-value-000000042"
    # one more range read for one data block, far less than the file
    assert storage.stats.counts["read"] == 2
    assert storage.stats.bytes_read <= size // 2
    deep_name = "hudi_1_0_hbase_2_4_13_1KB_GZ_10000_large_keys_deep_index.hfile"
    storage.stats.reset()
    deep = HFileReader.from_storage(storage, deep_name)
    key = expected_cells(deep_name)[123][0]
    assert deep.get(key) == b"hudi-value-000000123"
    # info + tail + intermediate index + leaf index + data block (at most)
    assert storage.stats.total <= 5
    assert storage.stats.bytes_read < (HFILE_DIR / deep_name).stat().st_size


@pytest.mark.parametrize("cut", [1, 100, 4096, 5000])
def test_truncated_file_fails_clearly(cut):
    data = (HFILE_DIR / "hudi_1_0_hbase_2_4_9_16KB_GZ_20000.hfile").read_bytes()
    with pytest.raises(CorruptTableError, match="HFile|trailer|block"):
        reader = HFileReader.from_bytes(data[:-cut], "cut.hfile")
        list(reader.scan())


def test_corrupt_data_block_fails_clearly():
    data = bytearray((HFILE_DIR / "hudi_1_0_hbase_2_4_9_16KB_GZ_20000.hfile").read_bytes())
    data[40:60] = b"\xff" * 20  # inside the first gzip data block
    reader = HFileReader.from_bytes(bytes(data), "bad.hfile")
    with pytest.raises(CorruptTableError, match="bad.hfile"):
        list(reader.scan())
    not_hfile = b"PAR1" + b"\x00" * 5000
    with pytest.raises(CorruptTableError, match="trailer"):
        HFileReader.from_bytes(not_hfile, "x.parquet")


def test_metadata_table_base_hfile(fixture_table):
    base = Path(fixture_table("sample_table/mor/avro/v9_txns_simple_meta"))
    path = base / ".hoodie/metadata/files/files-0000-0_13-170-402_20260307162612567.hfile"
    reader = HFileReader.from_bytes(path.read_bytes())
    rows = [k for k, _ in reader.scan()]
    assert rows == [b"__all_partitions__", b"region=apac", b"region=eu", b"region=us"]
    assert reader.trailer.minor == 0 and reader.trailer.codec == 1
    assert '"HoodieMetadataRecord"' in (reader.avro_schema or "")
    assert reader.meta_block("bloomFilter") is not None


def test_hudi_native_hfile_without_key_value_version(external_table):
    """Hudi 1.x's own HFile writer omits KEY_VALUE_VERSION but still writes a 0x00 memstore byte
    after every cell (v8 fixture's metadata-table log blocks); the HBase rule alone misaligns them."""
    from catalog.format.log_file import BlockType, iter_log_blocks_in

    files = Path(external_table("trino/hudi_custom_keygen_pt_v8_mor")) / ".hoodie/metadata/files"
    log = next(files.glob(".files-0000-0_20250613132422252.log.*"))
    (block,) = [b for b in iter_log_blocks_in(log.read_bytes(), log.name) if b.block_type is BlockType.HFILE_DATA]
    reader = HFileReader.from_bytes(block.content or b"", log.name)
    assert reader.info("KEY_VALUE_VERSION") is None
    rows = [row for row, _ in reader.scan()]
    assert b"__all_partitions__" in rows and len(rows) == reader.entry_count >= 2


def test_a_looked_up_block_is_kept_as_its_body_and_cell_offsets(monkeypatch):
    """A lookup keeps the block it walked (the next key in it is bisected, not parsed again),
    as the block body and one 4-byte offset per cell: no object per cell."""
    name = "hudi_1_0_hbase_2_4_9_16KB_NONE_5000.hfile"
    reader = HFileReader.from_bytes((HFILE_DIR / name).read_bytes(), name)
    walked: list[int] = []
    starts = HFileReader._cell_starts

    def spy(self, body):
        found = starts(self, body)
        walked.append(len(found))
        return found

    monkeypatch.setattr(HFileReader, "_cell_starts", spy)
    assert reader.get("hudi-key-000000042") == b"hudi-value-000000042"
    assert len(walked) == 1 and len(reader._blocks) == 1
    kept = reader.cached_bytes
    block = next(iter(reader._blocks.values()))
    assert kept == len(block.body) + 4 * walked[0] + 200
    assert reader.get("hudi-key-000000043") == b"hudi-value-000000043"  # same block: nothing parsed
    assert reader.get("hudi-key-000000041") == b"hudi-value-000000041"
    assert len(walked) == 1 and reader.cached_bytes == kept
    assert reader.get("hudi-key-000004999") == b"hudi-value-000004999"  # another block: parsed once
    assert len(walked) == 2 and reader.cached_bytes > kept
