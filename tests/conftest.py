from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures import extract_table


@pytest.fixture(scope="session")
def fixture_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hudi-fixtures")


@pytest.fixture(scope="session")
def fixture_table(fixture_root):
    """``fixture_table("sample_table/cow/v6_nonpartitioned")`` -> extracted base path (str)."""

    def _get(name: str) -> str:
        return str(extract_table(name, fixture_root))

    return _get


@pytest.fixture(scope="module")
def tables(fixture_table):
    """A SQLite registry with every fixture table registered: ``(registry, {identifier: path})``."""
    from catalog.registry import Registry
    from tests.flight_support import register_fixtures

    registry = Registry("sqlite://")
    return registry, register_fixtures(registry, fixture_table)
