"""The web console over plain HTTP: who may ask (the Flight port's users, tokens and rights), what
every response carries (security headers, no script), what it refuses (other methods, bodies,
foreign Host names, a non-loopback address without TLS) and that it escapes what it shows."""

from __future__ import annotations

import base64
import http.client
import re
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.protocol import pack, sql
from flight_server.server.app import compose
from flight_server.server.config import ServerConfig
from flight_server.server.console.charts import Event, histogram, time_chart
from flight_server.server.security.users import Grant
from tests.flight_server.server.console.conftest import ALICE, BOB, PASSWORD, SCRATCH
from tests.support.auth import ADMIN, ADMIN_PASSWORD, add_admin, user_client
from tests.support.processes import poll
from tests.support.servers import serving_tables

REPO = Path(__file__).resolve().parents[4]
NOT_YOURS = "no table &#39;sales.txns&#39; here, or none you may read"


def test_every_response_forbids_scripts_frames_and_caching(console):
    status, headers, body = console.get("/", ADMIN, ADMIN_PASSWORD)
    assert status == 200
    assert headers["Content-Security-Policy"].startswith("default-src 'none'; style-src 'self'")
    assert "script-src" not in headers["Content-Security-Policy"] and "<script" not in body
    assert (headers["X-Content-Type-Options"], headers["X-Frame-Options"], headers["Cache-Control"]) == (
        "nosniff", "DENY", "no-store")
    assert console.get("/static/console.css")[0] == 200  # the stylesheet needs no credentials


def test_credentials_are_the_flight_ports(console):
    status, headers, _ = console.get("/")
    assert status == 401 and headers["WWW-Authenticate"].startswith('Basic realm="hudi-flight"')
    assert console.get("/", ALICE, "wrong password")[0] == 401
    assert console.get("/", ALICE)[0] == 200
    assert console.get("/", ALICE)[0] == 200  # the second time from the remembered check
    flight = user_client(console.server.port, ALICE, PASSWORD)  # the handshake's bearer token works too
    _, token = flight.authenticate_basic_token(ALICE, PASSWORD)
    status, _, body = console.get("/", headers={"Authorization": token.decode()})
    assert status == 200 and ">alice<" in body
    assert console.get("/", headers={"Authorization": "Bearer hft1.forged"})[0] == 401


def test_a_changed_password_ends_the_remembered_login(console):
    users = console.server.app.users
    users.add_user("carol", PASSWORD)
    console.server.app.access.forget()
    assert console.get("/", "carol")[0] == 200
    users.remove_user("carol")
    users.add_user("carol", "another-password")
    console.server.app.access.forget()
    assert console.get("/", "carol")[0] == 401  # the old password's remembered token names the old account
    assert console.get("/", "carol", "another-password")[0] == 200


def test_a_table_without_a_grant_answers_like_a_missing_one(console):
    missing = console.get("/tables/sales/nope", BOB)
    not_yours = console.get("/tables/sales/txns", BOB)
    assert missing[0] == not_yours[0] == 404
    assert NOT_YOURS in not_yours[2] and NOT_YOURS.replace("txns", "nope") in missing[2]
    for tab in ("timeline", "files", "health"):
        assert console.get(f"/tables/sales/txns/{tab}", BOB)[0] == 404
    assert console.get("/namespaces/sales", BOB)[0] == 404
    assert console.get("/tables/sales/txns", ALICE)[0] == 200


def test_only_reads_are_answered(console):
    assert console.get("/", ADMIN, ADMIN_PASSWORD, method="POST")[0] == 405
    assert console.get("/", ADMIN, ADMIN_PASSWORD, method="DELETE")[0] == 405
    connection = http.client.HTTPConnection("127.0.0.1", int(console.url.rsplit(":", 1)[1]), timeout=10)
    credentials = base64.b64encode(f"{ADMIN}:{ADMIN_PASSWORD}".encode()).decode()
    connection.request("GET", "/", body=b"x" * 4096, headers={"Authorization": f"Basic {credentials}"})
    assert connection.getresponse().status == 413  # a body is refused before it is read
    connection.close()


def test_a_loopback_console_answers_only_its_loopback_names(console):
    """A page of another site resolving its name to 127.0.0.1 (DNS rebinding) gets nothing."""
    status, _, _ = console.get("/", ADMIN, ADMIN_PASSWORD, headers={"Host": "attacker.example:80"})
    assert status == 400
    port = console.url.rsplit(":", 1)[1]
    assert console.get("/", ADMIN, ADMIN_PASSWORD, headers={"Host": f"localhost:{port}"})[0] == 200


def test_untrusted_names_are_escaped(console, fixture_table, tmp_path):
    """A partition folder named like markup is shown as text, never as markup."""
    table = tmp_path / "t"
    shutil.copytree(fixture_table("sample_table/cow/v6_simplekeygen_nonhivestyle"), table)
    partition = sorted(p for p in table.iterdir() if p.is_dir() and not p.name.startswith("."))[0]
    partition.rename(table / "<img src=x onerror=alert(1)>")
    console.server.app.registry.register_table(f"{SCRATCH}.escaped", str(table))
    console.server.app.queries.forget()
    status, _, body = console.get(f"/tables/{SCRATCH}/escaped/files", ADMIN, ADMIN_PASSWORD)
    assert status == 200
    assert "&lt;img src=x onerror=alert(1)&gt;" in body and "<img" not in body


def test_a_non_loopback_console_needs_credentials_and_tls(tmp_path):
    """The Flight port's rule (an exposed address needs credentials, and TLS to carry them)."""
    token = {"tokens": {"a-static-token-of-16-chars": "someone"}}
    for settings, refusal in ((token, "without TLS"), ({}, "with no users and no tokens")):
        config = ServerConfig(state_dir=str(tmp_path / refusal.replace(" ", "-")), port=0, console_port=0,
                              console_host="0.0.0.0", secret="ab" * 32, **settings)
        with pytest.raises(ValueError, match=f"web console: refusing to listen on 0.0.0.0 {refusal}"):
            compose(config)


def test_tls_follows_the_flight_port(tmp_path, pki):
    ca, _ = pki
    with serving_tables({}, str(tmp_path), console_port=0, tls_cert=str(ca.server_cert),
                        tls_key=str(ca.server_key)) as server:
        add_admin(server)
        port = server.app.console.port
        context = ssl.create_default_context(cafile=str(ca.ca_cert))
        credentials = base64.b64encode(f"{ADMIN}:{ADMIN_PASSWORD}".encode()).decode()
        request = urllib.request.Request(f"https://127.0.0.1:{port}/", headers={"Authorization": f"Basic {credentials}"})
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            assert response.status == 200
            assert response.headers["Strict-Transport-Security"].startswith("max-age=")
        with pytest.raises(OSError):  # plain HTTP is not spoken there
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read()


def test_the_console_is_off_by_default_and_loads_nothing():
    code = ("import sys; from flight_server.server.config import ServerConfig; "
            "from flight_server.server.app import compose; import tempfile; "
            "app = compose(ServerConfig(port=0, state_dir=tempfile.mkdtemp(), secret='ab' * 32)); "
            "print(app.console is None, app.ops.live is None, 'flask' in sys.modules, 'cheroot' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.stdout.split() == ["True", "True", "False", "False"], result.stderr


def test_a_supervised_servers_children_leave_the_console_to_the_first():
    config = ServerConfig(console_port=9999, metrics_port=9998)
    assert config.without_operation_ports().ops.console_port is None


def test_the_timeline_chart_places_instants_in_time():
    from datetime import datetime, timedelta, timezone

    start = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)
    events = [Event("commit", start, start + timedelta(seconds=10), "a"),
              Event("clean", start + timedelta(minutes=5), None, "b"),
              Event("commit", start + timedelta(minutes=10), None, "c", pending=True)]
    chart = time_chart(events, ["commit", "compaction", "clean"])
    assert [lane.label for lane in chart.lanes] == ["commit", "clean"]  # lanes without an instant are left out
    first, clean, last = chart.marks
    assert chart.left < first.x < clean.x < last.x < chart.right
    assert abs((clean.x - first.x) - (last.x - clean.x)) < 0.1  # equal times, equal distances
    assert first.width > 0 and clean.width == 0 and last.pending
    assert [t.label for t in chart.ticks][:2] == ["2025-01-01 12:00", "12:02"]


def test_the_size_histogram_counts_every_size_once():
    chart = histogram([10, 2000, 3000, 5 << 20, 6 << 20, 7 << 20], "file groups")
    counts = {bar.label: int(bar.value) for bar in chart.bars}
    assert counts == {"< 1 KiB": 1, "1 KiB–4 KiB": 2, "4 KiB–16 KiB": 0, "16 KiB–64 KiB": 0, "64 KiB–256 KiB": 0,
                      "256 KiB–1 MiB": 0, "1 MiB–4 MiB": 0, "4 MiB–16 MiB": 3}


def test_a_running_sql_statement_is_listed_with_its_table(console):
    """A statement the engine runs (not a plain scan) whose client waits after its first batch."""
    client = user_client(console.server.port, ADMIN, ADMIN_PASSWORD)
    try:
        query = sql.CommandStatementQuery(query="SELECT *, fare * 2 AS double_fare FROM big.trips")
        info = client.get_flight_info(flight.FlightDescriptor.for_command(pack(query)))
        reader = client.do_get(info.endpoints[0].ticket)
        first = reader.read_chunk().data
        _, _, body = console.get("/queries", ADMIN, ADMIN_PASSWORD)
        (row,) = re.findall(r'<tr class="call" data-kind="sql">(.*?)</tr>', body, re.S)
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        assert cells[:3] == [ADMIN, "sql", "big.trips"]
        assert int(re.search(r'data-value="(\d+)"', row).group(1)) >= first.num_rows > 0
        reader.cancel()
    finally:
        client.close()


def test_a_grant_on_one_table_shows_that_table_only(console):
    users = console.server.app.users
    users.add_user("dave", PASSWORD)
    users.grant("dave", Grant("read", "sales", "txns"))
    console.server.app.access.forget()
    _, _, body = console.get("/", "dave")
    assert re.findall(r'<a href="/namespaces/(\w+)">', body) == ["sales"]
    _, _, body = console.get("/namespaces/sales", "dave")
    assert re.findall(r'<a href="/tables/sales/(\w+)">', body) == ["txns"]
    assert console.get("/tables/sales/txns/health", "dave")[0] == 200
    assert console.get("/tables/sales/mtxns/health", "dave")[0] == 404
    assert console.get("/queries", "dave")[0] == 200


def test_a_page_past_its_deadline_is_refused(fixture_table, tmp_path):
    """``console_page_seconds``: a table page's steps check its deadline (0 here: the first fails)."""
    tables = {"sales.txns": fixture_table("sample_table/cow/v9_txns_simple_meta")}
    with serving_tables(tables, str(tmp_path), console_port=0, console_page_seconds=0.0) as server:
        url = f"http://127.0.0.1:{server.app.console.port}"
        assert urllib.request.urlopen(url + "/", timeout=10).status == 200  # the catalog pages: no deadline
        for tab in ("", "/timeline", "/files", "/health"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"{url}/tables/sales/txns{tab}", timeout=10)
            assert refused.value.code == 503
            assert "limit console_page_seconds (0.0) exceeded: the page took longer to build" in refused.value.read().decode()


def test_failed_calls_leave_no_live_query_behind(console):
    """Every call that ends, refused or failed at any step, leaves the live queries."""
    live = console.server.app.ops.live
    uri = f"grpc://127.0.0.1:{console.server.port}"
    stranger = flight.connect(uri)
    bad_token = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer hft1.forged")])
    client = user_client(console.server.port, ALICE, PASSWORD)
    try:
        for call in (
            lambda: stranger.list_flights(),  # no credentials where users exist
            lambda: list(stranger.list_flights(options=bad_token)),
            lambda: client.get_flight_info(flight.FlightDescriptor.for_path("sales", "missing")),
            lambda: client.get_flight_info(flight.FlightDescriptor.for_command(b"{not json")),
            lambda: client.do_get(flight.Ticket(b"forged")).read_all(),
            lambda: client.get_flight_info(flight.FlightDescriptor.for_path("hudi", "compaction")),  # not hers
        ):
            with pytest.raises((flight.FlightError, pa.ArrowException)):
                result = call()
                if result is not None and not isinstance(result, flight.FlightInfo):
                    list(result)
        assert poll(lambda: live.snapshot() == [], 10, "no call in flight")
    finally:
        stranger.close()
        client.close()


def test_mutual_tls_follows_the_flight_port(tmp_path, pki):
    ca, _ = pki
    with serving_tables({}, str(tmp_path), console_port=0, tls_cert=str(ca.server_cert), tls_key=str(ca.server_key),
                        tls_client_ca=str(ca.ca_cert)) as server:
        port = server.app.console.port  # anonymous on loopback: the client certificate is the only credential
        context = ssl.create_default_context(cafile=str(ca.ca_cert))
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):  # no client certificate
            urllib.request.urlopen(f"https://127.0.0.1:{port}/", context=context, timeout=10).read()
        context.load_cert_chain(str(ca.client_cert), str(ca.client_key))
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/", context=context, timeout=10) as response:
            assert response.status == 200
