"""Packaging: ``pip install hudi-flight`` is the reader alone; every other part comes with an
extra, and a missing extra is an error naming it. The reader is checked in a subprocess whose
imports are limited to the standard library and the core dependencies."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib

from catalog import HudiTable

REPO = Path(__file__).resolve().parents[1]
CORE = {"pyarrow", "fastavro", "fsspec"}
V9 = "sample_table/cow/v9_txns_simple_meta"
MOR_V9 = "sample_table/mor/avro/v9_txns_simple_meta"  # log files: the merge-on-read merge runs

# Run first in every subprocess: a finder refusing the top-level packages the test names, or,
# with ONLY_CORE, every one but the standard library, the core dependencies and this project.
_BLOCKER = """
import importlib.abc, sys
BLOCKED = {blocked}
ALLOWED = set(sys.stdlib_module_names) | {core} | {{"catalog", "flight_server", "schemas", "cython_runtime"}}
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        top = name.partition(".")[0]
        refused = top not in ALLOWED and not top.startswith("_") if BLOCKED is None else top in BLOCKED
        if refused:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked by the test)", name=name)
        return None
sys.meta_path.insert(0, Blocker())
"""
ONLY_CORE = None


def _run(code: str, *args: str, blocked: set[str] | None = ONLY_CORE) -> subprocess.CompletedProcess:
    prelude = _BLOCKER.format(blocked=repr(blocked), core=repr(CORE))
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code), *args], capture_output=True,
                          text=True, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=120)


def _project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_core_dependencies_are_the_reader_only():
    project = _project()
    names = {d.split(">")[0].split("=")[0].split("<")[0].strip() for d in project["dependencies"]}
    assert names == CORE
    assert project["license"] == "Apache-2.0"
    extras = project["optional-dependencies"]
    assert {"client", "server", "sql", "spark", "polars", "duckdb", "s3", "lance", "all"} <= set(extras)
    assert any(d.startswith("pylance") for d in extras["lance"])


@pytest.mark.parametrize("name", [V9, MOR_V9])
def test_import_catalog_and_read_with_the_core_only(fixture_table, name):
    result = _run("""
        import sys
        from catalog import HudiTable
        table = HudiTable.open(sys.argv[1])
        every = table.read()
        some = table.read(columns=["txn_id"], filters="region = 'apac'", as_of=table.timeline.commits[-1].requested_time)
        assert every.num_rows > some.num_rows > 0, (every.num_rows, some.num_rows)
        outside = sorted({m.partition(".")[0] for m in sys.modules} - set(sys.stdlib_module_names)
                         - {"catalog", "pyarrow", "fastavro", "fsspec", "cython_runtime"})
        print(every.num_rows, [m for m in outside if not m.startswith("_")])
    """, fixture_table(name))
    assert result.returncode == 0, result.stderr
    expected = HudiTable.open(fixture_table(name)).read().num_rows  # here, with every package there is
    assert result.stdout.split(" ", 1) == [str(expected), "[]\n"]


@pytest.mark.parametrize(
    "module, missing, extra",
    [
        ("flight_server.client.polars", "polars", "polars"),
        ("flight_server.client.duckdb", "duckdb", "duckdb"),
        ("flight_server.client.spark", "pyspark", "spark"),
        ("flight_server.client.sql.dialect", "sqlalchemy", "sql"),
        ("flight_server.client.session", "google", "client"),
        ("flight_server.server.service", "sqlglot", "server"),
        ("flight_server.server.service", "grpc_health", "server"),
        ("flight_server.server.console.web", "flask", "server"),
        ("flight_server.server.console.server", "cheroot", "server"),
    ],
)
def test_a_missing_extra_is_named(module, missing, extra):
    result = _run(f"""
        from catalog.optional import NotInstalledError
        try:
            import {module}
        except NotInstalledError as err:
            print(err)
        else:
            raise SystemExit("imported without its extra")
    """, blocked={missing})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(
        f"needs the Python package {missing!r}, which is not installed: pip install 'hudi-flight[{extra}]'"
    ), result.stdout


def test_the_cli_needs_no_server_extra_to_parse():
    """``hudi-flight --version`` (and any client command's parsing) imports no server module."""
    result = subprocess.run([sys.executable, "-c", "import sys; from flight_server.cli.main import main; "
                             "code = main(['read', 'bad']); "
                             "print(code, sorted(m for m in sys.modules if m.startswith('flight_server.server')))"],
                            capture_output=True, text=True, cwd=REPO, env={"PYTHONPATH": str(REPO)}, timeout=60)
    assert result.stdout.strip() == "1 []", result.stdout + result.stderr


def test_a_missing_filesystem_names_its_extra():
    result = _run("""
        from catalog import HudiTable
        from catalog.optional import NotInstalledError
        try:
            HudiTable.open("s3://bucket/ns/trips")
        except NotInstalledError as err:
            print(err)
    """, blocked={"s3fs"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "reading s3:// URLs needs the Python package 's3fs', which is not installed: pip install 'hudi-flight[s3]'"
    )


# -- the Spark connector's jar (package data: flight_server/jars/) ------------------------------


def test_the_connector_jar_is_found_or_refused_naming_the_command(tmp_path, monkeypatch):
    import flight_server.spark as spark_entry
    from catalog.optional import NotInstalledError

    assert spark_entry.CATALOG_CLASS == "dev.hudiflight.spark.HudiFlightCatalog"
    monkeypatch.setattr(spark_entry.resources, "files", lambda package: tmp_path / package)
    with pytest.raises(NotInstalledError, match="run `make spark-connector`"):
        spark_entry.connector_jar()
    jar = tmp_path / "flight_server" / "jars" / "hudi-flight-spark-connector.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip
    assert spark_entry.connector_jar() == str(jar)


def test_connector_jar_needs_no_pyspark():
    result = _run("""
        import flight_server.spark as entry
        print(entry.CATALOG_CLASS, callable(entry.connector_jar))
    """, blocked={"pyspark"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "dev.hudiflight.spark.HudiFlightCatalog True"


def test_a_wheel_built_after_the_jar_carries_it(tmp_path):
    """What ``make wheel`` builds (after ``make spark-connector``): the jar is package data, and
    ``connector_jar()`` of the installed wheel returns it."""
    import shutil
    import zipfile

    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    for package in ("catalog", "flight_server", "schemas", "hudi_generator"):
        shutil.copytree(REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__", "*.jar"))
    jar = source / "flight_server" / "jars" / "hudi-flight-spark-connector.jar"
    jar.parent.mkdir(exist_ok=True)
    with zipfile.ZipFile(jar, "w") as built:
        built.writestr("META-INF/services/org.apache.spark.sql.sources.DataSourceRegister", "dev.hudiflight.spark.HudiFlightSource\n")
    wheels = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                    str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("hudi_flight-*.whl")
    assert "flight_server/jars/hudi-flight-spark-connector.jar" in zipfile.ZipFile(wheel).namelist()
    target = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    found = subprocess.run([sys.executable, "-c", "from flight_server.spark import connector_jar; print(connector_jar())"],
                           capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(target)}, timeout=60)
    assert found.stdout.strip() == str(target / "flight_server" / "jars" / "hudi-flight-spark-connector.jar"), found.stderr
