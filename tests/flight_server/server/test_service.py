"""The Flight service through a plain ``pyarrow.flight`` client (no project code on the client side).

One real server on a free port for the module, every fixture table registered. The invariant:
fetching every endpoint of a plan (in parallel) gives exactly ``HudiTable.read`` of the same
query (Lance base files included); where the library refuses a table the service refuses it
with the matching Flight status instead of returning rows.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog.hudi_table import HudiTable
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.security.tickets import TicketSigner
from flight_server.server.security.users import Grant
from flight_server.server.service import CANCEL_CHECK_SECONDS, HudiFlightServer
from tests.support.auth import admin_client
from tests.support.compare import assert_same_rows
from tests.support.fixtures import all_table_names, is_lance, is_mor
from tests.support.servers import identifier, running_server

SECRET = "ab" * 32
SIMPLE = "sample_table/cow/v6_nonpartitioned"


@pytest.fixture(scope="module")
def server(tables, tmp_path_factory):
    registry, _ = tables
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("state")), secret=SECRET,
                          allowed_roots=[str(tmp_path_factory.getbasetemp())])
    with running_server(config, registry=registry) as srv:
        yield srv


def _fetch_all(client: flight.FlightClient, info: flight.FlightInfo) -> pa.Table:
    with ThreadPoolExecutor(4) as pool:
        parts = list(pool.map(lambda ep: client.do_get(ep.ticket).read_all(), info.endpoints))
    return pa.concat_tables(parts) if parts else info.schema.empty_table()


def _expected(path: str, **options) -> pa.Table | Exception:
    try:
        return HudiTable.open(path).read(**options)
    except Exception as err:  # the service must refuse the same way
        return err


_STATUS = {ValueError: pa.ArrowInvalid, KeyError: pa.ArrowKeyError, NotImplementedError: pa.ArrowNotImplementedError}


def _check_plan_and_fetch(client, descriptor, expected):
    if isinstance(expected, Exception):
        status = next(v for k, v in _STATUS.items() if isinstance(expected, k))
        with pytest.raises(status, match=str(expected).split(":")[0][:40]):
            _fetch_all(client, client.get_flight_info(descriptor))
        return None
    info = client.get_flight_info(descriptor)
    assert_same_rows(_fetch_all(client, info), expected, exact_types=True)
    return info


@pytest.mark.parametrize("name", all_table_names())
def test_every_table_every_endpoint(client, tables, name):
    _, paths = tables
    ns, table = identifier(name).split(".")
    expected = _expected(paths[identifier(name)])
    assert not isinstance(expected, Exception), expected  # every fixture table is served
    info = _check_plan_and_fetch(client, flight.FlightDescriptor.for_path(ns, table), expected)
    if info is None:
        return
    assert info.total_records >= 0 and info.total_bytes >= 0
    for ep in info.endpoints:
        meta = json.loads(ep.app_metadata)
        assert 0 < meta["weight"] <= 1 and meta["bytes"] > 0 and meta["estimated_rows"] >= 0
        assert isinstance(meta["partition"], str) and len(meta["file_ids"]) == 1
        assert ep.locations == []  # "this server"
        assert ep.expiration_time is not None and ep.expiration_time.as_py().timestamp() > time.time()
    assert len({ep.ticket.ticket for ep in info.endpoints}) == len(info.endpoints)


V8 = "sample_table/cow/v8_simplekeygen_nonhivestyle"
V9 = "sample_table/cow/v9_txns_simple_meta"
MOR = "sample_table/mor/avro/v9_txns_simple_meta"
MOR_V6 = "sample_table/mor/parquet/v6_nonpartitioned"
LANCE_COW = "sample_table/cow/v9_lance_txns_simple"
LANCE_MOR = "quickstart_trips_table/mor/avro/v9_trips_lance"
QUERIES = [
    (V8, {"columns": ["id", "name"], "filters": [["id", ">", 1]]}),
    (V8, {"columns": ["name"], "filters": [["name", "in", ["Alice", "Bob"]]]}),
    (V8, {"filters": [["byteField", "=", 10]]}),  # the partition column
    (V8, {"filters": [["isActive", "is not null"], ["id", "!=", 3]]}),
    (V9, {"columns": ["txn_id", "amount"], "filters": [["region", "=", "apac"]]}),
    (V9, {"columns": ["txn_id"], "filters": [["is_international", "=", True], ["txn_ts", ">=", 1700300000007]]}),
    (V9, {"columns": ["region", "txn_id"], "filters": [["region", "not in", ["apac"]]]}),
    (V9, {"query_type": "read_optimized"}),
    (MOR, {"columns": ["txn_id", "amount"], "filters": [["region", "=", "apac"]]}),
    (MOR, {"query_type": "read_optimized", "columns": ["txn_id"]}),
    (MOR_V6, {"filters": [["id", ">=", 2]]}),
    (LANCE_COW, {"columns": ["txn_id", "amount"], "filters": [["region", "=", "apac"], ["amount", ">", "100"]]}),
    (LANCE_MOR, {"columns": ["rider", "fare"], "filters": [["fare", ">", 20.0]]}),
    (LANCE_MOR, {"query_type": "read_optimized", "columns": ["uuid", "city"]}),
]


@pytest.mark.parametrize("name, query", QUERIES)
def test_command_projection_and_filters(client, tables, name, query):
    _, paths = tables
    cmd = {"table": identifier(name), **query}
    options = {k: ([tuple(f[:2]) + (f[2] if len(f) > 2 else None,) for f in v] if k == "filters" else v)
               for k, v in query.items()}
    expected = _expected(paths[identifier(name)], **options)
    assert isinstance(expected, pa.Table), expected
    assert expected.num_rows > 0
    info = _check_plan_and_fetch(client, flight.FlightDescriptor.for_command(json.dumps(cmd)), expected)
    if "columns" in query:
        assert info.schema.names == query["columns"]


@pytest.mark.parametrize("name", [V9, MOR, MOR_V6, LANCE_COW, LANCE_MOR])
def test_time_travel_pins_instant(client, tables, name):
    path = tables[1][identifier(name)]
    first = HudiTable.open(path).timeline.commits[0].requested_time
    cmd = {"table": identifier(name), "as_of": first}
    _check_plan_and_fetch(client, flight.FlightDescriptor.for_command(json.dumps(cmd)), _expected(path, as_of=first))


@pytest.mark.parametrize("name", [V9, MOR, MOR_V6, LANCE_COW, LANCE_MOR])
def test_incremental_query(client, tables, name):
    path = tables[1][identifier(name)]
    t = HudiTable.open(path)
    first = t.timeline.commits[0]
    start = first.completion_time if t.table_version >= 8 else first.requested_time
    cmd = {"table": identifier(name), "query_type": "incremental", "start": start}
    expected = _expected(path, query_type="incremental", start=start)
    assert isinstance(expected, pa.Table) and expected.num_rows > 0
    _check_plan_and_fetch(client, flight.FlightDescriptor.for_command(json.dumps(cmd)), expected)


def test_limit_is_one_endpoint(client, tables):
    cmd = {"table": identifier(V9), "limit": 3, "columns": ["txn_id"]}
    info = client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(cmd)))
    assert len(info.endpoints) == 1
    got = _fetch_all(client, info)
    full = HudiTable.open(tables[1][cmd["table"]]).read(columns=["txn_id"])
    assert got.num_rows == 3 and set(got["txn_id"].to_pylist()) <= set(full["txn_id"].to_pylist())


def test_get_schema_and_list_flights(client, tables):
    ns, name = identifier(SIMPLE).split(".")
    schema = client.get_schema(flight.FlightDescriptor.for_path(ns, name)).schema
    assert schema == HudiTable.open(tables[1][identifier(SIMPLE)]).schema
    cmd = json.dumps({"table": identifier(SIMPLE), "columns": ["name", "id"]})
    assert client.get_schema(flight.FlightDescriptor.for_command(cmd)).schema.names == ["name", "id"]
    infos = {tuple(p.decode() for p in i.descriptor.path): i for i in client.list_flights()}
    assert (ns, name) in infos
    assert infos[(ns, name)].total_records == HudiTable.open(tables[1][identifier(SIMPLE)]).read().num_rows
    assert infos[(ns, name)].schema == schema
    # Lance tables (Hudi 1.2) are listed like the others, their row estimates from Lance footers.
    for n in (n for n in all_table_names() if is_lance(n)):
        lance_info = infos[tuple(identifier(n).split("."))]
        assert lance_info.schema == HudiTable.open(tables[1][identifier(n)]).schema
        if not is_mor(n):
            assert lance_info.total_records == HudiTable.open(tables[1][identifier(n)]).read().num_rows


# -- actions -----------------------------------------------------------------------------------


def _action(client, name, body=None):
    (result,) = client.do_action(flight.Action(name, json.dumps(body or {}).encode()))
    return json.loads(result.body.to_pybytes())


def test_list_actions(client):
    names = {a.type for a in client.list_actions()}
    assert {"list-namespaces", "list-tables", "register-table", "unregister-table", "refresh-table",
            "table-info", "health"} <= names


def test_catalog_actions(client, tables, fixture_table):
    assert identifier(SIMPLE).split(".")[0] in _action(client, "list-namespaces")
    listed = {t["table"] for t in _action(client, "list-tables", {"namespace": "sample_table_cow"})}
    assert identifier(SIMPLE) in listed and all(t.startswith("sample_table_cow.") for t in listed)
    reg = _action(client, "register-table", {"table": "extra.t", "uri": fixture_table(SIMPLE)})
    assert reg["table_type"] == "COPY_ON_WRITE" and reg["table_version"] == 6
    assert "extra.t" in {t["table"] for t in _action(client, "list-tables")}
    refreshed = _action(client, "refresh-table", {"table": "extra.t"})
    assert refreshed["latest_instant"] == HudiTable.open(fixture_table(SIMPLE)).timeline[-1].requested_time
    assert _action(client, "unregister-table", {"table": "extra.t"})["unregistered"] is True
    with pytest.raises(pa.ArrowKeyError, match="table extra.t not found"):
        client.get_flight_info(flight.FlightDescriptor.for_path("extra", "t"))
    health = _action(client, "health")
    assert health["status"] == "ok" and health["tables"] == len(all_table_names())


def test_register_non_hudi_folder_is_not_found(client, tmp_path):
    with pytest.raises(pa.ArrowKeyError, match="not"):
        _action(client, "register-table", {"table": "x.y", "uri": str(tmp_path)})


@pytest.mark.parametrize("name", ["sample_table/mor/parquet/v6_simplekeygen_hivestyle_no_metafields",
                                  "sample_table/cow/v9_txns_complex_meta"])
def test_table_info(client, tables, name):
    info = _action(client, "table-info", {"table": identifier(name)})
    t = HudiTable.open(tables[1][identifier(name)])
    assert info["table_type"] == t.table_type and info["table_version"] == t.table_version
    assert info["record_key_fields"] == t.record_key_fields
    assert info["partition_fields"] == t.partition_fields
    assert [c["name"] for c in info["schema"]] == t.schema.names
    assert pa.ipc.read_schema(pa.py_buffer(bytes.fromhex(info["arrow_schema"]))) == t.schema
    assert [i["requested_time"] for i in info["timeline"]] == [i.requested_time for i in t.timeline]
    assert all(i["completion_time"] and i["action"] for i in info["timeline"])


# -- error paths -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, error, message",
    [
        (b"{not json", pa.ArrowInvalid, "not valid UTF-8 JSON"),
        (b"\xff\xfe", pa.ArrowInvalid, "not valid UTF-8 JSON"),
        (b"[]", pa.ArrowInvalid, "invalid command"),
        (b'{"table": "a.b", "colums": ["x"]}', pa.ArrowInvalid, "'colums' was unexpected"),
        (b'{"columns": ["x"]}', pa.ArrowInvalid, "'table' is a required property"),
        (b'{"table": "nodot"}', pa.ArrowInvalid, "invalid command at table: 'nodot' is not of the form namespace.table"),
        (b'{"table": "nope.nope"}', pa.ArrowKeyError, "table nope.nope not found"),
        (b'{"table": "%s", "columns": ["nope"]}', pa.ArrowInvalid, "not in the table schema: 'nope'"),
        (b'{"table": "%s", "columns": "id"}', pa.ArrowInvalid, "at columns"),
        (b'{"table": "%s", "filters": [["id", "=", "abc"]]}', pa.ArrowInvalid, "column 'id' is int32; 'abc' is not an integer from"),
        (b'{"table": "%s", "filters": [["nope", "=", 1]]}', pa.ArrowInvalid, "nope"),
        (b'{"table": "%s", "filters": [["id", "~", 1]]}', pa.ArrowInvalid, "filters/0/1"),
        (b'{"table": "%s", "filters": [["id", "in", 1]]}', pa.ArrowInvalid, "needs a list"),
        (b'{"table": "%s", "filters": [["id", "="]]}', pa.ArrowInvalid, "needs a value"),
        (b'{"table": "%s", "query_type": "streaming"}', pa.ArrowInvalid, "query_type"),
        (b'{"table": "%s", "as_of": "yesterday"}', pa.ArrowInvalid, "as_of"),
        (b'{"table": "%s", "as_of": "2024-02-30"}', pa.ArrowInvalid, "malformed as_of '2024-02-30' .day is out of range"),
        (b'{"table": "%s", "limit": -1}', pa.ArrowInvalid, "limit"),
    ],
)
def test_bad_commands(client, body, error, message):
    if b"%s" in body:
        body = body.replace(b"%s", identifier(SIMPLE).encode())
    with pytest.raises(error, match=message):
        client.get_flight_info(flight.FlightDescriptor.for_command(body))
    with pytest.raises(error):
        client.get_schema(flight.FlightDescriptor.for_command(body))


def test_bad_path_descriptor(client):
    with pytest.raises(pa.ArrowInvalid, match="namespace, table"):
        client.get_flight_info(flight.FlightDescriptor.for_path("a", "b", "c"))


@pytest.mark.parametrize(
    "action, body, error",
    [
        ("nope", b"{}", pa.ArrowNotImplementedError),
        ("table-info", b"{}", pa.ArrowInvalid),
        ("table-info", b'{"table": "no.such"}', pa.ArrowKeyError),
        ("register-table", b'{"table": "a.b"}', pa.ArrowInvalid),
        ("list-tables", b'{"bogus": 1}', pa.ArrowInvalid),
        ("health", b"not json", pa.ArrowInvalid),
    ],
)
def test_bad_actions(client, action, body, error):
    with pytest.raises(error):
        list(client.do_action(flight.Action(action, body)))


def test_unexpected_error_is_internal_without_its_text(client, server, monkeypatch):
    """An unexpected server error reaches the client as INTERNAL, naming no exception text."""

    def broken(entry, instant=None, fresh=True):
        raise RuntimeError("secret-detail /srv/private")

    monkeypatch.setattr(server.app.queries, "open_entry", broken)
    with pytest.raises(flight.FlightInternalError) as caught:
        client.get_flight_info(flight.FlightDescriptor.for_path(*identifier(SIMPLE).split(".")))
    assert "secret-detail" not in str(caught.value) and "/srv/private" not in str(caught.value)
    assert "internal error" in str(caught.value)


def _a_ticket(client) -> bytes:
    info = client.get_flight_info(flight.FlightDescriptor.for_path(*identifier(SIMPLE).split(".")))
    return info.endpoints[0].ticket.ticket


def test_ticket_from_another_server_refused(client, tables, tmp_path):
    registry, _ = tables
    other = ServerConfig(port=0, state_dir=str(tmp_path))  # its own generated secret
    with running_server(other, registry=registry) as srv:
        foreign = admin_client(srv)
        ticket = _a_ticket(foreign)
        assert foreign.do_get(flight.Ticket(ticket)).read_all().num_rows > 0
    with pytest.raises(flight.FlightUnauthenticatedError, match="signature"):
        client.do_get(flight.Ticket(ticket)).read_all()


def test_ticket_served_by_any_server_sharing_the_secret(client, tables, tmp_path):
    registry, _ = tables
    ticket = _a_ticket(client)
    expected = client.do_get(flight.Ticket(ticket)).read_all()
    with running_server(ServerConfig(port=0, state_dir=str(tmp_path), secret=SECRET), registry=registry) as srv:
        twin = admin_client(srv)
        assert twin.do_get(flight.Ticket(ticket)).read_all().equals(expected)


@pytest.mark.parametrize("tamper", ["flip", "truncate", "garbage"])
def test_tampered_ticket_refused(client, tamper):
    ticket = bytearray(_a_ticket(client))
    if tamper == "flip":
        ticket[10] ^= 0x01
    elif tamper == "truncate":
        ticket = ticket[:-5]
    else:
        ticket = bytearray(b"hf1.eyJ0IjoiYS5iIn0.AAAA")
    with pytest.raises(flight.FlightUnauthenticatedError):
        client.do_get(flight.Ticket(bytes(ticket))).read_all()


def test_expired_ticket_refused(client, server):
    body = TicketSigner(bytes.fromhex(SECRET)).verify(_a_ticket(client))
    expired = TicketSigner(bytes.fromhex(SECRET)).sign(body, expires_at=time.time() - 1)
    with pytest.raises(flight.FlightUnauthenticatedError, match="expired"):
        client.do_get(flight.Ticket(expired)).read_all()


def test_client_disconnect_mid_stream_keeps_serving(client, server, tables):
    name = "sample_table/cow/v9_txns_simple_meta"
    info = client.get_flight_info(flight.FlightDescriptor.for_path(*identifier(name).split(".")))
    for _ in range(5):  # open streams and walk away before reading them out
        quitter = admin_client(server)
        reader = quitter.do_get(info.endpoints[0].ticket)
        reader.read_chunk()
        reader.cancel()
        quitter.close()
    expected = HudiTable.open(tables[1][identifier(name)]).read()
    assert_same_rows(_fetch_all(client, info), expected, exact_types=True)
    assert _action(client, "health")["status"] == "ok"


class _GoneClient:
    """A call context whose client has gone; counts how often it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    def is_cancelled(self) -> bool:
        self.asked += 1
        return True


def test_streams_ask_for_cancellation_only_after_a_while():
    """Asking gRPC costs a completion-queue poll: a quick stream never asks, a slow one stops."""
    batch = pa.RecordBatch.from_pylist([{"a": 1}])
    quick = _GoneClient()
    assert len(list(HudiFlightServer._until_cancelled(quick, iter([batch] * 3)))) == 3  # type: ignore[arg-type]
    assert quick.asked == 0

    def slow():
        for _ in range(3):
            yield batch
            time.sleep(CANCEL_CHECK_SECONDS * 1.2)

    gone = _GoneClient()
    assert len(list(HudiFlightServer._until_cancelled(gone, slow()))) == 1  # type: ignore[arg-type]
    assert gone.asked == 1


def test_small_splits_align_to_row_groups(tables, tmp_path):
    """With a 1-byte target every base file is cut into ranges; rows still come out once."""
    registry, paths = tables
    config = ServerConfig(port=0, state_dir=str(tmp_path), target_split_bytes=1, initial_split_count=0)
    name = "sample_table/cow/v9_txns_simple_meta"
    with running_server(config, registry=registry) as srv:
        c = admin_client(srv)
        info = c.get_flight_info(flight.FlightDescriptor.for_path(*identifier(name).split(".")))
        metas = [json.loads(ep.app_metadata) for ep in info.endpoints]
        assert all("row_groups" in m and m["weight"] == 0.05 for m in metas)
        assert_same_rows(_fetch_all(c, info), HudiTable.open(paths[identifier(name)]).read())


def test_static_bearer_token_authentication(tables, tmp_path):
    registry, paths = tables
    token = "static-token-for-the-reader"
    config = ServerConfig(port=0, state_dir=str(tmp_path), tokens={token: "token-reader"})
    with running_server(config, registry=registry) as srv:
        srv.app.users.grant("token-reader", Grant.parse("read", identifier(SIMPLE).split(".")[0]))
        c = flight.connect(f"grpc://127.0.0.1:{srv.port}")
        desc = flight.FlightDescriptor.for_path(*identifier(SIMPLE).split("."))
        with pytest.raises(flight.FlightUnauthenticatedError, match="Bearer"):
            c.get_flight_info(desc)
        bad = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer nope")])
        with pytest.raises(flight.FlightUnauthenticatedError, match="not accepted"):
            c.get_flight_info(desc, bad)
        good = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {token}".encode())])
        info = c.get_flight_info(desc, good)
        with pytest.raises(flight.FlightUnauthenticatedError):
            c.do_get(info.endpoints[0].ticket).read_all()  # a valid ticket still needs the token
        got = pa.concat_tables(c.do_get(ep.ticket, good).read_all() for ep in info.endpoints)
        assert_same_rows(got, HudiTable.open(paths[identifier(SIMPLE)]).read())
        from flight_server.client.session import connect

        with connect(f"127.0.0.1:{srv.port}", token=token) as client:
            assert client.read(identifier(SIMPLE)).num_rows == got.num_rows


@pytest.mark.parametrize("name", [V9, MOR_V6])
def test_tickets_pin_the_planned_instant(client, tables, name):
    t = HudiTable.open(tables[1][identifier(name)])
    signer = TicketSigner(bytes.fromhex(SECRET))
    snapshot = client.get_flight_info(flight.FlightDescriptor.for_path(*identifier(name).split(".")))
    for ep in snapshot.endpoints:
        scan = signer.verify(ep.ticket.ticket)["s"]
        assert scan["i"] == t.timeline.commits[-1].requested_time and "as_of" not in scan["o"]  # said once
    cmd = {"table": identifier(name), "query_type": "incremental"}
    incremental = client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(cmd)))
    last = t.timeline.commits[-1]
    pinned_end = last.completion_time if t.table_version >= 8 else last.requested_time
    assert incremental.endpoints
    assert all(signer.verify(ep.ticket.ticket)["s"]["o"]["end"] == pinned_end for ep in incremental.endpoints)


def test_limit_endpoint_metadata(client):
    cmd = {"table": identifier(V9), "limit": 5}
    (ep,) = client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(cmd))).endpoints
    meta = json.loads(ep.app_metadata)
    full = client.get_flight_info(flight.FlightDescriptor.for_path(*identifier(V9).split(".")))
    assert meta["weight"] == 1.0 and meta["estimated_rows"] == 5
    assert meta["bytes"] == full.total_bytes
    assert meta["file_ids"] == sorted({f for e in full.endpoints for f in json.loads(e.app_metadata)["file_ids"]})


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_generated_table_cut_into_row_group_ranges(tmp_path, generated_table, table_type):
    """A generated table with many row groups per file, planned with a small split target:
    base files are cut into several row-group aligned ranges (COW; MOR slices with logs stay
    whole), and the union of all endpoints equals the generator's expected rows."""
    from hudi_generator.generator import GeneratorSpec, expected_table

    spec = GeneratorSpec(rows=20_000, partitions=2, row_group_size=1_000, commits=2, table_type=table_type)
    path = Path(generated_table(spec))
    size = max(f.stat().st_size for f in path.rglob("*.parquet") if ".hoodie" not in f.parts)
    registry = Registry("sqlite://")
    registry.register_table("gen.trips", str(path))
    config = ServerConfig(port=0, state_dir=str(tmp_path / "s"), target_split_bytes=size // 4)
    with running_server(config, registry=registry) as srv:
        c = flight.connect(f"grpc://127.0.0.1:{srv.port}")
        info = c.get_flight_info(flight.FlightDescriptor.for_path("gen", "trips"))
        metas = [json.loads(ep.app_metadata) for ep in info.endpoints]
        ranged = [m for m in metas if "row_groups" in m]
        if table_type == "COPY_ON_WRITE":
            assert len(ranged) >= 2 * 4 - 2  # about four ranges per base file
            for fid in {m["file_ids"][0] for m in ranged}:
                groups = sorted(g for m in ranged if m["file_ids"] == [fid] for g in m["row_groups"])
                assert groups == list(range(len(groups)))  # every row group of the file, once
        got = _fetch_all(c, info)
    expected = expected_table(spec)
    assert_same_rows(got.select(expected.schema.names), expected, exact_types=True)
