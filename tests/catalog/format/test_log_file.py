"""Log file block framing (format doc 4.1-4.3, 4.5) on the shared single-log fixtures, and on
corrupted copies of them."""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import pytest

from catalog.errors import CorruptBlockWarning, CorruptTableError, UnsupportedTableError
from catalog.format.log_file import MAGIC, BlockType, iter_log_blocks
from catalog.storage import Storage
from tests.support.fixtures import FIXTURES_DIR

LOGS = FIXTURES_DIR / "log_files"


def _log(kind: str) -> Path:
    (path,) = [p for p in (LOGS / kind).iterdir() if p.name.startswith(".")]
    return path


def _blocks(path: Path, **kw):
    return list(iter_log_blocks(Storage(str(path.parent)), path.name, **kw))


def _copy(tmp_path: Path, *kinds: str) -> Path:
    """Concatenate the given fixture logs into one file under tmp_path."""
    out = tmp_path / ".f1-0_20250101000000000.log.1_0-1-1"
    out.write_bytes(b"".join(_log(k).read_bytes() for k in kinds))
    return out


def test_delete_block_framing_matches_digest_example():
    (block,) = _blocks(_log("valid_log_delete"))
    assert block.block_type is BlockType.DELETE
    assert (block.offset, block.size, block.content_length) == (0, 1098, 190)
    assert block.instant_time == "20250618054714114"
    assert block.header["SCHEMA"].startswith("{") and block.footer == {}
    raw = _log("valid_log_delete").read_bytes()
    assert struct.unpack(">q", raw[6:14])[0] == 1084 and struct.unpack(">q", raw[-8:])[0] == 1090
    assert block.content == raw[block.content_offset : block.content_offset + 190]


@pytest.mark.parametrize(
    "kind,block_type",
    [
        ("valid_log_avro_data", BlockType.AVRO_DATA),
        ("valid_log_parquet_data", BlockType.PARQUET_DATA),
        ("valid_log_rollback", BlockType.COMMAND),
    ],
)
def test_single_block_files(kind, block_type):
    (block,) = _blocks(_log(kind))
    assert block.block_type is block_type and block.size == _log(kind).stat().st_size
    if block_type is BlockType.COMMAND:
        assert block.content_length == 0
        assert block.header == {
            "INSTANT_TIME": "20250126040936578",
            "COMMAND_BLOCK_TYPE": "0",
            "TARGET_INSTANT_TIME": "20250126040826878",
        }
    if block_type is BlockType.PARQUET_DATA:
        assert block.content[:4] == b"PAR1" and block.content[-4:] == b"PAR1"


def test_headers_only_then_lazy_content(tmp_path):
    path = _copy(tmp_path, "valid_log_avro_data", "valid_log_parquet_data", "valid_log_delete")
    full = _blocks(path)
    lazy = _blocks(path, with_content=False)
    assert [b.block_type for b in full] == [BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE]
    assert [b.offset for b in full] == [0, 1172, 1172 + 5311]
    storage = Storage(str(path.parent))
    for a, b in zip(full, lazy):
        assert b.content is None and a.header == b.header
        assert b.load_content(storage) == a.content


def test_truncated_last_block_is_skipped_with_warning(tmp_path):
    path = _copy(tmp_path, "valid_log_avro_data", "valid_log_delete")
    path.write_bytes(path.read_bytes()[:-20])  # crash while writing the second block
    with pytest.warns(CorruptBlockWarning, match=r"offset 1172"):
        blocks = _blocks(path)
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA, BlockType.CORRUPT]
    assert blocks[1].offset == 1172 and blocks[1].size == 1098 - 20


def test_bad_block_size_skips_to_next_magic(tmp_path):
    path = _copy(tmp_path, "valid_log_delete", "valid_log_avro_data")
    raw = bytearray(path.read_bytes())
    raw[6:14] = struct.pack(">q", 500)  # size no longer matches the trailing length
    path.write_bytes(bytes(raw))
    with pytest.warns(CorruptBlockWarning, match=r"corrupt log block at offset 0"):
        blocks = _blocks(path)
    assert [b.block_type for b in blocks] == [BlockType.CORRUPT, BlockType.AVRO_DATA]
    assert blocks[1].offset == 1098


def test_huge_block_size_is_corrupt_not_a_hang(tmp_path):
    path = _copy(tmp_path, "valid_log_delete")
    raw = bytearray(path.read_bytes())
    raw[6:14] = struct.pack(">q", 1 << 60)
    path.write_bytes(bytes(raw))
    with pytest.warns(CorruptBlockWarning):
        (block,) = _blocks(path)
    assert block.block_type is BlockType.CORRUPT


def test_bad_magic_at_block_start_raises(tmp_path):
    path = _copy(tmp_path, "valid_log_delete")
    raw = bytearray(path.read_bytes())
    raw[0:6] = b"#HUDX#"
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptTableError, match="no log block magic at offset 0"):
        _blocks(path)


def test_garbage_after_block_makes_it_corrupt(tmp_path):
    # Hudi also requires a magic (or EOF) right after a block; otherwise the block is suspect.
    path = _copy(tmp_path, "valid_log_delete")
    path.write_bytes(path.read_bytes() + b"garbage" + _log("valid_log_rollback").read_bytes())
    with pytest.warns(CorruptBlockWarning):
        blocks = _blocks(path)
    assert [b.block_type for b in blocks] == [BlockType.CORRUPT, BlockType.COMMAND]


def test_unknown_block_type_raises(tmp_path):
    path = _copy(tmp_path, "valid_log_rollback")
    raw = bytearray(path.read_bytes())
    raw[18:22] = struct.pack(">i", 42)
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptTableError, match="unknown log block type 42"):
        _blocks(path)


def test_unsupported_format_version_raises(tmp_path):
    path = _copy(tmp_path, "valid_log_rollback")
    raw = bytearray(path.read_bytes())
    raw[14:18] = struct.pack(">i", 0)
    path.write_bytes(bytes(raw))
    with pytest.raises(UnsupportedTableError, match="log format version 0"):
        _blocks(path)


def test_inner_lengths_inconsistent_raise(tmp_path):
    path = _copy(tmp_path, "valid_log_delete")
    raw = bytearray(path.read_bytes())
    # The content length sits right after the header; make it run past the block.
    (block,) = _blocks(path)
    pos = block.content_offset - 8
    raw[pos : pos + 8] = struct.pack(">q", 5000)
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptTableError, match="content length 5000"):
        _blocks(path)


def test_fixture_table_logs_frame_cleanly(fixture_table):
    root = Path(fixture_table("sample_table/mor/parquet/v6_nonpartitioned_rollback"))
    logs = sorted(p for p in root.iterdir() if ".log." in p.name)
    kinds = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptBlockWarning)
        for p in logs:
            kinds += [b.block_type for b in _blocks(p)]
    assert kinds == [BlockType.PARQUET_DATA, BlockType.COMMAND, BlockType.PARQUET_DATA]
    assert MAGIC == b"#HUDI#"
