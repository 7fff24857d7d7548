"""A server with its web console for the console's tests: Spark-written tables in two namespaces,
users with different rights, and a generated table large enough that a stream of it waits on its
client (a live query)."""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from dataclasses import dataclass

import pytest

from flight_server.server.security.users import Grant
from flight_server.server.service import HudiFlightServer
from hudi_generator.generator import COPY_ON_WRITE, GeneratorSpec
from tests.support.auth import ADMIN, ADMIN_PASSWORD, add_admin
from tests.support.servers import serving_tables
from tests.support.written import WrittenTable

TABLES = {  # identifier -> Spark-written fixture
    "sales.txns": "sample_table/cow/v9_txns_simple_meta",
    "sales.mtxns": "sample_table/mor/avro/v9_txns_simple_meta",
    "sales.logs": "sample_table/mor/parquet/v6_nonpartitioned_rollback",
}
WRITTEN = {  # identifier -> table written by Hudi's Spark writer (tests/data/tables)
    "hudi.compaction": WrittenTable("1.2.0", "mor_inline_compaction"),
    "hudi.clustering": WrittenTable("1.2.0", "cow_clustering"),
    "hudi.rollback": WrittenTable("1.2.0", "mor_rollback"),
    "hudi.cleaned": WrittenTable("1.2.0", "cow_clean_archive"),
    "hudi.restored": WrittenTable("1.2.0", "cow_savepoint_restore"),
}
BIG = GeneratorSpec(rows=200_000, partitions=1, table_type=COPY_ON_WRITE, metadata_table=False, workers=1)
ALICE, BOB, PASSWORD = "alice", "bob", "console-password"  # alice reads sales and big, bob only hudi
SCRATCH = "scratch"  # tables tests register (the admin's only: the others' views stay as they are)


@dataclass
class Console:
    server: HudiFlightServer
    url: str
    paths: dict[str, str]  # identifier -> base path

    def get(self, path: str, user: str | None = None, password: str = PASSWORD, method: str = "GET",
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
        """(status, headers, body) of a request as ``user`` (basic credentials; ``None``: none)."""
        request = urllib.request.Request(self.url + path, method=method, headers=dict(headers or {}))
        if user is not None:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), err.read().decode()


@pytest.fixture(scope="package")
def console(fixture_table, written_table, generated_table, tmp_path_factory):
    paths = {name: fixture_table(source) for name, source in TABLES.items()}
    paths.update({name: written_table(table) for name, table in WRITTEN.items()})
    paths["big.trips"] = generated_table(BIG)
    state = tmp_path_factory.mktemp("console-state")
    with serving_tables(paths, str(state), console_port=0) as server:
        add_admin(server)
        users = server.app.users
        for name in (ALICE, BOB):
            users.add_user(name, PASSWORD)
        users.grant(ALICE, Grant("read", "sales"))
        users.grant(ALICE, Grant("read", "big"))
        users.grant(BOB, Grant("read", "hudi"))
        server.app.access.forget()
        assert server.app.console is not None
        yield Console(server, f"http://127.0.0.1:{server.app.console.port}", paths)


__all__ = ["ADMIN", "ADMIN_PASSWORD", "ALICE", "BOB", "PASSWORD", "SCRATCH", "Console"]
