"""Metadata tables (``ns.t$timeline`` and every suffix Flight SQL serves) through the JSON command,
``get_schema`` and ``FlightDescriptor.for_path(ns, "t$timeline")``, authorized like ``ns.t``;
``columns``, ``filters`` and ``limit`` apply, any other option is refused by name."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog.hudi_table import HudiTable
from catalog.meta import META_TABLES
from flight_server.server.config import ServerConfig
from flight_server.server.security.users import Grant
from tests.support.auth import add_user, admin_client, user_client
from tests.support.servers import running_server

TABLE = "sample_table/cow/v9_txns_simple_meta"  # a name with '_' (issue 40)
NS, NAME = "lake", "v9_txns_simple_meta"
OTHER = "sample_table/mor/avro/v9_txns_simple_meta"


@pytest.fixture(scope="module")
def server(fixture_table, tmp_path_factory):
    from flight_server.server.registry import Registry

    registry = Registry("sqlite://")
    registry.register_table(f"{NS}.{NAME}", fixture_table(TABLE))
    registry.register_table("secret.other", fixture_table(OTHER))
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("state")), secret="ef" * 32)
    with running_server(config, registry=registry) as srv:
        add_user(srv, "reader", "reader-password")
        srv.app.users.grant("reader", Grant.parse("read", f"{NS}.{NAME}"))
        yield srv


@pytest.fixture(scope="module")
def client(server):
    with admin_client(server) as c:
        yield c


@pytest.fixture(scope="module")
def table(fixture_table) -> HudiTable:
    return HudiTable.open(fixture_table(TABLE))


def _command(**doc) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(json.dumps(doc))


def _read(client, info: flight.FlightInfo) -> pa.Table:
    (endpoint,) = info.endpoints  # a metadata table is one endpoint
    return client.do_get(endpoint.ticket).read_all()


def _rows(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=repr)


@pytest.mark.parametrize("suffix", sorted(META_TABLES))
def test_every_metadata_table_reads_like_the_library(client, table, suffix):
    expected = table.metadata_table(suffix)
    info = client.get_flight_info(_command(table=f"{NS}.{NAME}${suffix}"))
    assert info.schema == expected.schema
    assert len(info.endpoints) == 1 and info.total_records == expected.num_rows
    metadata = json.loads(info.endpoints[0].app_metadata)
    assert metadata["weight"] == 1.0 and metadata["estimated_rows"] == expected.num_rows
    assert {"bytes", "partition", "file_ids"} <= metadata.keys()
    got = _read(client, info)
    if suffix in ("health", "archived_timeline"):  # ages and paths measured at each read
        assert got.schema == expected.schema and got.num_rows == expected.num_rows
    else:
        assert _rows(got) == _rows(expected)


def test_a_path_descriptor_and_get_schema_name_a_metadata_table(client, table):
    expected = table.metadata_table("timeline")
    path = flight.FlightDescriptor.for_path(NS, f"{NAME}$timeline")
    assert client.get_schema(path).schema == expected.schema
    assert _rows(_read(client, client.get_flight_info(path))) == _rows(expected)


def test_columns_filters_and_limit_apply(client, table):
    timeline = table.metadata_table("timeline")
    commits = [r for r in timeline.to_pylist() if r["action"] == "commit"]
    assert len(commits) > 2
    descriptor = _command(table=f"{NS}.{NAME}$timeline", columns=["state", "action"],
                          filters=[["action", "=", "commit"]], limit=2)
    assert client.get_schema(descriptor).schema.names == ["state", "action"]
    info = client.get_flight_info(descriptor)
    got = _read(client, info)
    assert got.schema.names == ["state", "action"] and info.total_records == got.num_rows == 2
    assert set(got["action"].to_pylist()) == {"commit"}
    counted = _read(client, client.get_flight_info(_command(table=f"{NS}.{NAME}$timeline", columns=[])))
    assert counted.num_columns == 0 and counted.num_rows == timeline.num_rows


@pytest.mark.parametrize("option, value", [
    ("as_of", "20250101000000000"), ("query_type", "read_optimized"), ("query_type", "incremental"),
])
def test_other_options_are_refused_by_name(client, option, value):
    with pytest.raises(pa.ArrowInvalid, match=f"'{option}' does not apply to the metadata table"):
        client.get_flight_info(_command(table=f"{NS}.{NAME}$commits", **{option: value}))
    with pytest.raises(pa.ArrowException, match=f"'{option}' does not apply"):
        client.get_schema(_command(table=f"{NS}.{NAME}$commits", **{option: value}))


def test_bad_columns_filters_and_suffixes_are_refused(client):
    with pytest.raises(pa.ArrowInvalid, match="'nope'"):
        client.get_flight_info(_command(table=f"{NS}.{NAME}$timeline", columns=["nope"]))
    with pytest.raises(pa.ArrowInvalid, match="'nope'"):
        client.get_flight_info(_command(table=f"{NS}.{NAME}$timeline", filters=[["nope", "=", 1]]))
    with pytest.raises(pa.ArrowKeyError, match="not registered|not found"):
        client.get_flight_info(_command(table=f"{NS}.{NAME}$nosuchthing"))


def test_authorized_like_the_table(server):
    with user_client(server.port, "reader", "reader-password") as reader:
        assert _read(reader, reader.get_flight_info(_command(table=f"{NS}.{NAME}$properties"))).num_rows > 0
        for name in ("secret.other$timeline", "secret.missing$timeline"):  # not yours and missing: one answer
            with pytest.raises(flight.FlightUnauthorizedError):
                reader.get_flight_info(_command(table=name))
        ticket = None
        with admin_client(server) as admin:
            ticket = admin.get_flight_info(_command(table="secret.other$timeline")).endpoints[0].ticket
        with pytest.raises(flight.FlightUnauthorizedError):
            reader.do_get(ticket).read_all()  # a ticket of another user, on a table it may not read
