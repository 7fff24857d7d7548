"""A read of no columns (``columns=[]``: a count) reads only what the rows' existence needs: the
footers of copy-on-write base files, and of a merge-on-read slice's base file only the columns
its merge needs (record key, ordering field), never a data column."""

from __future__ import annotations

import posixpath
import threading

import fsspec
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

from catalog import HudiTable
from catalog.read.mor import RECORD_KEY
from hudi_generator.generator import GeneratorSpec

#: the generator's ordering (precombine) field
ORDERING = "ts"


class RangeRecordingFileSystem(LocalFileSystem):
    """``rangefs:///abs/path`` is the local file; each ranged read is recorded as ``(path, start, end)``."""

    protocol = ("rangefs",)
    reads: list[tuple[str, int | None, int | None]] = []
    _lock = threading.Lock()

    @classmethod
    def _strip_protocol(cls, path):
        path = str(path)
        if path.startswith("rangefs://"):
            path = path[len("rangefs://"):]
        return super()._strip_protocol(path)

    def cat_file(self, path, start=None, end=None, **kwargs):
        with self._lock:
            type(self).reads.append((self._strip_protocol(path), start, end))
        return super().cat_file(path, start=start, end=end, **kwargs)


@pytest.fixture
def rangefs():
    fsspec.register_implementation("rangefs", RangeRecordingFileSystem, clobber=True)
    RangeRecordingFileSystem.reads = []
    return RangeRecordingFileSystem


def _columns_read(reads, base_files: dict[str, pq.FileMetaData]) -> dict[str, set[str]]:
    """Per base file, the columns (top-level names) of the column chunks a read overlapped; the
    read of a file's tail (the footer, and whatever the footer guess took with it) aside."""
    out: dict[str, set[str]] = {}
    for path, start, end in reads:
        footer = base_files.get(path)
        if footer is None or start is None:
            continue
        size = LocalFileSystem().size(path)
        if end is None or end >= size:
            continue  # the tail: the footer
        for g in range(footer.num_row_groups):
            for j in range(footer.num_columns):
                chunk = footer.row_group(g).column(j)
                first = min(chunk.data_page_offset, chunk.dictionary_page_offset or chunk.data_page_offset)
                if first < end and start < first + chunk.total_compressed_size:
                    out.setdefault(path, set()).add(chunk.path_in_schema.split(".")[0])
    return out


def _base_files(path: str) -> dict[str, pq.FileMetaData]:
    fs = LocalFileSystem()
    return {f: pq.read_metadata(f) for f in fs.find(path) if f.endswith(".parquet") and "/.hoodie/" not in f}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_read_of_no_columns_reads_only_what_the_rows_need(generated_table, rangefs, table_type):
    spec = GeneratorSpec(rows=40_000, partitions=2, commits=3, table_type=table_type, row_group_size=5_000)
    path = generated_table(spec)
    expected = HudiTable.open(path).read(columns=["_hoodie_record_key"]).num_rows
    table = HudiTable.open(f"rangefs://{path}")
    rangefs.reads.clear()
    got = table.read(columns=[])
    assert got.num_columns == 0 and got.num_rows == expected
    base_files = _base_files(path)
    assert any(posixpath.dirname(p) for p, _, _ in rangefs.reads)  # something was read through rangefs
    read = _columns_read(rangefs.reads, base_files)
    if table_type == "COPY_ON_WRITE":
        assert read == {}  # footers only
    else:
        assert read, "a slice with logs reads its base file's keys"
        assert set().union(*read.values()) <= {RECORD_KEY, ORDERING}
