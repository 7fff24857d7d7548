"""Datasets sent to an engine process are pickled once each, and the channel that carries results
and statuses stays in step across statements that fail."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from catalog.errors import InvalidQueryError
from flight_server.server.sql.dataset_forms import DatasetForms
from flight_server.server.sql.engine import EngineSettings
from flight_server.server.sql.sandbox import SandboxedEngine

ROWS = 100


@pytest.fixture
def files(tmp_path):
    """Two Parquet files of ``ROWS`` rows each, in row groups of 10."""
    paths = []
    for i in range(2):
        path = str(tmp_path / f"part-{i}.parquet")
        pq.write_table(pa.table({"v": list(range(i * ROWS, (i + 1) * ROWS))}), path, row_group_size=10)
        paths.append(path)
    return paths


def _dataset(paths, row_groups=None, form=None, expression=None):
    form = form or ds.ParquetFileFormat()
    local = pafs.LocalFileSystem()
    fragments = [form.make_fragment(p, local, expression, row_groups) for p in paths]
    return ds.FileSystemDataset(fragments, pa.schema([("v", pa.int64())]), form, local)


def test_a_dataset_is_pickled_once(files):
    forms = DatasetForms()
    dataset = _dataset(files)
    first = forms.pickled(dataset)
    assert forms.pickled(dataset) is first
    assert first == pickle.dumps(_dataset(files))


def test_every_other_dataset_gets_its_own_bytes(files):
    forms = DatasetForms()
    plain = forms.pickled(_dataset(files))
    others = [
        _dataset(files[:1]),
        _dataset(files, row_groups=[0, 1]),
        _dataset(files, form=ds.ParquetFileFormat(coerce_int96_timestamp_unit="ms")),
        _dataset(files, expression=pc.field("v") > 5),
    ]
    for other in others:
        got = forms.pickled(other)
        assert got == pickle.dumps(other)
        assert got != plain


def test_an_engine_process_reads_each_dataset_as_sent(files):
    # scanned through Arrow, which reads a fragment's row groups only (the engine's own Parquet
    # reader is handed whole files)
    engine = SandboxedEngine(EngineSettings(memory_limit="64MB", threads=1, native_reader=False))
    try:
        def count(dataset):
            schema, batches = engine.run("SELECT count(*) AS n, sum(v) AS total FROM t", {"t": dataset})
            return pa.Table.from_batches(list(batches), schema).to_pylist()[0]

        everything = {"n": 2 * ROWS, "total": sum(range(2 * ROWS))}
        assert count(_dataset(files)) == everything
        assert count(_dataset(files, row_groups=[1])) == {"n": 20, "total": sum(range(10, 20)) + sum(range(110, 120))}
        assert count(_dataset(files)) == everything
    finally:
        engine.stop_all()


def test_failed_statements_leave_the_channel_in_step():
    engine = SandboxedEngine(EngineSettings(memory_limit="64MB", threads=1))
    schema = pa.schema([("s", pa.string())])

    def texts():
        numbers = pa.record_batch([pa.array([str(i) for i in range(5000)])], schema=schema)
        return pa.RecordBatchReader.from_batches(
            schema, [numbers, pa.record_batch([pa.array(["not a number"])], schema=schema)])

    try:
        with pytest.raises(InvalidQueryError, match="SQL engine"):  # before the result has a schema
            engine.run("SELECT no_such_column FROM t", {"t": texts()})
        (process,) = engine.processes.idle()
        with pytest.raises(InvalidQueryError, match="SQL engine"):  # while its result streams
            _, batches = engine.run("SELECT CAST(s AS INTEGER) AS n FROM t", {"t": texts()})
            list(batches)
        result_schema, batches = engine.run("SELECT 41 + 1 AS answer", {})
        assert pa.Table.from_batches(list(batches), result_schema).to_pylist() == [{"answer": 42}]
        assert [p.pid for p in engine.processes.idle()] == [process.pid]  # the same process answered
    finally:
        engine.stop_all()
