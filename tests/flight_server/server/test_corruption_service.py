"""Damaged tables through a real server: a corrupt metadata-table block falls back to storage
listing (all rows served); corrupt data log blocks skipped as Hudi skips them are told to the
client, which warns, not only written to the server log."""

from __future__ import annotations

import json
import re
import shutil
import warnings

import pyarrow.flight as flight
import pytest

from catalog import HudiTable
from catalog.errors import CorruptBlockWarning, MetadataTableFallbackWarning
from flight_server.client.session import connect
from flight_server.protocol import pack, sql
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from tests.catalog.test_corruption import LAST_MDT_LOG, truncated_mdt_copy
from tests.support.compare import assert_same_rows
from tests.support.servers import running_server


def _serve(path, tmp_path):
    registry = Registry("sqlite://")
    registry.register_table("bad.t", str(path))
    return running_server(ServerConfig(port=0, state_dir=str(tmp_path / "state")), registry=registry)


def test_truncated_mdt_log_served_in_full(external_table, tmp_path):
    path = truncated_mdt_copy(external_table, tmp_path)
    expected = HudiTable.open(str(path), use_metadata_table=False).read()
    with _serve(path, tmp_path) as server, connect(f"127.0.0.1:{server.port}") as client:
        # the server plans in this process: its fallback warning is seen here
        with pytest.warns(MetadataTableFallbackWarning, match=re.escape(LAST_MDT_LOG)):
            served = client.read("bad.t")
    assert sorted(served["price"].to_pylist()) == [101.0, 102.0, 201.0, 202.0]
    assert_same_rows(served, expected, "served after fallback")


@pytest.mark.parametrize("limit", [None, 100], ids=["split tickets", "limit ticket"])
def test_skipped_corrupt_data_block_reaches_the_client(fixture_table, tmp_path, limit):
    """Per-split tickets read on the stream's thread; a ``limit`` query gets one ticket for the
    whole query, read by worker threads whose notes are relayed to the stream."""
    path = tmp_path / "t"
    shutil.copytree(fixture_table("sample_table/mor/parquet/v6_nonpartitioned"), path)
    (log,) = [p for p in path.iterdir() if ".log." in p.name]
    log.write_bytes(log.read_bytes()[:-100])  # a writer crashed mid-block
    table = HudiTable.open(str(path))
    with pytest.warns(CorruptBlockWarning):
        expected = table.read()
    with _serve(path, tmp_path) as server, connect(f"127.0.0.1:{server.port}") as client:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            served = client.read("bad.t", limit=limit)
    client_side = [str(w.message) for w in seen if str(w.message).startswith("server skipped")]
    assert client_side and all(log.name in m and "corrupt log block" in m for m in client_side), seen
    assert not any(str(tmp_path) in m for m in client_side), client_side  # the table's path only, never the server's
    assert all(issubclass(w.category, CorruptBlockWarning) for w in seen if str(w.message) in client_side)
    assert_same_rows(served, expected, "corrupt block skipped")
    assert_same_rows(served, table.read(query_type="read_optimized"), "as read-optimized")


@pytest.mark.parametrize("query", [
    "SELECT count(*) AS n FROM bad.t WHERE _hoodie_record_key IS NOT NULL",
    "SELECT * FROM bad.t ORDER BY _hoodie_record_key",
], ids=["aggregate", "sorted rows"])
def test_skipped_corrupt_data_block_reaches_flight_sql_clients(fixture_table, tmp_path, query):
    """The engine reads the table on its own threads; the notes still reach the stream's
    ``app_metadata`` (``{"corrupt_blocks": [...]}``), as on the JSON path."""
    path = tmp_path / "t"
    shutil.copytree(fixture_table("sample_table/mor/parquet/v6_nonpartitioned"), path)
    (log,) = [p for p in path.iterdir() if ".log." in p.name]
    log.write_bytes(log.read_bytes()[:-100])
    with _serve(path, tmp_path) as server:
        client = flight.connect(f"grpc://127.0.0.1:{server.port}")
        command = flight.FlightDescriptor.for_command(pack(sql.CommandStatementQuery(query=query)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CorruptBlockWarning)
            info = client.get_flight_info(command)
            reader = client.do_get(info.endpoints[0].ticket)
            notes = []
            while True:
                try:
                    chunk = reader.read_chunk()
                except StopIteration:
                    break
                if chunk.app_metadata is not None:
                    notes.extend(json.loads(chunk.app_metadata.to_pybytes())["corrupt_blocks"])
        client.close()
    assert notes and all(log.name in n and "corrupt log block" in n for n in notes), notes
    assert not any(str(tmp_path) in n for n in notes), notes
    assert len(notes) == len(set(notes))  # told once


def test_a_log_file_changed_since_listing_is_read_as_storage_holds_it(fixture_table, tmp_path):
    """A log file shorter than the listing the server keeps: the listed size is a hint, the file
    is read by the size storage tells, its cut block reported to the client (naming the file), on
    split tickets and on one ticket for the whole scan."""
    path = tmp_path / "t"
    shutil.copytree(fixture_table("sample_table/mor/parquet/v6_nonpartitioned"), path)
    (log,) = [p for p in path.iterdir() if ".log." in p.name]
    with _serve(path, tmp_path) as server, connect(f"127.0.0.1:{server.port}") as client:
        assert client.read("bad.t").num_rows == HudiTable.open(str(path)).read().num_rows  # listed and kept
        log.write_bytes(log.read_bytes()[:-100])
        with pytest.warns(CorruptBlockWarning):
            expected = HudiTable.open(str(path)).read()
        for limit in (None, 1000):  # split tickets; one ticket for the whole scan
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                served = client.read("bad.t", limit=limit)
            told = [str(w.message) for w in seen if str(w.message).startswith("server skipped")]
            assert told and all(log.name in m and "corrupt log block" in m for m in told), told
            assert_same_rows(served, expected, f"limit {limit}")
