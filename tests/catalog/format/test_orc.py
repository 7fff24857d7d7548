"""ORC base files: stripes as splits, projection, filters and constants, read locally and through
fsspec, damaged files refused by name.

Rows of whole tables are compared with Hudi's own answers on the factory's ORC tables
(``tests/catalog/test_hudi_written.py``).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc
import pytest

from catalog.errors import CorruptTableError
from catalog.format.base_file import BaseFileRead
from catalog.format.orc import read_orc, read_orc_footer
from catalog.plan.splits import FooterCache, SplitOptions, SplitPlanner
from catalog.storage import Storage
from catalog.table.files import BaseFile, FileSlice, LogFile
from tests.support.counting_fs import CountingFileSystem, register

INSTANT = "20240101000000000"
ROWS = 20_000
SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string()), ("part", pa.string())])


def _write_orc(root, rows: int = ROWS) -> FileSlice:
    name = f"f1-0_0-1-0_{INSTANT}.orc"
    folder = root / "p1"
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "s": [f"v{i:08d}" for i in range(rows)]})
    orc.write_table(table, folder / name, stripe_size=16 * 1024, compression="uncompressed")
    return FileSlice("p1", "f1-0", INSTANT, BaseFile.parse(name, (folder / name).stat().st_size))


def _read(storage: Storage, fs: FileSlice, stripes=None, **kwargs) -> pa.Table:
    assert fs.base_file_path is not None
    file = BaseFileRead(fs.base_file_path, kwargs.pop("schema", SCHEMA),
                        row_groups=tuple(stripes) if stripes is not None else None, **kwargs)
    batches = list(read_orc(storage, file))
    return pa.Table.from_batches(batches, schema=batches[0].schema) if batches else pa.table({})


def test_stripes_are_splits_covering_each_stripe_once(tmp_path):
    storage = Storage(str(tmp_path))
    fs = _write_orc(tmp_path)
    footer = read_orc_footer(storage, "p1/" + fs.base_file.name)
    assert footer.num_rows == ROWS and footer.num_stripes > 4
    target = fs.base_file.size // 3
    splits = SplitPlanner(storage, SplitOptions(target_split_bytes=target), FooterCache()).split_slice(fs)
    assert 3 <= len(splits) <= 4
    owned = [s for split in splits for s in split.row_groups]
    assert owned == list(range(footer.num_stripes))
    assert sum(split.estimated_rows for split in splits) == pytest.approx(ROWS, rel=0.01)
    parts = [_read(storage, fs, split.row_groups, schema=SCHEMA.remove(2)) for split in splits]
    assert pa.concat_tables(parts)["id"].to_pylist() == list(range(ROWS))


def test_a_slice_with_logs_is_one_split(tmp_path):
    storage = Storage(str(tmp_path))
    fs = _write_orc(tmp_path)
    fs.log_files.append(LogFile.parse(f".f1-0_{INSTANT}.log.1_0-1-0", 100))
    (split,) = SplitPlanner(storage, SplitOptions(target_split_bytes=1024), FooterCache()).split_slice(fs)
    assert split.row_groups is None and split.bytes == fs.total_size


def test_projection_filter_and_constants(tmp_path):
    """Only the asked columns are decoded; the filter applies exactly; a constant (a partition
    column the files leave out) is filled, and a filter on it sees the constant."""
    storage = Storage(str(tmp_path))
    fs = _write_orc(tmp_path)
    constants = {"part": pa.scalar("p1")}
    rows = _read(storage, fs, filter=pc.field("id") < 3, constants=constants)
    assert rows.schema == SCHEMA
    assert rows.to_pylist() == [{"id": i, "s": f"v{i:08d}", "part": "p1"} for i in range(3)]
    assert _read(storage, fs, filter=pc.field("part") == "p2", constants=constants).num_rows == 0
    only_part = pa.schema([SCHEMA.field("part")])
    counted = _read(storage, fs, schema=only_part, constants=constants)
    assert counted.num_rows == ROWS and counted.column_names == ["part"]


def test_read_through_fsspec(tmp_path):
    """A table on a registered (non-local) filesystem is read through its file objects."""
    register()
    fs = _write_orc(tmp_path, rows=100)
    CountingFileSystem.calls.clear()
    storage = Storage(f"countfs://{tmp_path}")
    assert storage.arrow_filesystem() is None
    assert _read(storage, fs, schema=SCHEMA.remove(2))["id"].to_pylist() == list(range(100))
    assert ("open", f"{tmp_path}/p1/{fs.base_file.name}") in CountingFileSystem.calls


def test_a_damaged_file_is_refused_by_name(tmp_path):
    fs = _write_orc(tmp_path, rows=100)
    path = tmp_path / "p1" / fs.base_file.name
    path.write_bytes(b"not an orc file at all" * 10)
    with pytest.raises(CorruptTableError, match="cannot decode ORC base file"):
        read_orc_footer(Storage(str(tmp_path)), "p1/" + fs.base_file.name)
