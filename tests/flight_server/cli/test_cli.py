"""The ``hudi-flight`` command line: serve (as a real subprocess), register, tables, info, read,
demo; one-line errors with exit code 1. The client commands log in as an admin user that
``hudi-flight users add`` created before the server started."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from catalog.hudi_table import HudiTable
from flight_server.cli.main import build_parser, main
from flight_server.cli.output import one_line
from tests.support.auth import ADMIN, ADMIN_PASSWORD
from tests.support.compare import assert_same_rows
from tests.support.servers import free_port

REPO = Path(__file__).resolve().parents[3]
V9 = "sample_table/cow/v9_txns_simple_meta"
V6 = "sample_table/cow/v6_nonpartitioned"
CONSOLE: dict[str, str] = {}  # the web console of the module's server: its URL


@pytest.fixture(scope="module")
def warehouse(fixture_table, tmp_path_factory):
    """A warehouse folder ``wh/sales/<table>`` holding two fixture tables (copied)."""
    wh = tmp_path_factory.mktemp("wh")
    shutil.copytree(fixture_table(V9), wh / "sales" / "txns")
    shutil.copytree(fixture_table(V6), wh / "sales" / "basic")
    return wh


@pytest.fixture(scope="module")
def server(warehouse, tmp_path_factory):
    """``hudi-flight serve`` in a subprocess with only --port, --warehouse and --state-dir."""
    port = free_port()
    state = tmp_path_factory.mktemp("state")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    added = subprocess.run([sys.executable, "-m", "flight_server.cli", "users", "add", ADMIN, "--admin",
                            "--password-stdin", "--state-dir", str(state)],
                           input=ADMIN_PASSWORD + "\n", capture_output=True, text=True, env=env, cwd=REPO)
    assert added.returncode == 0 and added.stdout.strip() == f"added user {ADMIN} (admin)", added.stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "flight_server.cli", "serve", "--port", str(port), "--warehouse", str(warehouse),
         "--state-dir", str(state), "--allow-root", str(tmp_path_factory.getbasetemp()), "--console-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )
    line = proc.stdout.readline()  # printed once the server listens
    assert "serving 2 table(s)" in line, line + proc.stderr.read() if proc.poll() is not None else line
    console = proc.stdout.readline()
    assert re.fullmatch(r"web console on http://127\.0\.0\.1:\d+/\n", console), console
    CONSOLE["url"] = console.split()[-1]
    yield f"grpc://127.0.0.1:{port}", state
    proc.terminate()
    proc.wait(10)


@pytest.fixture(autouse=True)
def _admin_password(monkeypatch):
    """The password of ``--user admin`` (the client commands read $HUDI_FLIGHT_PASSWORD)."""
    monkeypatch.setenv("HUDI_FLIGHT_PASSWORD", ADMIN_PASSWORD)


def _login(uri: str) -> tuple[str, ...]:
    return ("--server", uri, "--user", ADMIN)


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_serve_created_sqlite_catalog_and_secret(server):
    _, state = server
    assert (state / "catalog.db").exists()
    assert len(bytes.fromhex((state / "ticket-secret").read_text().strip())) == 32


def test_serve_with_a_console(server):
    """``serve --console-port 0`` says where its console listens, and it answers there."""
    request = urllib.request.Request(CONSOLE["url"] + "namespaces/sales")
    request.add_header("Authorization", "Basic " + base64.b64encode(f"{ADMIN}:{ADMIN_PASSWORD}".encode()).decode())
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read().decode()
    assert response.status == 200 and ">txns</a>" in body and ">basic</a>" in body


def test_tables(server, capsys):
    uri, _ = server
    code, out, _ = _run(capsys, "tables", *_login(uri))
    assert code == 0
    assert [line.split("\t")[0] for line in out.splitlines()] == ["sales.basic", "sales.txns"]
    code, out, _ = _run(capsys, "tables", *_login(uri), "--json")
    assert {t["table"] for t in json.loads(out)} == {"sales.basic", "sales.txns"}


def test_register_and_info(server, capsys, fixture_table):
    uri, _ = server
    code, out, _ = _run(capsys, "register", "other.basic", fixture_table(V6), *_login(uri))
    assert code == 0 and out.startswith("registered other.basic (COPY_ON_WRITE, version 6)")
    code, out, _ = _run(capsys, "info", "other.basic", *_login(uri), "--json")
    info = json.loads(out)
    assert info["table_version"] == 6 and info["timeline"]
    library = HudiTable.open(fixture_table(V6)).metadata_table("health").to_pylist()
    shown = ("check", "status", "threshold", "remedy")  # values too, but for last_commit's age (it ages)
    assert [{k: c[k] for k in shown} for c in info["health"]] == [{k: c[k] for k in shown} for c in library]
    assert [c["value"] for c in info["health"][1:]] == [c["value"] for c in library[1:]]
    assert info["health"][0]["check"] == "last_commit"
    assert 0 <= library[0]["value"] - info["health"][0]["value"] < 600  # asked a moment apart


def test_info_summarises_health_against_named_thresholds(server, capsys):
    uri, _ = server
    code, out, _ = _run(capsys, "info", "sales.txns", *_login(uri))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("sales.txns: COPY_ON_WRITE, table version 9")
    assert lines[3] == "health: 2 INFO, 7 OK"  # the 12-row table's tiny files are no warning
    checks = {line.split()[1]: line for line in lines[4::2]}
    thresholds = lines[5::2]
    assert list(checks) == ["last_commit", "small_files", "log_backlog", "pending_compaction", "pending_clustering",
                            "replaced_file_groups", "old_file_slices", "orphaned_files", "metadata_table_lag"]
    assert re.match(r"  INFO last_commit = \d+d \d+h \d+m: commit \d{17} \(INSERT\), completed \d{17}, ", checks["last_commit"])
    assert checks["small_files"].startswith("  OK   small_files = 5: 5 of 5 base files are smaller than 100.0 MiB")
    assert checks["replaced_file_groups"].startswith("  INFO replaced_file_groups = 7: 7 replaced file group(s) on storage")
    assert checks["metadata_table_lag"].startswith("  OK   metadata_table_lag = 0: metadata table current to")
    assert len(thresholds) == 9 and all(t.startswith("       threshold: ") for t in thresholds)
    assert "hoodie.parquet.small.file.limit default" in thresholds[1]


def test_info_tells_what_fixes_a_warning(server, capsys, fixture_table, tmp_path):
    """A WARN carries its remedy: here the orphaned base file of a write no timeline knows."""
    uri, _ = server
    table = tmp_path / "orphaned"
    shutil.copytree(fixture_table(V6), table)
    (original,) = [p for p in table.iterdir() if p.suffix == ".parquet"][:1]
    file_id = original.name.split("_")[0]
    shutil.copy(original, table / f"{file_id}_0-0-0_20300101000000001.parquet")
    assert _run(capsys, "register", "other.orphaned", str(table), *_login(uri))[0] == 0
    code, out, _ = _run(capsys, "info", "other.orphaned", *_login(uri))
    assert code == 0
    lines = out.splitlines()
    assert lines[3] == "health: 1 WARN, 3 INFO, 5 OK"
    at = next(i for i, line in enumerate(lines) if line.startswith("  WARN orphaned_files = 1: "))
    assert lines[at + 1].startswith("       threshold: ")
    assert lines[at + 2].startswith("       fix: failed writes are rolled back by the next writer") and "HoodieRepairTool" in lines[at + 2]


def test_read_prints_rows(server, capsys, warehouse):
    uri, _ = server
    code, out, _ = _run(capsys, "read", "sales.txns", *_login(uri), "--columns", "txn_id,region",
                        "--filter", "region = apac")
    expected = HudiTable.open(str(warehouse / "sales" / "txns")).read(columns=["txn_id", "region"],
                                                                       filters=[("region", "=", "apac")])
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["txn_id", "|", "region"]
    assert lines[-1] == f"({expected.num_rows} rows)"
    assert sorted(line.split()[0] for line in lines[2:-1]) == sorted(expected["txn_id"].to_pylist())


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_read_writes_output(server, capsys, warehouse, tmp_path, suffix):
    uri, _ = server
    out_file = tmp_path / f"out{suffix}"
    code, out, _ = _run(capsys, "read", "sales.txns", *_login(uri), "--output", str(out_file),
                        "--filter", "txn_ts > 1700300000000", "--columns", "txn_id", "--columns", "txn_ts")
    expected = HudiTable.open(str(warehouse / "sales" / "txns")).read(
        columns=["txn_id", "txn_ts"], filters=[("txn_ts", ">", 1700300000000)])
    assert code == 0 and out.strip() == f"wrote {expected.num_rows} rows to {out_file}"
    got = pq.read_table(out_file) if suffix == ".parquet" else pacsv.read_csv(out_file)
    if suffix == ".parquet":
        assert_same_rows(got, expected, exact_types=True)
    else:
        assert sorted(got["txn_id"].to_pylist()) == sorted(expected["txn_id"].to_pylist())


def test_read_limit(server, capsys):
    uri, _ = server
    code, out, _ = _run(capsys, "read", "sales.txns", *_login(uri), "--limit", "2", "--columns", "txn_id")
    assert code == 0 and out.splitlines()[-1] == "(2 rows)"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["read", "sales.txns", "--columns", "nope"],
         "hudi-flight: error: planning sales.txns rejected by {uri}: column(s) not in the table schema: 'nope'"),
        (["read", "sales.txns", "--filter", "txn_ts ~ 3"],
         "hudi-flight: error: filter 'txn_ts ~ 3': unexpected '~' at position 8; expected an operator"),
        (["read", "sales.txns", "--filter", "region = 'apac' or region = 'eu'"],
         "hudi-flight: error: filter \"region = 'apac' or region = 'eu'\": OR at position 17 is not supported"),
        (["read", "sales.txns", "--output", "x.json"],
         "hudi-flight: error: --output x.json: unknown file type .json; use a .parquet or .csv file name"),
        (["read", "sales.txns", "--as-of", "2024-01-01T25:61:61"],
         "hudi-flight: error: malformed as_of '2024-01-01T25:61:61' (hour must be in 0..23): expected yyyyMMddHHmmssSSS"),
        (["read", "nope.txns"], "hudi-flight: error: namespace nope does not exist (namespaces: "),
        (["read", "sales.nope"], "hudi-flight: error: table sales.nope does not exist (tables of sales: basic, txns)"),
        (["info", "sales"], "hudi-flight: error: table 'sales': expected NAMESPACE.TABLE, e.g. demo.trips"),
        (["tables", "--namespace", "nope"], "hudi-flight: error: namespace nope does not exist (namespaces: "),
        (["register", "bad", "/tmp"], "hudi-flight: error: table 'bad': expected NAMESPACE.TABLE"),
    ],
)
def test_errors_are_one_line_exit_1(server, capsys, argv, message):
    uri, _ = server
    code, out, err = _run(capsys, *argv, *_login(uri))
    assert code == 1 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(message.format(uri=uri)), err


def test_unreachable_server_is_one_line(capsys):
    code, _, err = _run(capsys, "tables", "--server", f"grpc://127.0.0.1:{free_port()}")
    assert code == 1 and len(err.splitlines()) == 1 and err.startswith("hudi-flight: error:")


def test_bad_config_file(capsys, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[server]\nbogus = 1\n')
    code, _, err = _run(capsys, "serve", "--config", str(cfg))
    assert code == 1 and err.strip() == "hudi-flight: error: unknown configuration keys: bogus"


def test_demo_end_to_end(capsys):
    code, out, err = _run(capsys, "demo")
    assert code == 0, err
    assert "MERGE_ON_READ" in out and "COPY_ON_WRITE" in out
    assert out.splitlines()[-1] == ("demo done; its temporary warehouse is removed (hudi-flight demo --warehouse DIR "
                                    "keeps the tables in DIR; hudi-flight serve --warehouse DIR then serves them)")
    planning = re.search(r"(\d+) storage requests from the metadata table, (\d+) by listing storage", out)
    assert planning and int(planning.group(1)) < int(planning.group(2)), out
    endpoints = r"\d+ endpoints \((weights [\d.]+ to [\d.]+|each weighted [\d.]+)\), fetched \d+ at a time: [\d,]+ rows"
    assert re.search(endpoints, out), out
    assert not re.search(r"weights ([\d.]+) to \1\b", out)  # equal weights are said once
    assert re.search(r"as_of \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d: [\d,]+ rows; now: [\d,]+ rows \(trip-\d+: fare", out), out
    assert "Flight SQL through the ADBC driver" in out and "region-00000 |" in out
    assert len(out.splitlines()) <= 30  # one screenful


def test_demo_into_a_warehouse_keeps_it_and_says_how_to_serve_it(capsys, tmp_path):
    code, out, err = _run(capsys, "demo", "--warehouse", str(tmp_path / "wh"))
    assert code == 0, err
    assert out.splitlines()[-1] == f"demo done; serve its tables with: hudi-flight serve --warehouse {tmp_path / 'wh'}"
    assert sorted(p.name for p in (tmp_path / "wh" / "demo").iterdir()) == ["trips_cow", "trips_mor"]


def test_generate_delegates_to_generator(capsys, tmp_path):
    target = tmp_path / "gen" / "trips"
    code, out, _ = _run(capsys, "generate", str(target), "--rows", "50", "--partitions", "2")
    assert code == 0 and json.loads(out)["live_rows"] == 50
    t = HudiTable.open(str(target))
    assert t.read().num_rows == 50 and t.table_type == "COPY_ON_WRITE"


def test_example_config_loads():
    from flight_server.server.config import ServerConfig

    cfg = ServerConfig.load(REPO / "deploy" / "hudi-flight.toml", port=9000)
    assert (cfg.host, cfg.port, cfg.warehouses) == ("0.0.0.0", 9000, ["/warehouse"])
    assert cfg.split_options().target_split_bytes == 128 * 1024 * 1024


def test_port_in_use_is_one_line(tmp_path):
    """A subprocess: gRPC's C++ core writes to the process's stderr, which capsys does not see."""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "flight_server.cli", "serve", "--port", str(port),
                               "--state-dir", str(tmp_path)], capture_output=True, text=True,
                              env={**env, "PYTHONPATH": str(REPO)}, cwd=REPO, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"hudi-flight: error: cannot listen on grpc+tcp://127.0.0.1:{port} (address in use?)\n"


def test_serve_help_says_anonymous_refresh_is_for_loopback_only(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "On a loopback address with no users or tokens they may also `hudi-flight refresh` and `register`" in text
    assert "never on other addresses" in text


def test_missing_warehouse_says_which_folder(capsys, tmp_path):
    code, _, err = _run(capsys, "serve", "--warehouse", str(tmp_path / "nope"), "--state-dir", str(tmp_path / "s"))
    assert code == 1 and err == f"hudi-flight: error: warehouse folder {tmp_path / 'nope'} does not exist\n"
    (tmp_path / "file").write_text("")
    code, _, err = _run(capsys, "serve", "--warehouse", f"file://{tmp_path / 'file'}", "--state-dir", str(tmp_path))
    assert code == 1 and err == f"hudi-flight: error: warehouse file://{tmp_path / 'file'} is not a folder\n"


@pytest.mark.parametrize("error, line", [
    (FileNotFoundError(2, "No such file or directory", "/data/x.parquet"), "/data/x.parquet does not exist"),
    (PermissionError(13, "Permission denied", "/data/x.parquet"), "no permission to open /data/x.parquet"),
    (IsADirectoryError(21, "Is a directory", "/data"), "/data: is a directory"),
    (OSError("no file name"), "no file name"),
])
def test_os_errors_say_what_was_missing(error, line):
    assert one_line(error) == line


def test_serve_defaults(monkeypatch, tmp_path):
    from flight_server.server.config import ServerConfig

    monkeypatch.setenv("HUDI_FLIGHT_HOME", str(tmp_path))
    cfg = ServerConfig.load(None)
    assert cfg.location == "grpc+tcp://127.0.0.1:8815"
    assert cfg.resolved_catalog_url == f"sqlite:///{tmp_path / 'catalog.db'}"
    assert cfg.resolved_secret_file == tmp_path / "ticket-secret"


def test_progress_line_ends_at_every_endpoint(server, capsys, monkeypatch, warehouse):
    """On a terminal, read shows endpoints done out of planned and rows so far; it ends at the
    real count (the plan's row total is only an estimate) and is cleared before the result."""
    import sys

    uri, _ = server
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, out, err = _run(capsys, "read", "sales.txns", *_login(uri), "--columns", "txn_id", "--limit", "1000")
    rows = HudiTable.open(str(warehouse / "sales" / "txns")).read().num_rows
    assert code == 0 and out.splitlines()[-1] == f"({rows} rows)"
    updates = [u.strip() for u in err.split("\r") if u.strip()]
    done, planned = updates[-1].split(": ")[1].split(" endpoints")[0].split("/")
    assert updates[-1] == f"reading sales.txns: {planned}/{planned} endpoints, {rows} rows (100%)" and done == planned


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"hudi-flight {version('hudi-flight')}"


def test_refresh(server, capsys, warehouse):
    uri, _ = server
    latest = HudiTable.open(str(warehouse / "sales" / "txns")).timeline[-1].requested_time  # the last instant, any action
    code, out, err = _run(capsys, "refresh", "sales.txns", *_login(uri))
    assert code == 0 and out.strip() == f"refreshed sales.txns: latest instant {latest}", err
    code, out, _ = _run(capsys, "refresh", *_login(uri))
    assert code == 0 and out.startswith("re-scanned the warehouses: ")
    code, _, err = _run(capsys, "refresh", "sales.nope", *_login(uri))
    assert code == 1 and err.strip() == "hudi-flight: error: table sales.nope does not exist (tables of sales: basic, txns)"


@pytest.mark.parametrize("preset", [None, "1"])
def test_serve_turns_large_allocator_pages_off_unless_told(capsys, monkeypatch, tmp_path, preset):
    """The serving processes ``serve`` spawns start with Arrow's allocator kept off transparent huge
    pages (decoding a row group into fresh memory costs several times its work otherwise); an
    operator's value wins."""
    monkeypatch.setenv("MIMALLOC_ALLOW_LARGE_OS_PAGES", "unset")  # restored (or removed) after the test
    if preset is None:
        monkeypatch.delenv("MIMALLOC_ALLOW_LARGE_OS_PAGES")
    else:
        monkeypatch.setenv("MIMALLOC_ALLOW_LARGE_OS_PAGES", preset)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[server]\nbogus = 1\n')  # stops right after the environment is set
    code, _, _ = _run(capsys, "serve", "--config", str(cfg))
    assert code == 1
    assert os.environ["MIMALLOC_ALLOW_LARGE_OS_PAGES"] == (preset or "0")
