"""Flight SQL through the real ADBC driver against a secured server: TLS, a user logging in with
a password (the driver's basic-auth handshake), grants deciding what SQL may read and list."""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as adbc
import adbc_driver_manager
import pytest

from catalog.hudi_table import HudiTable
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.security.users import Grant
from tests.support.auth import add_user
from tests.support.compare import assert_same_rows
from tests.support.servers import identifier, running_server

GRANTED = "sample_table/cow/v9_txns_simple_meta"
OTHER = "sample_table/mor/avro/v9_txns_simple_meta"
PASSWORD = "reader-password"


@pytest.fixture(scope="module")
def secure_server(fixture_table, pki, tmp_path_factory):
    ca, _ = pki
    registry = Registry("sqlite://")
    paths = {}
    for name in (GRANTED, OTHER):
        paths[identifier(name)] = fixture_table(name)
        registry.register_table(identifier(name), paths[identifier(name)])
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("fsql-secure")), secret="ab" * 32,
                          tls_cert=str(ca.server_cert), tls_key=str(ca.server_key), sql_threads=1)
    with running_server(config, registry=registry) as srv:
        add_user(srv, "reader", PASSWORD)
        srv.app.users.grant("reader", Grant.parse("read", identifier(GRANTED)))
        srv.app.access.forget()
        yield srv, paths


def _connect(server, pki, **credentials) -> adbc.Connection:
    ca, _ = pki
    kwargs = {"adbc.flight.sql.client_option.tls_root_certs": ca.ca_cert.read_text(), **credentials}
    return adbc.connect(f"grpc+tls://127.0.0.1:{server.port}", db_kwargs=kwargs, autocommit=True)


def test_a_user_reads_granted_tables_over_tls(secure_server, pki):
    server, paths = secure_server
    with _connect(server, pki, username="reader", password=PASSWORD) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {identifier(GRANTED)}")
        assert_same_rows(cur.fetch_arrow_table(), HudiTable.open(paths[identifier(GRANTED)]).read())
        schemas = [s["db_schema_name"] for c in conn.adbc_get_objects(depth="db_schemas").read_all().to_pylist()
                   for s in c["catalog_db_schemas"]]
        assert schemas == [identifier(GRANTED).split(".")[0]]


def test_ungranted_tables_and_wrong_passwords_are_refused(secure_server, pki):
    server, _ = secure_server
    with _connect(server, pki, username="reader", password=PASSWORD) as conn, conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error, match="(?i)unauthorized|may not"):
            cur.execute(f"SELECT count(*) FROM {identifier(OTHER)}")
        with pytest.raises(adbc_driver_manager.Error, match="(?i)unauthorized|may not"):  # nor inside a join
            cur.execute(f"SELECT a.txn_id FROM {identifier(GRANTED)} a JOIN {identifier(OTHER)} b USING (txn_id)")
    with pytest.raises(adbc_driver_manager.Error, match="(?i)unauthenticated|password"):
        with _connect(server, pki, username="reader", password="wrong-password") as conn, conn.cursor() as cur:
            cur.execute(f"SELECT 1 FROM {identifier(GRANTED)}")
    with pytest.raises(adbc_driver_manager.Error, match="(?i)unauthenticated"):  # no credentials at all
        with _connect(server, pki) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT 1 FROM {identifier(GRANTED)}")
