"""Fixtures of the server tests: a plain pyarrow.flight client of the module's ``server``,
authenticated as the admin user (``tests.support.auth``), and one Flight SQL test server for the
session with every fixture table registered (the Flight SQL and SQL rooms' tests share it)."""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as adbc
import pytest

from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from tests.support.auth import admin_client
from tests.support.servers import register_fixtures, running_server

SECRET = "cd" * 32


@pytest.fixture(scope="module")
def client(server):
    """A stock ``pyarrow.flight`` client of the module's ``server`` fixture, logged in as admin."""
    c = admin_client(server)
    yield c
    c.close()


@pytest.fixture(scope="session")
def sql_tables(fixture_table):
    registry = Registry("sqlite://")
    return registry, register_fixtures(registry, fixture_table)


@pytest.fixture(scope="session")
def sql_server(sql_tables, tmp_path_factory):
    registry, _ = sql_tables
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("fsql-state")), secret=SECRET,
                          sql_memory_limit="512MB", sql_threads=1)
    with running_server(config, registry=registry) as srv:
        yield srv


@pytest.fixture(scope="session")
def adbc_conn(sql_server):
    conn = adbc.connect(f"grpc://127.0.0.1:{sql_server.port}", autocommit=True)
    yield conn
    conn.close()


@pytest.fixture
def cursor(adbc_conn):
    cur = adbc_conn.cursor()
    yield cur
    cur.close()
