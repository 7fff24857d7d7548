"""Operations without surprises: anonymous reads are their own switch, a warehouse pointed at one
table serves it, a table the server cannot read is listed with its reason, and an empty warehouse
says what the server looks for."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.flight as flight
import pytest

from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry, find_hudi_tables
from flight_server.server.security.access import Access
from flight_server.server.security.users import ANONYMOUS
from tests.support.servers import running_server

TABLE = "sample_table/cow/v6_nonpartitioned"


class _Users:
    """The one question anonymous access asks of the user store."""

    def __init__(self, has_users: bool):
        self._has_users = has_users

    def has_users(self) -> bool:
        return self._has_users


@pytest.mark.parametrize(
    ("mode", "open_address", "has_users", "tokens", "allowed"),
    [
        ("auto", True, False, (), True),
        ("auto", True, True, (), False),  # a first user ends anonymous reads...
        ("on", True, True, ("reader",), True),  # ...unless the operator keeps them on
        ("off", True, False, (), False),
        ("on", False, False, (), False),  # never on an exposed address (without --insecure)
    ],
)
def test_anonymous_reads_are_a_separate_switch(mode, open_address, has_users, tokens, allowed):
    access = Access(_Users(has_users), tokens, open_address, anonymous_read=mode)  # type: ignore[arg-type]
    assert access.anonymous_allowed() is allowed
    assert (access.rights(ANONYMOUS) is not None) is allowed


def test_an_unknown_anonymous_mode_is_refused():
    with pytest.raises(ValueError, match="anonymous_read must be one of auto, on, off"):
        Access(_Users(False), (), True, anonymous_read="yes")  # type: ignore[arg-type]


def test_a_warehouse_pointed_at_a_table_serves_it(fixture_table, tmp_path):
    table = tmp_path / "lake" / "trips"
    shutil.copytree(fixture_table(TABLE), table)
    assert find_hudi_tables(str(table)) == [("lake.trips", str(table))]
    assert find_hudi_tables(str(tmp_path)) == [("lake.trips", f"{tmp_path}/lake/trips")]


def test_an_unreadable_table_is_listed_with_its_reason(fixture_table, tmp_path):
    good, broken = tmp_path / "ns" / "good", tmp_path / "ns" / "broken"
    shutil.copytree(fixture_table(TABLE), good)
    shutil.copytree(fixture_table(TABLE), broken)
    registry = Registry("sqlite://")
    registry.register_table("ns.good", str(good))
    registry.register_table("ns.broken", str(broken))
    (broken / ".hoodie" / "hoodie.properties").write_text("hoodie.table.version=42\n")
    config = ServerConfig(port=0, state_dir=str(tmp_path / "state"), allowed_roots=[str(tmp_path)])
    with running_server(config, registry=registry) as server:
        client = flight.connect(f"grpc://127.0.0.1:{server.port}")
        infos = {i.descriptor.path[1].decode(): i for i in client.list_flights()}
        client.close()
    assert set(infos) == {"good", "broken"}
    assert infos["good"].total_records > 0 and not infos["good"].app_metadata
    reason = json.loads(infos["broken"].app_metadata)["unreadable"]
    assert reason.startswith("table ns.broken/.hoodie/hoodie.properties") and str(tmp_path) not in reason
    assert infos["broken"].total_records == -1 and len(infos["broken"].schema) == 0


def test_an_empty_warehouse_says_what_a_table_is(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "flight_server.cli", "serve", "--port", "0", "--warehouse", str(tmp_path / "empty"),
         "--state-dir", str(tmp_path / "state"), "--refresh-interval", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]
    finally:
        proc.terminate()
        proc.wait(30)
    assert "serving 0 table(s)" in lines[0]
    assert ".hoodie/hoodie.properties" in lines[1] and "--warehouse" in lines[1]


def test_refresh_interval_and_anonymous_switch_reach_the_config(tmp_path):
    path = Path(tmp_path / "c.toml")
    path.write_text("[server]\nrefresh_interval_seconds = 5\nanonymous_read = \"on\"\n")
    config = ServerConfig.load(str(path))
    assert (config.refresh_interval_seconds, config.anonymous_read) == (5, "on")
    assert config.auth_settings().anonymous_read == "on"
