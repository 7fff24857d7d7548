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
from flight_server.server.config_sections import PLACEMENT, SECTION_TYPES, SECTIONS, SqlSection, placement

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
    assert config.sql.memory_limit == "3GB"
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == len(FLAT) - 1  # port is a [server] key
    assert any("sql_memory_limit is deprecated" in n and "memory_limit in [server.sql]" in n for n in notes)


def test_an_unknown_key_in_a_section_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match=r"unknown configuration keys in \[server.sql\]: memory_limt"):
        _load(tmp_path, "s.toml", "[server.sql]\nmemory_limt = '1GB'\n")
    with pytest.raises(ValueError, match=r"\[server.tls\]: tls_cert"):  # the prefix is dropped in its section
        _load(tmp_path, "s.toml", "[server.tls]\ntls_cert = 'c.pem'\n")


def test_every_sectioned_setting_has_one_place():
    fields = {f.name for f in dataclasses.fields(ServerConfig)}
    placed = list(PLACEMENT.values())
    assert len(placed) == len(set(placed))  # no two settings share a section's key
    assert {p[0] for p in placed} == set(SECTIONS) == set(SECTION_TYPES) and set(SECTIONS) <= fields
    assert not fields & PLACEMENT.keys()  # a flat name never shadows a [server] key
    assert placement("host") is None and placement("tokens") is None and placement("auth_cache_seconds") is None
    assert placement("sql_timeout_seconds") == ("sql", "timeout_seconds")
    assert placement("relay_idle_seconds") == ("relay", "idle_seconds")
    assert placement("max_connections") == ("relay", "max_connections")
    assert placement("tls_client_ca") == ("tls", "client_ca")


def test_the_class_mirrors_the_file(tmp_path):
    config = _load(tmp_path, "s.toml", SECTIONED)
    assert config.port == 9000
    assert (config.tls.cert, config.tls.key) == ("c.pem", "k.pem")
    assert (config.sql.memory_limit, config.sql.queue_total) == ("3GB", 7)
    assert (config.relay.handshake_seconds, config.relay.body_memory_bytes) == (4.0, 1024)
    assert config.limits.max_body_bytes == 2048 and config.cache.disk_cache_bytes == 0
    assert config.cluster.heartbeat_interval_seconds == 1.0 and config.ops.log_format == "json"
    for section, kind in SECTION_TYPES.items():  # every section key is a field of its class and back
        assert {key for s, key in PLACEMENT.values() if s == section} == {f.name for f in dataclasses.fields(kind)}


def test_flat_keywords_build_sections_and_each_config_owns_its_sections():
    base = ServerConfig(sql_timeout_seconds=5.0, tls_cert="c.pem", max_connections=3)
    assert base.sql.timeout_seconds == 5.0 and base.tls.cert == "c.pem" and base.relay.max_connections == 3
    assert base.sql.memory_limit == SqlSection.memory_limit  # the rest of the section keeps its defaults
    over = ServerConfig(sql=SqlSection(threads=7), sql_timeout_seconds=9.0)  # flat names apply over a section
    assert (over.sql.threads, over.sql.timeout_seconds) == (7, 9.0)
    copy = dataclasses.replace(base, sql_threads=3)
    assert (copy.sql.threads, copy.sql.timeout_seconds, base.sql.threads) == (3, 5.0, SqlSection.threads)
    copy.sql.timeout_seconds = 1.0
    assert base.sql.timeout_seconds == 5.0  # a copy never shares a section object
    assert base.updated({"sql_queue_total": 5, "cache": None}).sql.queue_total == 5


def test_unknown_names_and_mistyped_sections_are_refused_by_name():
    with pytest.raises(TypeError, match="unknown settings: sql_timeout"):
        ServerConfig(sql_timeout=1.0)
    with pytest.raises(TypeError, match="unknown settings: timeout_seconds"):  # a section key alone is no setting
        ServerConfig(timeout_seconds=1.0)
    with pytest.raises(TypeError, match="section sql must be a SqlSection"):
        ServerConfig(sql={"timeout_seconds": 1.0})
    with pytest.raises(ValueError, match="unknown configuration keys: sql_timeout"):
        ServerConfig().updated({"sql_timeout": 1.0})


def test_a_section_that_is_not_a_table_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"configuration key sql must be a table: \[server.sql\]"):
        _load(tmp_path, "s.json", json.dumps({"server": {"sql": 3}}))


def test_every_setting_is_listed_under_its_file_key():
    settings = dict(ServerConfig(tls_cert="c.pem", port=1).settings())
    assert settings["tls.cert"] == "c.pem" and settings["port"] == 1
    assert len(settings) == len(PLACEMENT) + len(dataclasses.fields(ServerConfig)) - len(SECTIONS)


@pytest.mark.parametrize("name", ["hudi-flight.toml", "hudi-flight.cluster.example.toml"])
def test_the_examples_use_the_sections(name, caplog):
    with caplog.at_level(logging.WARNING, logger="flight_server"):
        ServerConfig.load(DEPLOY / name)
    assert not caplog.records
