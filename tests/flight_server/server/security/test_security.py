"""The attacks of the security issue, each refused by a real server on 127.0.0.1: storage
confinement of ``register-table``, no leaks in errors, bounded work, private state files."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

from catalog.plan.splits import FooterCache, RowGroupLayout
from catalog.storage import Storage
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.security.policy import StoragePolicy, StoragePolicyError
from tests.support.auth import admin_client
from tests.support.servers import running_server

SECRET = "cd" * 32
SIMPLE = "sample_table/cow/v6_nonpartitioned"
LEAKS = ("Traceback", 'File "', "/work/", "site-packages", ".py")


def _action(client: flight.FlightClient, name: str, body: dict | bytes | None = None):
    raw = body if isinstance(body, bytes) else json.dumps(body or {}).encode()
    return json.loads(next(iter(client.do_action(flight.Action(name, raw)))).body.to_pybytes())


def _assert_clean(err: BaseException) -> None:
    text = str(err)
    assert not any(leak in text for leak in LEAKS), text


@pytest.fixture(scope="module")
def root(fixture_table) -> Path:
    """The allowed root: the folder holding the extracted fixture tables."""
    return Path(fixture_table(SIMPLE)).parents[2]


@pytest.fixture(scope="module")
def server(tmp_path_factory, root):
    state = tmp_path_factory.mktemp("state-sec") / "state"
    config = ServerConfig(port=0, state_dir=str(state), allowed_roots=[str(root)], max_filters=100,
                          max_in_values=1000, max_json_depth=16, max_properties_bytes=1024)
    with running_server(config) as srv:
        yield srv


def _refused(client, body: dict, match: str) -> None:
    with pytest.raises(pa.ArrowInvalid, match=match) as info:
        _action(client, "register-table", body)
    _assert_clean(info.value)


# -- 1. storage confinement ------------------------------------------------------------------


def test_register_under_an_allowed_root_still_works(client, fixture_table):
    reg = _action(client, "register-table", {"table": "ok.t", "uri": fixture_table(SIMPLE)})
    assert reg["table_type"] == "COPY_ON_WRITE"
    assert _action(client, "unregister-table", {"table": "ok.t"})["unregistered"]


def test_info_and_listing_redact_secret_looking_properties(client, fixture_table):
    properties = {"fs.s3a.secret.key": "s3a-secret", "hoodie.datasource.hive_sync.password": "pw", "owner": "ops"}
    _action(client, "register-table", {"table": "ok.props", "uri": fixture_table(SIMPLE), "properties": properties})
    try:
        info = _action(client, "table-info", {"table": "ok.props"})
        listed = next(t for t in _action(client, "list-tables") if t["table"] == "ok.props")
        shown = {"fs.s3a.secret.key": "<redacted>", "hoodie.datasource.hive_sync.password": "<redacted>", "owner": "ops"}
        assert info["properties"] == listed["properties"] == shown
    finally:
        _action(client, "unregister-table", {"table": "ok.props"})


@pytest.mark.parametrize("table, match", [
    ("ns.a\x00b", "outside NAME_CHARACTERS"),
    ("ns.evil\u202etxt", "outside NAME_CHARACTERS"),
    ("ns.a\u2066b", "outside NAME_CHARACTERS"),
    ("ns.tr\u0456ps", "outside NAME_CHARACTERS"),  # a Cyrillic i: reads as ns.trips
    ("\u0455ales.trips", "outside NAME_CHARACTERS"),  # a Cyrillic s in the namespace
    ("ns.trips.v2", "not of the form"),
    ("ns.a\nb", "not of the form"),
    ("ns." + "x" * 5000, "at most 255 characters"),
    ("n" * 256 + ".t", "at most 255 characters"),
])
def test_register_refuses_unacceptable_names(client, fixture_table, table, match):
    _refused(client, {"table": table, "uri": fixture_table(SIMPLE)}, match)
    assert not any(t["table"] == table for t in _action(client, "list-tables"))


def test_reference_filesystem_is_refused(client, tmp_path):
    secret = tmp_path / "secret.parquet"
    pq.write_table(pa.table({"ssn": ["123-45-6789"]}), secret)
    refs = {"version": 1, "refs": {"x.parquet": [str(secret)]}}
    _refused(client, {"table": "a.ref", "uri": "reference://", "storage_options": {"fo": refs}}, "reference")


def test_chained_caching_filesystem_is_refused_and_writes_nothing(client, fixture_table, tmp_path):
    target = tmp_path / "written-by-client"
    uri = f"simplecache::file://{fixture_table(SIMPLE)}"
    body = {"table": "a.cache", "uri": uri, "storage_options": {"simplecache": {"cache_storage": str(target)}}}
    _refused(client, body, "chained")
    _refused(client, {"table": "a.cache", "uri": f"simplecache://{fixture_table(SIMPLE)}"}, "simplecache")
    assert not target.exists()


def test_http_and_ftp_are_refused_without_connecting(client):
    with socket.socket() as silent:  # a peer that accepts and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        for uri in (f"http://127.0.0.1:{port}/t", f"https://127.0.0.1:{port}/t", f"ftp://127.0.0.1:{port}/t"):
            started = time.monotonic()
            _refused(client, {"table": "a.net", "uri": uri}, "not allowed")
            assert time.monotonic() - started < 2
        silent.settimeout(0.1)
        with pytest.raises(socket.timeout):
            silent.accept()  # nobody connected


def test_client_chosen_endpoint_and_credentials_are_refused(client):
    body = {"table": "a.s3", "uri": "s3://bucket/t",
            "storage_options": {"client_kwargs": {"endpoint_url": "http://169.254.169.254"}}}
    _refused(client, body, "not under a root|storage_options")
    body = {"table": "a.s3", "uri": "s3://bucket/t", "storage_options": {"key": "AKIA", "secret": "x"}}
    _refused(client, body, "not under a root|storage_options")


def test_paths_outside_the_roots_are_refused(client, root, fixture_table, tmp_path):
    outside = tmp_path / "copy"
    shutil.copytree(fixture_table(SIMPLE), outside)
    _refused(client, {"table": "a.out", "uri": str(outside)}, "not under a root")
    _refused(client, {"table": "a.out", "uri": f"file://{outside}"}, "not under a root")
    _refused(client, {"table": "a.dots", "uri": f"{root}/../{outside.name}"}, r"'\.\.' segments")
    _refused(client, {"table": "a.rel", "uri": "relative/path"}, "absolute")
    _refused(client, {"table": "a.mem", "uri": "memory://t"}, "memory")
    link = root / "escape-link"
    link.symlink_to(outside, target_is_directory=True)
    try:
        _refused(client, {"table": "a.link", "uri": str(link)}, "not under a root")
    finally:
        link.unlink()


def test_client_storage_options_only_for_allowed_keys(tmp_path, root, fixture_table):
    config = ServerConfig(port=0, state_dir=str(tmp_path / "s"), allowed_roots=[str(root)],
                          client_storage_option_keys=["auto_mkdir"])
    with running_server(config) as srv, admin_client(srv) as c:
        _refused(c, {"table": "a.b", "uri": fixture_table(SIMPLE), "storage_options": {"secret": "s3cr3t"}},
                 "secret")
        _action(c, "register-table", {"table": "a.b", "uri": fixture_table(SIMPLE),
                                      "storage_options": {"auto_mkdir": False}})
        assert srv.app.registry.load_table("a.b").storage_options == {"auto_mkdir": False}
        listed = _action(c, "list-tables")
        assert "storage_options" not in json.dumps(listed)
    db = (tmp_path / "s" / "catalog.db").read_bytes()
    assert b"s3cr3t" not in db


def test_credentials_come_from_the_server_per_root():
    policy = StoragePolicy(roots=["s3://bucket/tables/"], root_storage_options={
        "s3://bucket/": {"key": "A"}, "s3a://bucket/tables": {"key": "B", "endpoint_url": "http://minio"}})
    uri, stored = policy.check("s3a://bucket/tables//x/./t/")
    assert (uri, stored) == ("s3://bucket/tables/x/t", {})
    assert policy.options_for(uri, stored) == {"key": "B", "endpoint_url": "http://minio"}
    assert policy.options_for("s3://bucket/other/t", {}) == {"key": "A"}
    with pytest.raises(StoragePolicyError, match="not under a root"):
        policy.check("s3://bucket/tablesX/t")
    with pytest.raises(StoragePolicyError, match="protocol 'gs' is not allowed"):
        StoragePolicy(roots=["gs://b/"], protocols=["s3"]).check("gs://b/t")


def test_catalog_rows_outside_the_roots_are_refused_when_opened(root, fixture_table, tmp_path):
    """Rows written before the confinement (straight into the database) are not read."""
    outside = tmp_path / "outside"
    shutil.copytree(fixture_table(SIMPLE), outside)
    registry = Registry("sqlite://")
    registry.register_table("old.outside", str(outside))
    registry.register_table("old.options", fixture_table(SIMPLE), {"client_kwargs": {"endpoint_url": "http://x"}})
    registry.register_table("ok.inside", fixture_table(SIMPLE))
    config = ServerConfig(port=0, state_dir=str(tmp_path / "s"), allowed_roots=[str(root)])
    with running_server(config, registry=registry) as srv, admin_client(srv) as c:
        for table in ("old.outside", "old.options"):
            with pytest.raises(pa.ArrowInvalid, match=f"table {table} is registered at a location or with storage "
                                                      "options this server does not allow") as info:
                c.get_flight_info(flight.FlightDescriptor.for_path(*table.split(".")))
            assert str(outside) not in str(info.value)
            _assert_clean(info.value)
            with pytest.raises(pa.ArrowInvalid, match="an admin must register it again"):
                _action(c, "table-info", {"table": table})
        infos = {i.descriptor.path[0].decode(): i for i in c.list_flights()}
        assert set(infos) == {"ok", "old"}  # the two old rows are listed, each with its reason
        refused = [json.loads(i.app_metadata)["unreadable"] for i in c.list_flights() if i.app_metadata]
        assert len(refused) == 2 and all("this server does not allow" in r and str(outside) not in r for r in refused)
        assert not infos["ok"].app_metadata
        assert c.get_flight_info(flight.FlightDescriptor.for_path("ok", "inside")).endpoints


def test_warehouse_discovery_does_not_store_the_warehouse_credentials(tmp_path, root):
    registry = Registry(f"sqlite:///{tmp_path / 'c.db'}")
    registry.discover(str(root), {"auto_mkdir": False}, store_options=False)
    assert registry.list_tables() and all(dict(e.storage_options) == {} for e in registry.list_tables())


# -- 3. no leaks -----------------------------------------------------------------------------


def test_errors_carry_no_traceback_or_server_paths(client):
    cases = [
        (lambda: client.get_flight_info(flight.FlightDescriptor.for_command(b"{not json")), pa.ArrowInvalid),
        (lambda: client.get_flight_info(flight.FlightDescriptor.for_path("no", "such")), pa.ArrowKeyError),
        (lambda: client.do_get(flight.Ticket(b"hf1.AAAA.BBBB")).read_all(), flight.FlightUnauthenticatedError),
        (lambda: _action(client, "no-such-action"), pa.ArrowNotImplementedError),
        (lambda: _action(client, "register-table", {"table": "x"}), pa.ArrowInvalid),
        (lambda: _action(client, "table-info", {"table": "no.such"}), pa.ArrowKeyError),
        (lambda: _exchange(client), pa.ArrowNotImplementedError),
    ]
    for call, status in cases:
        with pytest.raises(status) as info:
            call()
        _assert_clean(info.value)


def _exchange(client: flight.FlightClient) -> None:
    writer, reader = client.do_exchange(flight.FlightDescriptor.for_command(b"{}"))
    with writer:
        reader.read_all()


def test_catalog_database_errors_hide_statement_and_parameters(client, server, monkeypatch):
    def broken(*args, **kwargs):
        raise sa.exc.OperationalError("UPDATE hudi_flight_tables SET storage_options=?",
                                      ('{"secret": "WAREHOUSE-SECRET-KEY"}',), Exception("database or disk is full"))

    monkeypatch.setattr(server.app.registry, "load_table", broken)
    with pytest.raises(flight.FlightInternalError, match="catalog database error") as info:
        _action(client, "refresh-table", {"table": "a.b"})
    _assert_clean(info.value)
    assert "SECRET" not in str(info.value) and "UPDATE" not in str(info.value)
    # get_schema cannot send a Flight status (pyarrow); it must stay clean all the same
    with pytest.raises(pa.ArrowException, match="catalog database error") as info:
        client.get_schema(flight.FlightDescriptor.for_path("a", "b"))
    _assert_clean(info.value)
    assert "SECRET" not in str(info.value) and "UPDATE" not in str(info.value)


# -- 4. bounded work -------------------------------------------------------------------------


def _command(doc) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(json.dumps(doc).encode())


@pytest.mark.parametrize("doc, bound", [
    ({"table": "a.b", "columns": ["x" * 100] * 20_000}, "max_body_bytes"),
    ({"table": "a.b", "filters": [["x", "=", i] for i in range(5_000)]}, "max_filters"),
    ({"table": "a.b", "filters": [["x", "in", list(range(5_000))]]}, "max_in_values"),
    ({"table": "a.b", "columns": json.loads("[" * 500 + "]" * 500)}, "max_json_depth"),
])
def test_oversized_commands_are_refused_quickly(client, doc, bound):
    started = time.monotonic()
    with pytest.raises(pa.ArrowInvalid, match=f"limit {bound}") as info:
        client.get_flight_info(_command(doc))
    assert time.monotonic() - started < 2
    _assert_clean(info.value)


def test_deeply_nested_json_text_is_refused(client):
    body = b'{"table": "a.b", "columns": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(pa.ArrowInvalid, match="limit max_json_depth"):
        client.get_flight_info(flight.FlightDescriptor.for_command(body))
    with pytest.raises(pa.ArrowInvalid, match="limit max_json_depth"):
        _action(client, "register-table", b'{"table": "a.b", "uri": "/x", "properties": ' + b"[" * 900 + b"]" * 900
                + b"}")


def test_oversized_action_body_and_properties_are_refused(client, fixture_table):
    with pytest.raises(pa.ArrowInvalid, match="limit max_body_bytes"):
        _action(client, "health", b" " * (2 << 20))
    with pytest.raises(pa.ArrowInvalid, match="limit max_properties_bytes"):
        _action(client, "register-table", {"table": "a.p", "uri": fixture_table(SIMPLE), "properties": {"k": "v" * 5000}})


def test_planning_time_is_bounded(tmp_path, fixture_table):
    registry = Registry("sqlite://")
    registry.register_table("a.b", fixture_table(SIMPLE))
    config = ServerConfig(port=0, state_dir=str(tmp_path / "s"))
    with running_server(config, registry=registry) as srv, flight.connect(f"grpc://127.0.0.1:{srv.port}") as c:
        srv.app.queries.limits = type(srv.app.limits)(planning_seconds=1e-9)  # the bounds planning works within
        with pytest.raises(pa.ArrowInvalid, match="limit planning_seconds"):
            c.get_flight_info(flight.FlightDescriptor.for_path("a", "b"))


def test_footer_cache_is_bounded_in_bytes_and_keyed_by_normalised_path(tmp_path):
    for i in range(6):
        pq.write_table(pa.table({f"c{j}": [1] for j in range(50)}), tmp_path / f"f{i}.parquet")
    footer = pq.read_metadata(tmp_path / "f0.parquet")
    size = footer.serialized_size + RowGroupLayout.of(footer).memory_bytes()  # with its row-group layout
    cache = FooterCache(max_bytes=3 * (size + 512))
    storage = Storage(str(tmp_path))
    nbytes = os.path.getsize(tmp_path / "f0.parquet")
    for alias in ("f0.parquet", "./f0.parquet", "x/../f0.parquet", ".//f0.parquet"):
        cache.footer(storage, alias, nbytes)
    assert len(cache) == 1
    for i in range(6):
        cache.footer(storage, f"f{i}.parquet", os.path.getsize(tmp_path / f"f{i}.parquet"))
    assert len(cache) == 3 and cache.bytes <= cache.max_bytes


# -- 5. state files --------------------------------------------------------------------------


def test_state_files_are_private(tmp_path):
    state = tmp_path / "new" / "state"
    with running_server(ServerConfig(port=0, state_dir=str(state))):
        pass
    folders = [tmp_path / "new", state, *(Path(top) / d for top, dirs, _ in os.walk(state) for d in dirs)]
    assert state / "disk-cache" in folders
    assert {str(f): oct(stat.S_IMODE(f.stat().st_mode)) for f in folders} == {str(f): oct(0o700) for f in folders}
    for name in ("catalog.db", "ticket-secret"):
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600, name

