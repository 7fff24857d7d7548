"""Metadata tables (``catalog.meta``) on the Spark-written fixtures and generated tables, each
checked against facts found another way: the timeline folder's file names, the files on disk and
their Parquet footers, the rows a read returns, ``hoodie.properties`` as text."""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from catalog import HudiTable, InvalidQueryError
from catalog.meta import META_TABLES
from catalog.meta.redact import REDACTED
from catalog.meta.timeline import TIMELINE_SCHEMA
from hudi_generator.generator import COPY_ON_WRITE, GeneratorSpec

COW_V6 = "sample_table/cow/v6_nonpartitioned"
COW_V9 = "sample_table/cow/v9_txns_simple_meta"
MOR_V9 = "sample_table/mor/avro/v9_txns_simple_meta"
MOR_LOGS = "sample_table/mor/parquet/v6_nonpartitioned_rollback"
#: copy-on-write fixtures: their latest base files hold exactly the table's rows
COW_TABLES = [COW_V6, COW_V9, "sample_table/cow/v6_complexkeygen_hivestyle", "sample_table/cow/v8_simplekeygen_nonhivestyle",
              "sample_table/cow/v9_txns_complex_nometa"]
_STATE_SUFFIXES = {"requested": "REQUESTED", "inflight": "INFLIGHT"}


def _instant_files(base: str, version: int) -> dict[str, tuple[str, str, str | None]]:
    """requested time -> (action, furthest state, completion time) from the timeline folder's names."""
    folder = Path(base) / ".hoodie" / ("timeline" if version >= 8 else "")
    rank = {"REQUESTED": 0, "INFLIGHT": 1, "COMPLETED": 2}
    out: dict[str, tuple[str, str, str | None]] = {}
    for name in os.listdir(folder):
        m = re.fullmatch(r"(\d{17})(?:_(\d{17}))?\.(\w+)(?:\.(requested|inflight))?", name)
        if not m:
            continue
        requested, completed, action, suffix = m.groups()
        if action == "inflight":  # "<t>.inflight": a commit's inflight file
            action, suffix = "commit", "inflight"
        state = _STATE_SUFFIXES[suffix] if suffix else "COMPLETED"
        if requested not in out or rank[state] > rank[out[requested][1]]:
            out[requested] = (action, state, completed)
    return out


@pytest.mark.parametrize("name", [COW_V6, MOR_V9, MOR_LOGS])
def test_timeline_lists_every_instant_file(fixture_table, name):
    base = fixture_table(name)
    table = HudiTable.open(base)
    rows = table.metadata_table("timeline").to_pylist()
    expected = _instant_files(base, table.table_version)
    assert {r["timestamp"]: (r["action"], r["state"], r["completion_time"]) for r in rows} == expected
    assert [r["timestamp"] for r in rows] == sorted(expected)
    assert not any(r["archived"] for r in rows)
    if table.table_version < 8:  # Hudi 0.x's instant files carry no completion time
        assert all(r["completion_time"] is None for r in rows)


@pytest.mark.parametrize("name", COW_TABLES)
def test_file_groups_are_the_files_a_read_returns_rows_from(fixture_table, name):
    base = fixture_table(name)
    table = HudiTable.open(base)
    groups = table.metadata_table("file_groups").to_pylist()
    rows = table.read(columns=["_hoodie_file_name", "_hoodie_partition_path"])
    assert {g["base_file"] for g in groups} == set(rows.column("_hoodie_file_name").to_pylist())
    for g in groups:
        path = Path(base) / g["partition"] / g["base_file"]
        assert g["base_file_size"] == path.stat().st_size
        assert g["base_file_rows"] == pq.read_metadata(path).num_rows
        assert g["base_file"].startswith(g["file_id"]) and g["base_file"].endswith(f"_{g['base_instant']}.parquet")
        assert (g["log_files"], g["log_bytes"], g["pending_compaction"]) == (0, 0, None)
    partitions = table.metadata_table("partitions").to_pylist()
    per_partition = Counter(rows.column("_hoodie_partition_path").to_pylist())
    assert {p["partition"]: p["base_file_rows"] for p in partitions} == dict(per_partition)
    assert sum(p["file_groups"] for p in partitions) == len(groups)
    assert sum(p["bytes"] for p in partitions) == sum(g["base_file_size"] for g in groups)


def test_log_files_behind_a_base_file(fixture_table):
    base = Path(fixture_table(MOR_LOGS))
    (group,) = HudiTable.open(str(base)).metadata_table("file_groups").to_pylist()
    logs = [p for p in base.iterdir() if p.name.startswith(f".{group['file_id']}_") and ".log." in p.name]
    assert group["log_files"] == len(logs) == 3
    assert group["log_bytes"] == sum(p.stat().st_size for p in logs)


def test_commits_count_what_they_wrote(fixture_table):
    base = fixture_table(MOR_V9)
    table = HudiTable.open(base)
    commits = table.metadata_table("commits").to_pylist()
    completed = {t: v for t, v in _instant_files(base, 9).items() if v[1] == "COMPLETED"}
    writes = {t for t, (action, _, _) in completed.items() if action in ("commit", "deltacommit", "replacecommit")}
    assert [c["timestamp"] for c in commits] == sorted(writes)
    assert all(c["completion_time"] == completed[c["timestamp"]][2] for c in commits)
    first = commits[0]
    assert first["operation"] == "INSERT"
    assert first["records_inserted"] == table.read(as_of=first["timestamp"]).num_rows == 8
    assert first["partitions_written"] == 3 and first["files_added"] == 3 and first["files_updated"] == 0
    deletes = [c for c in commits if c["operation"] == "DELETE_PREPPED"]
    assert deletes and all(c["records_deleted"] == 1 and c["files_updated"] == 1 for c in deletes)


def test_time_travel_applies_to_layout_and_commits_only(fixture_table):
    table = HudiTable.open(fixture_table(MOR_V9))
    commits = [c["timestamp"] for c in table.metadata_table("commits").to_pylist()]
    as_of = commits[6]
    assert [c["timestamp"] for c in table.metadata_table("commits", as_of=as_of).to_pylist()] == commits[:7]
    groups = table.metadata_table("file_groups", as_of=as_of).to_pylist()
    assert groups and all(g["base_instant"] <= as_of for g in groups)
    read = table.read(as_of=as_of, columns=["_hoodie_partition_path"])
    partitions = table.metadata_table("partitions", as_of=as_of).to_pylist()
    assert {p["partition"] for p in partitions} == set(read.column("_hoodie_partition_path").to_pylist())
    assert all(p["last_commit"] <= as_of for p in partitions)
    for name in ("timeline", "properties", "indexes", "health"):
        with pytest.raises(InvalidQueryError, match=f"time travel does not apply to the {name} metadata table"):
            table.metadata_table(name, as_of=as_of)
    with pytest.raises(InvalidQueryError, match="no metadata table 'snapshots'"):
        table.metadata_table("snapshots")


def test_properties_are_the_properties_file(fixture_table):
    base = fixture_table(MOR_V9)
    lines = (Path(base) / ".hoodie" / "hoodie.properties").read_text().splitlines()
    keys = {line.split("=", 1)[0] for line in lines if line and not line.startswith("#")}
    rows = HudiTable.open(base).metadata_table("properties").to_pylist()
    assert {r["key"] for r in rows} == keys
    assert {r["key"]: r["value"] for r in rows}["hoodie.table.type"] == "MERGE_ON_READ"


SECRETS = {"hoodie.aws.secret.access.key": "AKIAWRITERSECRET", "fs.s3a.secret.key": "s3a-secret",
           "hoodie.datasource.hive_sync.password": "hive-password", "fs.s3a.session.token": "session-token-value"}


def test_properties_redact_secret_looking_keys(fixture_table, tmp_path):
    base = tmp_path / "t"
    shutil.copytree(fixture_table(MOR_V9), base)
    with open(base / ".hoodie" / "hoodie.properties", "a") as out:
        out.writelines(f"{k}={v}\n" for k, v in SECRETS.items())
    rows = {r["key"]: r["value"] for r in HudiTable.open(str(base)).metadata_table("properties").to_pylist()}
    assert {k: rows[k] for k in SECRETS} == dict.fromkeys(SECRETS, REDACTED)
    assert rows["hoodie.table.type"] == "MERGE_ON_READ"  # the others as written
    assert not any(v in str(rows) for v in SECRETS.values())


def test_indexes_are_the_metadata_table_partitions(fixture_table):
    base = fixture_table(MOR_V9)
    mdt_timeline = Path(base) / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    done = [n.split("_")[0] for n in os.listdir(mdt_timeline) if re.fullmatch(r"\d+_\d+\.deltacommit", n)]
    rows = HudiTable.open(base).metadata_table("indexes").to_pylist()
    assert [r["index"] for r in rows] == ["column_stats", "files", "partition_stats", "record_index",
                                          "secondary_index_merchant_idx", "secondary_index_txn_date_idx"]
    assert {(r["state"], r["current_to"], r["instants_behind"]) for r in rows} == {("COMPLETED", max(done), 0)}
    assert HudiTable.open(fixture_table(COW_V6)).metadata_table("indexes").num_rows == 0


def test_archived_timeline_on_request(generated_table):
    spec = GeneratorSpec(rows=200, partitions=2, commits=5, archive_commits=2, table_type=COPY_ON_WRITE, workers=1)
    table = HudiTable.open(generated_table(spec))
    instants = spec.instants()
    archived = table.metadata_table("archived_timeline")
    assert archived.schema == TIMELINE_SCHEMA
    assert [(r["timestamp"], r["completion_time"], r["archived"]) for r in archived.to_pylist()] == [
        (requested, completed, True) for requested, completed in instants[:2]
    ]
    assert [r["timestamp"] for r in table.metadata_table("timeline").to_pylist() if r["action"] == "commit"] == [
        requested for requested, _ in instants[2:]
    ]
    reaching_back = table.metadata_table("commits", as_of=instants[1][0]).to_pylist()
    assert [(c["timestamp"], c["archived"]) for c in reaching_back] == [(r, True) for r, _ in instants[:2]]


def test_every_metadata_table_has_its_schema(fixture_table):
    table = HudiTable.open(fixture_table(MOR_V9))
    for name, meta in META_TABLES.items():
        assert table.metadata_table(name).schema == meta.schema, name
