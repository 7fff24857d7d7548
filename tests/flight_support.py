"""Shared helpers of the Flight tests: a fixture warehouse, a server on a free port, row comparison."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import pyarrow as pa

from catalog.registry import Registry
from flight_server.config import ServerConfig
from flight_server.service import HudiFlightServer
from tests.fixtures import all_table_names


def identifier(name: str) -> str:
    """``sample_table/mor/avro/v9_x`` -> ``sample_table_mor_avro.v9_x`` (unique per fixture)."""
    folder, _, table = name.rpartition("/")
    return f"{folder.replace('/', '_')}.{table}"


def register_fixtures(registry: Registry, fixture_table) -> dict[str, str]:
    """Register every fixture table; returns identifier -> base path."""
    out = {}
    for name in all_table_names():
        path = fixture_table(name)
        registry.register_table(identifier(name), path)
        out[identifier(name)] = path
    return out


@contextlib.contextmanager
def running_server(config: ServerConfig, registry: Registry | None = None, **kwargs) -> Iterator[HudiFlightServer]:
    """A server on a free port, serving on a background thread until the block exits."""
    server = HudiFlightServer(config, registry=registry, **kwargs)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        thread.join(10)


def rows(table: pa.Table) -> list[str]:
    """Rows as sorted strings: equality regardless of row order (test tables are small)."""
    return sorted(repr(r) for r in zip(*(c.to_pylist() for c in table.columns)))


def assert_same_rows(got: pa.Table, expected: pa.Table) -> None:
    assert got.schema.names == expected.schema.names
    assert [f.type for f in got.schema] == [f.type for f in expected.schema]
    assert got.num_rows == expected.num_rows
    assert rows(got) == rows(expected)
