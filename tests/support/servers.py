"""Servers for tests: a free loopback port, a server on a background thread, a fixture catalog."""

from __future__ import annotations

import contextlib
import socket
import tempfile
import threading
from typing import Iterator, Mapping

from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.service import HudiFlightServer
from tests.support.fixtures import all_table_names


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
def running_server(config: ServerConfig, registry: Registry | None = None,
                   server_class: type[HudiFlightServer] = HudiFlightServer, **kwargs) -> Iterator[HudiFlightServer]:
    """A server (of ``server_class``: a test's subclass) on a free port, serving on a background
    thread until the block exits.

    A config without ``allowed_roots`` gets the system temp folder (where pytest extracts the
    fixture tables) as its root, so tables registered straight into ``registry`` can be opened;
    tests of the storage confinement name their roots.
    """
    if not config.allowed_roots:
        tmp = tempfile.gettempdir()
        test_filesystems = ["countfs", "flakyfs"]  # request-counting / failing wrappers of the tests
        config = config.updated({
            "allowed_roots": [tmp, *(f"{fs}://{tmp}" for fs in test_filesystems)],
            "allowed_protocols": [*config.allowed_protocols, *test_filesystems],
        })
    server = server_class(config, registry=registry, **kwargs)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        thread.join(10)


@contextlib.contextmanager
def serving_tables(tables: Mapping[str, str], state_dir: str, **settings) -> Iterator[HudiFlightServer]:
    """``running_server`` over ``tables`` (identifier -> base path) in an in-memory registry, with
    a test secret, one SQL thread and 256 MB for the engine unless ``settings`` say otherwise."""
    registry = Registry("sqlite://")
    for name, path in tables.items():
        registry.register_table(name, path)
    config = ServerConfig(**{"port": 0, "state_dir": state_dir, "secret": "ab" * 32, "sql_memory_limit": "256MB",
                             "sql_threads": 1, **settings})
    with running_server(config, registry=registry) as server:
        yield server
