"""The ``health`` metadata table (``catalog.meta.health``) on Spark-written fixtures and generated
tables, each finding checked against the files on disk: replaced file groups, older file slices
and orphaned files the cleaner or Hudi's repair tool would take, thresholds that scale with the
table, sizes in human units, and a remedy naming Hudi's action and settings for every WARN."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from catalog import HudiTable
from catalog.meta.health import HEALTH_SCHEMA, REMEDIES, Check, HealthThresholds, health_checks
from catalog.meta.units import human_age, human_bytes
from catalog.table.files import BaseFile, LogFile
from hudi_generator.generator import COPY_ON_WRITE, GeneratorSpec

COW_V6 = "sample_table/cow/v6_nonpartitioned"
COW_V9 = "sample_table/cow/v9_txns_simple_meta"
MOR_V9 = "sample_table/mor/avro/v9_txns_simple_meta"
MOR_LOGS = "sample_table/mor/parquet/v6_nonpartitioned_rollback"
CHECKS = ["last_commit", "small_files", "log_backlog", "pending_compaction", "pending_clustering",
          "replaced_file_groups", "old_file_slices", "orphaned_files", "metadata_table_lag"]


def _copy(source: str, tmp_path: Path) -> Path:
    target = tmp_path / "t"
    shutil.copytree(source, target)
    return target


def _set_properties(base: Path, **values: str) -> None:
    path = base / ".hoodie" / "hoodie.properties"
    path.write_text(path.read_text() + "".join(f"{k.replace('_', '.')}={v}\n" for k, v in values.items()))


def _checks(base: Path | str, now: datetime | None = None) -> dict[str, Check]:
    checks = health_checks(HudiTable.open(str(base)).state, now)
    assert [c.check for c in checks] == CHECKS
    for c in checks:  # every WARN says what fixes it, and nothing else does
        assert (c.remedy is not None) == (c.status == "WARN"), c
    return {c.check: c for c in checks}


def _data_files(base: Path) -> list[Path]:
    return [p for p in base.rglob("*") if ".hoodie" not in p.parts and p.is_file()
            and (BaseFile.parse(p.name) or LogFile.parse(p.name))]


def test_human_units():
    assert [human_bytes(n) for n in (0, 1023, 1024, 1536, 104_857_600, 3 << 40)] == [
        "0 B", "1023 B", "1.0 KiB", "1.5 KiB", "100.0 MiB", "3.0 TiB"]
    assert [human_age(timedelta(seconds=s)) for s in (5, 61, 3 * 3600 + 120, 86400)] == [
        "5s", "0h 1m", "3h 2m", "1d 0h 0m"]
    assert human_age(None) == "age unknown"


def test_health_names_its_thresholds(fixture_table, tmp_path):
    base = _copy(fixture_table(MOR_LOGS), tmp_path)
    now = datetime(2025, 1, 27, tzinfo=timezone.utc)
    checks = _checks(base, now)
    assert (checks["small_files"].status, checks["small_files"].value) == ("OK", 1)
    assert "base file < 100.0 MiB (hoodie.parquet.small.file.limit default)" in checks["small_files"].threshold
    assert (checks["log_backlog"].status, checks["log_backlog"].value) == ("OK", 3)
    assert "more than 5 log files" in checks["log_backlog"].threshold
    assert checks["metadata_table_lag"].status == "INFO"

    _set_properties(base, hoodie_compact_inline_max_delta_commits="2", hoodie_parquet_small_file_limit="1000")
    (group,) = HudiTable.open(str(base)).metadata_table("file_groups").to_pylist()
    plan = {"operations": [{"partitionPath": "", "fileId": group["file_id"]}]}  # a JSON plan (table version 6)
    (base / ".hoodie" / "20250126100000000.compaction.requested").write_text(json.dumps(plan))
    now = datetime(2025, 1, 29, tzinfo=timezone.utc)  # the plan is about three days old
    table = HudiTable.open(str(base))
    (pending_group,) = table.metadata_table("file_groups").to_pylist()
    assert pending_group["pending_compaction"] == "20250126100000000"
    assert (pending_group["log_files"], pending_group["log_bytes"]) == (group["log_files"], group["log_bytes"])
    checks = _checks(base, now)
    backlog = checks["log_backlog"]
    assert (backlog.status, backlog.value) == ("WARN", 3)
    assert backlog.threshold == "more than 2 log files behind a base file (hoodie.compact.inline.max.delta.commits of the table)"
    assert f"3 log files, {human_bytes(group['log_bytes'])}" in backlog.detail
    assert "hoodie.compact.inline=true" in backlog.remedy and "run_compaction" in backlog.remedy
    assert (checks["small_files"].status, checks["small_files"].value) == ("OK", 0)
    pending = checks["pending_compaction"]
    assert (pending.status, pending.value) == ("WARN", 1) and "20250126100000000 (REQUESTED)" in pending.detail
    assert pending.threshold == "pending longer than 1d 0h 0m"
    assert pending.remedy == REMEDIES["pending_compaction"]


def test_the_issues_table_replaced_groups_and_orphaned_logs_are_told(fixture_table, tmp_path):
    """Issue 40's example: a table with 7 replaced file groups and 5 orphaned log files answered
    OK to every check. The groups are the ones its insert overwrite (2 in region=eu) and its
    clustering (5) retired (MOR_V9's .sql); the orphans are the log files of a deltacommit that
    failed before it reached the timeline."""
    base = _copy(fixture_table(MOR_V9), tmp_path)
    table = HudiTable.open(str(base))
    live = table.metadata_table("file_groups").to_pylist()
    failed = "20260307170000000"  # after every instant of the table; on no timeline
    for group in live:
        log = base / group["partition"] / f".{group['file_id']}_{failed}.log.1_0-1-1"
        log.write_bytes(b"#HUDI#")  # a block header the failed writer never finished
    checks = _checks(base)
    live_files = {p.name for g in live for p in (base / g["partition"]).iterdir() if p.name.startswith(g["file_id"])}
    replaced_on_disk = {BaseFile.parse(p.name).file_id for p in _data_files(base)
                        if p.name.endswith(".parquet") and p.name not in live_files}
    assert len(live) == 5 and len(replaced_on_disk) == 7

    replaced = checks["replaced_file_groups"]
    assert (replaced.status, replaced.value) == ("INFO", 7)  # kept: the table has 13 commits, 10 are retained
    assert "0 past the retention" in replaced.detail and "replaced by 2 replacecommit(s)" in replaced.detail
    orphans = checks["orphaned_files"]
    assert (orphans.status, orphans.value) == ("WARN", 5)
    assert "(0 base, 5 log; 30 B)" in orphans.detail and failed in orphans.detail
    assert "HoodieRepairTool --mode dry_run" in orphans.remedy
    assert checks["last_commit"].status == "INFO" and checks["last_commit"].value > 0

    _set_properties(base, hoodie_cleaner_commits_retained="2")  # the clustering is the oldest retained commit
    replaced = _checks(base)["replaced_file_groups"]
    assert (replaced.status, replaced.value) == ("WARN", 7)
    assert "2 past the retention" in replaced.detail and "the last 2 commits (hoodie.cleaner.commits.retained of the table)" in replaced.threshold
    assert "run_clean" in replaced.remedy and "hoodie.clean.automatic=true" in replaced.remedy
    _set_properties(base, hoodie_cleaner_commits_retained="1")  # both replacecommits are older than the last write
    assert "7 past the retention" in _checks(base)["replaced_file_groups"].detail


def test_orphans_follow_hudis_repair_rule(fixture_table, tmp_path):
    """Base files of: a write in progress (not orphaned), a write no timeline knows (orphaned), a
    completed write whose stats do not name them (a retried task's leftover: orphaned), a write
    older than the active timeline (archived: not looked up)."""
    base = _copy(fixture_table(COW_V6), tmp_path)
    assert _checks(base)["orphaned_files"].status == "OK"
    (original,) = [p for p in _data_files(base) if p.name == HudiTable.open(str(base)).metadata_table(
        "file_groups").column("base_file")[0].as_py()]
    parsed = BaseFile.parse(original.name)
    in_progress = "20300101000000000"
    (base / ".hoodie" / f"{in_progress}.commit.requested").write_text("")
    names = {
        "in progress": f"{parsed.file_id}_0-0-0_{in_progress}.parquet",
        "unknown": f"{parsed.file_id}_0-0-0_20300101000000001.parquet",
        "retried task": f"{parsed.file_id}_9-9-9_{parsed.instant}.parquet",
        "archived": f"{parsed.file_id}_0-0-0_19990101000000000.parquet",
    }
    for name in names.values():
        shutil.copy(original, base / name)
    orphans = _checks(base)["orphaned_files"]
    assert (orphans.status, orphans.value) == ("WARN", 2)
    assert f"(2 base, 0 log; {human_bytes(2 * original.stat().st_size)})" in orphans.detail


def test_orphans_are_not_looked_for_in_a_table_of_many_partitions(fixture_table):
    """One storage listing per partition: past the bound, the check says it did not look."""
    state = HudiTable.open(fixture_table(COW_V9)).state  # 3 partitions
    (check,) = [c for c in health_checks(state, limits=HealthThresholds(max_listed_partitions=2))
                if c.check == "orphaned_files"]
    assert (check.status, check.value, check.remedy) == ("INFO", None, None)
    assert check.detail.startswith("not looked for: the table has more than 2 partitions")


def test_every_hudi_written_table_has_no_orphans(fixture_table):
    """No false alarm: the Spark-written fixtures (logs named by base instant or by writer,
    CDC logs, metadata tables) have every data file accounted for."""
    for name in (COW_V6, COW_V9, MOR_V9, MOR_LOGS, "sample_table/mor/avro/v9_txns_nonpart_meta",
                 "quickstart_trips_table/mor/avro/v8_trips_8i3u1d"):
        orphans = _checks(fixture_table(name))["orphaned_files"]
        assert (orphans.status, orphans.value) == ("OK", 0), name


def test_older_slices_past_the_retention_are_cleanable(generated_copy, tmp_path):
    """Four copy-on-write commits rewrite touched files: every file group keeps its older base
    files (counted on disk); with two commits retained, those superseded before the third
    commit are the cleaner's."""
    spec = GeneratorSpec(rows=400, partitions=2, commits=4, update_fraction=0.5, delete_fraction=0.0,
                         table_type=COPY_ON_WRITE, metadata_table=False, workers=1)
    base = Path(generated_copy(spec))
    per_group = Counter(BaseFile.parse(p.name).file_id for p in _data_files(base))
    older = sum(n - 1 for n in per_group.values())
    assert older > 0
    checks = _checks(base)
    slices = checks["old_file_slices"]
    assert (slices.status, slices.value) == ("INFO", older)
    assert f"{older} older file slice(s) of live file groups ({older} files" in slices.detail
    assert "the table has at most 10 commits, so the cleaner keeps every version" in slices.detail

    _set_properties(base, hoodie_cleaner_commits_retained="2")
    instants = sorted({BaseFile.parse(p.name).instant for p in _data_files(base)})
    earliest_retained = instants[-2]
    versions: dict[str, list[str]] = {}
    for p in _data_files(base):
        versions.setdefault(BaseFile.parse(p.name).file_id, []).append(BaseFile.parse(p.name).instant)
    cleanable = sum(1 for v in versions.values() for a, b in zip(sorted(v), sorted(v)[1:]) if b < earliest_retained)
    slices = _checks(base)["old_file_slices"]
    assert slices.status == ("WARN" if cleanable else "INFO") and cleanable > 0
    assert f"; {cleanable} past the retention" in slices.detail and "run_clean" in slices.remedy


@pytest.mark.parametrize(("files_per_partition", "status"), [(3, "OK"), (20, "WARN")])
def test_small_files_threshold_scales_with_the_table(generated_table, files_per_partition, status):
    """The same 600 rows in 2 partitions: as 6 tiny files packing saves 4 files (fine); as 40
    it saves 38, past both the 10-file floor and a tenth of the files."""
    spec = GeneratorSpec(rows=600, partitions=2, files_per_partition=files_per_partition,
                         table_type=COPY_ON_WRITE, metadata_table=False, workers=1)
    check = _checks(generated_table(spec))["small_files"]
    files = 2 * files_per_partition
    assert (check.status, check.value) == (status, files)
    assert f"they would be {files - 2} files fewer" in check.detail
    assert (check.remedy is not None) == (status == "WARN")
    if check.remedy:
        assert "run_clustering" in check.remedy and "hoodie.clustering.inline=true" in check.remedy


def test_a_twelve_row_table_has_no_small_files_warning(fixture_table):
    """Issue 40: the 12-row fixture with 5 tiny base files in 3 partitions was a WARN."""
    check = _checks(fixture_table(COW_V9))["small_files"]
    assert (check.status, check.value) == ("OK", 5)


def test_last_commit_age(fixture_table):
    base = fixture_table(COW_V9)
    latest = max(m.group(1) for m in (re.fullmatch(r"(\d{17})_(\d{17})\.(?:commit|replacecommit)", n)
                                      for n in os.listdir(Path(base) / ".hoodie" / "timeline")) if m)
    written = datetime.strptime(latest, "%Y%m%d%H%M%S%f").astimezone()  # LOCAL timeline zone
    now = written + timedelta(days=2, hours=3, minutes=4)
    check = _checks(base, now)["last_commit"]
    assert check.status == "INFO"
    completed = HudiTable.open(base).state.timeline.commits[-1].completion_time
    assert check.value == int((now - datetime.strptime(completed, "%Y%m%d%H%M%S%f").astimezone()).total_seconds())
    assert check.detail.startswith(f"commit {latest} (INSERT), completed {completed}, ")
    assert "12 writes on the active timeline" in check.detail


def test_sizes_are_in_human_units(fixture_table):
    checks = _checks(fixture_table(MOR_V9))
    texts = [c.threshold + " " + c.detail for c in checks.values()]
    assert not [t for t in texts if re.search(r"\d{5,} bytes", t)]
    assert "100.0 MiB" in checks["small_files"].threshold


def test_health_sees_a_lagging_metadata_table(fixture_table, tmp_path):
    base = _copy(fixture_table(COW_V9), tmp_path)
    assert _checks(base)["metadata_table_lag"].status == "OK"
    timeline = base / ".hoodie" / "timeline"
    data_latest = max(n.split("_")[0] for n in os.listdir(timeline) if re.fullmatch(r"\d+_\d+\.commit", n))
    mdt = base / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    for name in os.listdir(mdt):
        if re.fullmatch(r"\d+_\d+\.deltacommit", name) and name.split("_")[0] >= data_latest:
            os.remove(mdt / name)  # the metadata table never finished recording the last commits
    with pytest.warns(Warning):  # planning falls back to storage listing: the metadata table is behind
        lag = _checks(base)["metadata_table_lag"]
    assert lag.status == "WARN" and lag.value >= 1 and f"data table at {data_latest}" in lag.detail
    assert "hoodie.metadata.enable=true" in lag.remedy


def test_the_table_has_its_schema(fixture_table):
    table = HudiTable.open(fixture_table(MOR_V9)).metadata_table("health")
    assert table.schema == HEALTH_SCHEMA and table.column("check").to_pylist() == CHECKS
