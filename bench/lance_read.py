"""Lance base files (Hudi 1.2): our reader against pylance alone, and Lance against Parquet,
on local storage and through fsspec (an in-memory store standing in for a remote or
caller-registered filesystem).

One data set per size (``quick`` 200k rows, ``full`` 2M rows; an id, three doubles, two strings
and a 32-float VECTOR column), written once as a Lance 2.0 file (pylance, the version Hudi 1.2
writes) and a Parquet file (pyarrow, 128k-row row groups). Reported per route (local, fsspec)
and per read (every column, one double column): median wall time, and for fsspec the bytes
fetched from storage (``benchmem://``: an in-memory store metering every byte read, ranged or
through a file object). On the fsspec route a Lance file's metadata and the pages of the
columns read are fetched into a temporary copy (pylance reads only through its own object
store); Parquet reads the column chunks it needs through a file object.
``python -m bench.lance_read [quick|full]`` prints the rows.
"""

from __future__ import annotations

import sys
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.memory import MemoryFileSystem

from bench.common import check_size, measure, row, table_dir
from catalog.format.base_file import BaseFileRead
from catalog.format.lance import lance_file_module, read_lance
from catalog.format.parquet import read_parquet
from catalog.storage import Storage

ROWS = {"quick": 200_000, "full": 2_000_000}
REPEATS = {"quick": 5, "full": 3}
DIM = 32


def _data(rows: int) -> pa.Table:
    rng = np.random.default_rng(7)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * DIM, dtype=np.float32)), DIM)
    return pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "a": rng.random(rows), "b": rng.random(rows), "c": rng.random(rows),
        "city": pa.array(rng.choice(["sf", "sao_paulo", "chennai"], rows)),
        "note": pa.array([f"note-{i % 997}" for i in range(rows)]),
        "emb": vectors,
    })


def _files(size: str) -> tuple[str, pa.Schema]:
    folder = table_dir("lance_read", size)
    lance_path, parquet_path = folder / "data.lance", folder / "data.parquet"
    if not lance_path.exists() or not parquet_path.exists():
        data = _data(ROWS[size])
        with lance_file_module().LanceFileWriter(str(lance_path), version="2.0") as writer:  # as Hudi 1.2 writes
            writer.write_batch(data)
        pq.write_table(data, parquet_path, row_group_size=128 * 1024)
    return str(folder), pq.read_schema(parquet_path)


class _CountedFile:
    """A file object that adds the bytes read through it to :attr:`MeteredMemoryFileSystem.read_bytes`."""

    def __init__(self, inner: Any):
        self._inner = inner

    def read(self, n: int = -1) -> bytes:
        data = self._inner.read(n)
        MeteredMemoryFileSystem.read_bytes += len(data)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __enter__(self) -> "_CountedFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.close()


class MeteredMemoryFileSystem(MemoryFileSystem):
    """``benchmem://``: fsspec's in-memory store, counting every byte read (ranged reads and
    reads through file objects alike), so both formats' fetched bytes are measured the same way."""

    protocol = "benchmem"
    read_bytes = 0

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        if path.startswith("benchmem://"):
            path = path[len("benchmem://"):]
        return super()._strip_protocol(path)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        data = super().cat_file(path, start=start, end=end, **kwargs)
        MeteredMemoryFileSystem.read_bytes += len(data)
        return data

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        return _CountedFile(super()._open(path, mode, **kwargs))


def _to_memory(folder: str) -> str:
    fsspec.register_implementation("benchmem", MeteredMemoryFileSystem, clobber=True)
    memory = fsspec.filesystem("benchmem")
    for name in ("data.lance", "data.parquet"):
        with open(f"{folder}/{name}", "rb") as src:
            memory.pipe_file(f"/bench-lance/{name}", src.read())
    return "benchmem://bench-lance"


def _rows(batches) -> int:
    return sum(b.num_rows for b in batches)


def run(size: str) -> list[dict]:
    size = check_size(size)
    folder, schema = _files(size)
    one = pa.schema([schema.field("a")])
    params = {"rows": ROWS[size], "vector_dim": DIM}
    out = []
    lance_file = lance_file_module()
    native = measure(lambda: lance_file.LanceFileReader(f"{folder}/data.lance").read_all().to_table(),
                     repeat=REPEATS[size])
    out.append(row(f"lance_read/{ROWS[size]:,} rows local, all columns", "pylance alone", "median wall time",
                   native.median, "s", repeats=native.repeats, params=params))
    for route, uri in (("local", folder), ("fsspec", _to_memory(folder))):
        storage = Storage(uri)
        for label, wanted in (("all columns", schema), ("one column", one)):
            name = f"lance_read/{ROWS[size]:,} rows {route}, {label}"
            readers = {
                "hudi-flight lance": lambda w=wanted, s=storage: _rows(read_lance(s, BaseFileRead("data.lance", w))),
                "hudi-flight parquet": lambda w=wanted, s=storage: _rows(read_parquet(
                    s, BaseFileRead("data.parquet", w))),
            }
            for competitor, fn in readers.items():
                if fn() != ROWS[size]:
                    raise AssertionError(f"{competitor} read the wrong number of rows")
                MeteredMemoryFileSystem.read_bytes = 0
                fn()
                fetched = MeteredMemoryFileSystem.read_bytes
                t = measure(fn, repeat=REPEATS[size])
                out.append(row(name, competitor, "median wall time", t.median, "s", repeats=t.repeats,
                               params=params))
                if route == "fsspec":
                    out.append(row(name, competitor, "bytes fetched", fetched, "bytes", params=params))
    return out


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:<48} {r['competitor']:<20} {r['metric']:<17} {r['value']:.4g} {r['unit']}")
