"""The sections of a config file (``[server.sql]``, ``[server.tls]``, ...): they read as the
flat keys did, the flat keys still read with a deprecation note, an unknown key in a section is
refused by name, and the shipped examples use the sections."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest

from flight_server.server.config import ServerConfig
from flight_server.server.config_sections import SECTIONS, placement

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
SECTIONED = """
[server]
port = 9000
[server.tls]
cert = "c.pem"
key = "k.pem"
[server.sql]
memory_limit = "3GB"
queue_total = 7
[server.relay]
handshake_seconds = 4.0
body_memory_bytes = 1024
[server.limits]
max_body_bytes = 2048
[server.cache]
disk_cache_bytes = 0
[server.cluster]
heartbeat_interval_seconds = 1.0
[server.ops]
log_format = "json"
"""
FLAT = {"port": 9000, "tls_cert": "c.pem", "tls_key": "k.pem", "sql_memory_limit": "3GB", "sql_queue_total": 7,
        "relay_handshake_seconds": 4.0, "body_memory_bytes": 1024, "max_body_bytes": 2048, "disk_cache_bytes": 0,
        "heartbeat_interval_seconds": 1.0, "log_format": "json"}


def _load(tmp_path: Path, name: str, text: str) -> ServerConfig:
    path = tmp_path / name
    path.write_text(text)
    return ServerConfig.load(path)


def test_sections_read_as_the_flat_keys_did(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="flight_server"):
        sectioned = _load(tmp_path, "s.toml", SECTIONED)
    assert not caplog.records
    flat = _load(tmp_path, "f.json", json.dumps({"server": FLAT}))
    assert sectioned == flat == ServerConfig(**FLAT)


def test_flat_keys_of_sectioned_settings_still_read_with_a_deprecation_note(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="flight_server"):
        config = _load(tmp_path, "f.json", json.dumps({"server": FLAT}))
    assert config.sql_memory_limit == "3GB"
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == len(FLAT) - 1  # port is a [server] key
    assert any("sql_memory_limit is deprecated" in n and "memory_limit in [server.sql]" in n for n in notes)


def test_an_unknown_key_in_a_section_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match=r"unknown configuration keys in \[server.sql\]: memory_limt"):
        _load(tmp_path, "s.toml", "[server.sql]\nmemory_limt = '1GB'\n")
    with pytest.raises(ValueError, match=r"\[server.tls\]: tls_cert"):  # the prefix is dropped in its section
        _load(tmp_path, "s.toml", "[server.tls]\ntls_cert = 'c.pem'\n")


def test_every_sectioned_setting_has_one_place():
    fields = [f.name for f in dataclasses.fields(ServerConfig)]
    places = {name: placement(name) for name in fields}
    placed = [p for p in places.values() if p is not None]
    assert len(placed) == len(set(placed))  # no two settings share a section's key
    assert {p[0] for p in placed} == set(SECTIONS)
    assert not set(SECTIONS) & set(fields)  # a section is never mistaken for a table-valued setting
    assert places["host"] is None and places["tokens"] is None and places["auth_cache_seconds"] is None


@pytest.mark.parametrize("name", ["hudi-flight.toml", "hudi-flight.cluster.example.toml"])
def test_the_examples_use_the_sections(name, caplog):
    with caplog.at_level(logging.WARNING, logger="flight_server"):
        ServerConfig.load(DEPLOY / name)
    assert not caplog.records
