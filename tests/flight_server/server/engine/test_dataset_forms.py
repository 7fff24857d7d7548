"""Datasets sent to an engine process are pickled once each and sent to each process once (then
named by their key), and the channel that carries results and statuses stays in step across
statements that fail."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from catalog.errors import InvalidQueryError
from flight_server.server.engine.dataset_forms import DatasetForms, HeldForms
from flight_server.server.engine.sandbox import SandboxedEngine, Views
from flight_server.server.engine.settings import EngineSettings

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
    first = forms.form(dataset)
    assert forms.form(dataset) is first
    assert first.pickled == pickle.dumps(_dataset(files))


def test_every_other_dataset_gets_its_own_bytes_and_key(files):
    forms = DatasetForms()
    plain = forms.form(_dataset(files))
    others = [
        _dataset(files[:1]),
        _dataset(files, row_groups=[0, 1]),
        _dataset(files, form=ds.ParquetFileFormat(coerce_int96_timestamp_unit="ms")),
        _dataset(files, expression=pc.field("v") > 5),
    ]
    keys = {plain.key}
    for other in others:
        got = forms.form(other)
        assert got.pickled == pickle.dumps(other)
        assert got.pickled != plain.pickled
        keys.add(got.key)
    assert len(keys) == 1 + len(others)


def test_a_process_is_sent_a_dataset_until_it_answered_ok_and_told_to_drop_what_no_longer_fits(files):
    forms = DatasetForms()
    one, two = forms.form(_dataset(files)), forms.form(_dataset(files[:1]))
    three = forms.form(_dataset(files, row_groups=[0]))  # larger than ``two``
    held = HeldForms(max_bytes=one.held_bytes + three.held_bytes)
    assert held.sent(one) == (one.key, one.pickled)
    assert held.sent(one) == (one.key, one.pickled)  # not answered yet: sent whole again
    held.stored([one])
    assert held.sent(one) == (one.key, None)
    held.stored([two])
    assert held.to_drop() == []
    assert held.sent(one) == (one.key, None)  # used last: ``two`` is the one to drop next
    held.stored([three])
    assert held.to_drop() == [two.key]
    assert held.to_drop() == []  # told once
    assert held.sent(two) == (two.key, two.pickled)
    assert held.sent(one) == (one.key, None)


def test_an_engine_process_reads_each_dataset_as_sent(files):
    # scanned through Arrow, which reads a fragment's row groups only (the engine's own Parquet
    # reader is handed whole files)
    engine = SandboxedEngine(EngineSettings(memory_limit="64MB", threads=1, native_reader=False))
    try:
        def count(dataset):
            schema, batches = engine.run("SELECT count(*) AS n, sum(v) AS total FROM t", Views.of({"t": dataset}))
            return pa.Table.from_batches(list(batches), schema).to_pylist()[0]

        everything = {"n": 2 * ROWS, "total": sum(range(2 * ROWS))}
        assert count(_dataset(files)) == everything
        assert count(_dataset(files, row_groups=[1])) == {"n": 20, "total": sum(range(10, 20)) + sum(range(110, 120))}
        assert count(_dataset(files)) == everything
    finally:
        engine.stop_all()


def test_a_dataset_the_process_holds_is_named_by_its_key_and_one_it_dropped_is_sent_again(files):
    engine = SandboxedEngine(EngineSettings(memory_limit="64MB", threads=1, native_reader=False))
    try:
        def total(dataset, sql="SELECT sum(v) AS total FROM t"):
            schema, batches = engine.run(sql, Views.of({"t": dataset}))
            return pa.Table.from_batches(list(batches), schema).to_pylist()[0]["total"]

        whole, first = _dataset(files), _dataset(files[:1])
        with pytest.raises(InvalidQueryError, match="SQL engine"):
            total(whole, "SELECT no_such_column FROM t")
        (process,) = engine.processes.idle()
        whole_form = engine.datasets.form(whole)
        assert process.datasets.sent(whole_form)[1] is not None  # the statement failed: not counted as held
        assert total(whole) == sum(range(2 * ROWS))
        assert process.datasets.sent(whole_form) == (whole_form.key, None)
        assert total(whole) == sum(range(2 * ROWS))  # named by its key alone
        process.datasets.max_bytes = whole_form.held_bytes  # room for one: ``whole`` is dropped
        assert total(first) == sum(range(ROWS))
        assert process.datasets.sent(whole_form)[1] is not None
        assert total(whole) == sum(range(2 * ROWS))  # sent whole again (the process dropped it first)
        assert [p.pid for p in engine.processes.idle()] == [process.pid]
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
            engine.run("SELECT no_such_column FROM t", Views.of({"t": texts()}))
        (process,) = engine.processes.idle()
        with pytest.raises(InvalidQueryError, match="SQL engine"):  # while its result streams
            _, batches = engine.run("SELECT CAST(s AS INTEGER) AS n FROM t", Views.of({"t": texts()}))
            list(batches)
        result_schema, batches = engine.run("SELECT 41 + 1 AS answer", Views())
        assert pa.Table.from_batches(list(batches), result_schema).to_pylist() == [{"answer": 42}]
        assert [p.pid for p in engine.processes.idle()] == [process.pid]  # the same process answered
    finally:
        engine.stop_all()
