"""Every example in README.md and docs/*.md runs as written, against a served demo warehouse.

What runs:

* fenced ``python`` blocks, each file's in order and in one namespace (``uri`` holds the test
  server's URI, as the Spark page's examples expect);
* in other fences, each line starting with ``hudi-flight `` (or ``$ hudi-flight ``; the lines
  after a ``$`` line, up to the next one, are its expected output). Client commands run against
  the test server; ``serve``, ``users``, ``grant``, ``revoke`` and ``demo`` lines are checked by
  the command's parser only (they start a server or change a catalog database), with the
  ``[optional]`` parts of a synopsis left out.

Markers, an HTML comment on the line before a fence (use sparingly):

* ``<!-- example needs: spark -->``: the block runs in the Spark test (marked ``spark``) with a
  local ``spark`` session;
* ``<!-- example not run: REASON -->``: the block is never run.

The examples name ``s3://`` URLs and port 8815; :data:`REWRITES` (the one place) points them at
the local warehouse and the test server. The warehouse is ``ns/trips``: a generated copy-on-write
table (``uuid, ts, rider, driver, fare, amount, event_time, trip_count, location, region``;
partitions ``region-00000`` to ``region-00003``; commits at 2025-01-01T00:00:00, :10 and :20 UTC).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from flight_server.cli.main import build_parser, main
from flight_server.server.config import ServerConfig
from hudi_generator import generator
from tests.support.auth import ADMIN, ADMIN_PASSWORD, add_admin
from tests.support.servers import running_server

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCE = re.compile(r"(?:<!-- example (?P<marker>[^>]*?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)
_PARSE_ONLY = ("serve", "users", "grant", "revoke", "demo")


def REWRITES(warehouse: Path, port: int) -> list[tuple[str, str]]:  # noqa: N802 - a table, named as one
    """(text in an example, what the test runs instead)."""
    table = str(warehouse / "ns" / "trips")
    return [
        ("s3://lake/ns/trips", table),
        ("s3://bucket/warehouse/ns/trips", table),
        ("s3://lake/", str(warehouse)),
        ("storage_options={...}", "storage_options={}"),
        ('storage_options={"anon": False}', "storage_options={}"),
        ("127.0.0.1:8815", f"127.0.0.1:{port}"),
    ]


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    lang: str
    marker: str
    body: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def examples() -> list[Example]:
    out = []
    for page in PAGES:
        text = page.read_text()
        for m in _FENCE.finditer(text):
            line = text.count("\n", 0, m.start("body"))
            out.append(Example(page.name if page.parent == REPO else f"docs/{page.name}", line,
                               m.group("lang"), (m.group("marker") or "").strip(), m.group("body")))
    return out


def _rewrite(text: str, rewrites: list[tuple[str, str]]) -> str:
    for old, new in rewrites:
        text = text.replace(old, new)
    return text


@dataclass(frozen=True)
class Served:
    warehouse: Path
    port: int  # anonymous reads (the Python examples connect without credentials)
    admin_port: int  # the command-line examples log in as an admin (refresh and register need one)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    warehouse = tmp_path_factory.mktemp("warehouse")
    spec = generator.GeneratorSpec(rows=400, partitions=4, commits=3, table_name="trips")
    generator.generate(str(warehouse / "ns" / "trips"), spec)

    def config() -> ServerConfig:
        return ServerConfig(port=0, warehouses=[str(warehouse)], state_dir=str(tmp_path_factory.mktemp("state")),
                            refresh_interval_seconds=0)

    with running_server(config()) as anonymous, running_server(config()) as admin:
        add_admin(admin)
        yield Served(warehouse, anonymous.port, admin.port)


@pytest.fixture
def utc(monkeypatch):
    """The table's timeline zone is LOCAL: run the examples' zoned instants in UTC, where the
    generator wrote its instants."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _shell_commands(example: Example) -> list[tuple[str, list[str]]]:
    """(command line, expected output lines) of each ``hudi-flight`` line of a shell block."""
    commands: list[tuple[str, list[str]]] = []
    for raw in example.body.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
            if line.startswith("hudi-flight "):
                commands.append((line, []))
            continue
        if "| hudi-flight " in line:
            line = line[line.index("| hudi-flight ") + 2:]
        if line.startswith("hudi-flight "):
            commands.append((line, []))
        elif commands and raw.strip() and not raw.startswith(" ") and example.body.lstrip().startswith("$"):
            commands[-1][1].append(raw)
    return commands


def _argv(line: str) -> list[str]:
    words = shlex.split(line, comments=True)[1:]
    out, depth = [], 0
    for word in words:  # leave out a synopsis' [optional] parts
        depth += word.count("[") if word.startswith("[") else 0
        if depth == 0:
            out.append(word)
        depth -= word.count("]") if depth and word.endswith("]") else 0
    return out


def _run_cli(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, (out.getvalue() + err.getvalue()).strip()


def _run_shell(example: Example, rewrites: list[tuple[str, str]], uri: str) -> int:
    ran = 0
    for line, expected in _shell_commands(example):
        argv = _argv(_rewrite(line, rewrites))
        if argv[0] in _PARSE_ONLY:
            build_parser().parse_args(argv)  # SystemExit on a wrong synopsis
            continue
        if "--server" not in argv:
            argv += ["--server", uri]
        if "--user" not in argv and "--token" not in argv:
            argv += ["--user", ADMIN]  # the password: $HUDI_FLIGHT_PASSWORD
        code, output = _run_cli(argv)
        if expected:
            assert output == "\n".join(expected), f"{example.where}: {line}"
        else:
            assert code == 0, f"{example.where}: {line}\n{output}"
        ran += 1
    return ran


def _run_python(blocks: list[Example], rewrites: list[tuple[str, str]], namespace: dict) -> None:
    for block in blocks:
        code = compile(_rewrite(block.body, rewrites), block.where, "exec")
        try:
            exec(code, namespace)
        except Exception as err:
            raise AssertionError(f"{block.where}: {type(err).__name__}: {err}") from err


def _pages() -> list[str]:
    return sorted({e.page for e in examples()})


@pytest.mark.parametrize("page", _pages())
def test_examples_run(page, served, utc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # files the examples write (--output trips.parquet) land here
    monkeypatch.setenv("HUDI_FLIGHT_PASSWORD", ADMIN_PASSWORD)
    mine = [e for e in examples() if e.page == page and not e.marker]
    python = [e for e in mine if e.lang == "python"]
    uri = f"grpc://127.0.0.1:{served.port}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _run_python(python, REWRITES(served.warehouse, served.port), {"__name__": "__example__", "uri": uri})
    if page == "README.md":  # a first reader's snippets print nothing unexpected (e.g. ADBC's autocommit)
        assert [str(w.message) for w in caught] == []
    admin_uri = f"grpc://127.0.0.1:{served.admin_port}"
    for example in mine:
        if example.lang in ("", "sh", "bash", "console", "shell"):
            _run_shell(example, REWRITES(served.warehouse, served.admin_port), admin_uri)


def test_markers_are_known_and_few():
    markers = [e.marker for e in examples() if e.marker]
    assert all(m == "needs: spark" or m.startswith("not run: ") for m in markers), markers
    # each needs what a test cannot have beside the docs' server (e.g. Spark with the JDBC jars),
    # and each names the test that runs the same steps
    assert sum(m.startswith("not run: ") for m in markers) <= 3


def test_the_cli_examples_exist():
    """The README's CLI examples are among what runs (a parser change cannot silently drop them)."""
    lines = [line for e in examples() if e.page == "README.md" for line, _ in _shell_commands(e)]
    assert any(line.startswith("hudi-flight read ns.trips --columns rider fare") for line in lines)


@pytest.mark.spark
def test_spark_examples_run(served, utc):
    pytest.importorskip("pyspark")
    from tests.support.spark import local_spark, retried_on_worker_start

    spark = local_spark()
    blocks = [e for e in examples() if e.marker == "needs: spark"]
    assert blocks

    def run(_attempt: int) -> None:  # the examples only read: running them again is the same
        _run_python(blocks, REWRITES(served.warehouse, served.port), {"__name__": "__example__", "spark": spark,
                                                                        "uri": f"grpc://127.0.0.1:{served.port}"})
        for query in spark.streams.active:
            query.awaitTermination(60)

    retried_on_worker_start(run)
