"""Session-wide fixtures: the Spark-written fixture tables, generated tables, a fixture catalog."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.fixtures import FIXTURES_DIR, HUDI_DIR, extract_external, extract_table


def pytest_configure(config: pytest.Config) -> None:
    if not HUDI_DIR.is_dir():
        raise pytest.UsageError(
            f"the Spark-written fixture tables are not at {FIXTURES_DIR}: "
            "set HUDI_FLIGHT_FIXTURES to the shared fixtures folder (the one holding hudi/)"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every Spark test runs on one xdist worker (``make test`` distributes by ``loadgroup``):
    one local Spark JVM per run instead of one per worker, whose Python workers would otherwise
    compete with a second JVM for the two cores and miss Spark's fixed 10 s connect-back."""
    for item in items:
        if item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.xdist_group("spark"))


@pytest.fixture(scope="session")
def fixture_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hudi-fixtures")


@pytest.fixture(scope="session")
def fixture_table(fixture_root):
    """``fixture_table("sample_table/cow/v6_nonpartitioned")`` -> extracted base path (str)."""

    def _get(name: str) -> str:
        return str(extract_table(name, fixture_root))

    return _get


@pytest.fixture(scope="session")
def external_table(fixture_root):
    """``external_table("trino/stock_ticks_mor")`` -> extracted base path (str) of an external
    fixture (``FIXTURES_DIR / "external"``); shared by the session: copy it to change it."""

    def _get(name: str) -> str:
        return str(extract_external(name, fixture_root))

    return _get


@pytest.fixture(scope="session")
def written_table(fixture_root):
    """``written_table(WrittenTable)`` -> extracted base path (str) of a table Hudi's Spark writer
    wrote (``tests/data/tables``); shared by the session: copy it to change it."""

    def _get(table) -> str:
        return str(table.extract(fixture_root / "written"))

    return _get


@pytest.fixture(scope="session")
def generated_table(tmp_path_factory):
    """``generated_table(spec)`` -> base path of a table the generator wrote for ``spec``.

    Written once per session and spec; treat it as read-only (copy it with
    ``generated_copy`` to change it).
    """
    from hudi_generator.generator import generate

    cache: dict = {}

    def _get(spec) -> str:
        if spec not in cache:
            path = tmp_path_factory.mktemp("generated") / "table"
            generate(str(path), spec)
            cache[spec] = str(path)
        return cache[spec]

    return _get


@pytest.fixture
def generated_copy(generated_table, tmp_path):
    """``generated_copy(spec)`` -> a private, writable copy of ``generated_table(spec)``."""

    def _copy(spec) -> str:
        target = tmp_path / "table-copy"
        shutil.copytree(generated_table(spec), target)
        return str(target)

    return _copy


@pytest.fixture(scope="module")
def tables(fixture_table):
    """A SQLite registry with every fixture table registered: ``(registry, {identifier: path})``."""
    from flight_server.server.registry import Registry
    from tests.support.servers import register_fixtures

    registry = Registry("sqlite://")
    return registry, register_fixtures(registry, fixture_table)


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    """A test CA with a server certificate (127.0.0.1, localhost) and a client certificate, plus a
    second, unrelated CA (``pki.other``), as PEM files: made once per session."""
    from tests.support.certs import make_pki

    folder = tmp_path_factory.mktemp("pki")
    return make_pki(folder / "ca"), make_pki(folder / "other", "unrelated test CA")
