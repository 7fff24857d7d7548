"""The ``health`` metadata table: a table's health against named thresholds, and what to do.

One row per check. ``status`` is ``OK``, ``INFO`` (a fact worth knowing, nothing to do) or
``WARN``; ``threshold`` names the limit and where it came from (a table property, or Hudi's
default); ``detail`` says what was found, sizes in human units; ``remedy`` is, for a ``WARN``,
the Hudi action and the settings that fix it (null otherwise). The checks:

- ``last_commit``: the latest completed write and its age in seconds (``INFO``: how fresh a
  table must be is its writer's business);
- ``small_files``: base files of the latest slices smaller than ``hoodie.parquet.small.file.limit``
  (the table's property, else Hudi's 100 MiB). ``WARN`` when packing each partition's small files
  into files of that size would leave at least ``min_excess_files`` files fewer *and* at least
  ``min_excess_share`` of the base files fewer: the threshold scales with the table, so a
  12-row table with a few tiny files is fine and a table with thousands of them is not;
- ``log_backlog``: the file group with the most log files behind its base file (merge-on-read);
  ``WARN`` past ``hoodie.compact.inline.max.delta.commits`` (default 5), the number of delta
  commits after which Hudi schedules a compaction;
- ``pending_compaction`` and ``pending_clustering``: how many are pending and the age of the
  oldest; ``WARN`` past ``max_pending_age`` (a day unless given);
- ``replaced_file_groups`` and ``old_file_slices``: file groups retired by clustering or insert
  overwrite, and earlier versions of live groups, still on storage (``catalog.meta.reclaimable``);
  ``INFO`` while the cleaner keeps them for time travel, ``WARN`` once the cleaner's retention
  (``hoodie.cleaner.commits.retained``) has passed them and they are still there;
- ``orphaned_files``: data files on storage that no commit accounts for; ``WARN`` above 0;
- ``metadata_table_lag``: completed data-table instants the metadata table has not recorded;
  ``WARN`` above 0.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import pyarrow as pa

from catalog.meta.config import metadata_lag, metadata_timeline
from catalog.meta.layout import GroupFacts, group_facts
from catalog.meta.reclaimable import (
    MAX_LISTED_PARTITIONS,
    OlderSlice,
    ReplacedGroup,
    Retention,
    cleanable_slices,
    older_slices,
    orphaned_files,
    replaced_groups,
    retention,
)
from catalog.meta.units import human_age, human_bytes
from catalog.state import TableState
from catalog.timeline import Timeline
from catalog.timeline.instants import Instant

HEALTH_SCHEMA = pa.schema(
    [
        pa.field("check", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("value", pa.int64()),
        pa.field("threshold", pa.string(), nullable=False),
        pa.field("detail", pa.string(), nullable=False),
        pa.field("remedy", pa.string()),
    ]
)

OK, WARN, INFO = "OK", "WARN", "INFO"
SMALL_FILE_LIMIT_KEY = "hoodie.parquet.small.file.limit"
DEFAULT_SMALL_FILE_LIMIT = 104_857_600
MAX_DELTA_COMMITS_KEY = "hoodie.compact.inline.max.delta.commits"
DEFAULT_MAX_DELTA_COMMITS = 5

_CLEAN = (
    "clean the table: Spark SQL CALL run_clean(table => '<table>'), and keep hoodie.clean.automatic=true on "
    "writers (hoodie.clean.async=true to clean beside the write); hoodie.cleaner.commits.retained sets how many "
    "commits of history stay"
)

#: what fixes each check's WARN: the Hudi action and the settings behind it (Hudi's configuration
#: reference and Spark SQL procedures; ``<table>`` stands for the table's name in Spark)
REMEDIES = {
    "small_files": (
        "cluster the table: Spark SQL CALL run_clustering(table => '<table>'), or let writers do it with "
        "hoodie.clustering.inline=true (every hoodie.clustering.inline.max.commits commits) or "
        "hoodie.clustering.async.enabled=true; clustering packs files below "
        "hoodie.clustering.plan.strategy.small.file.limit into files of "
        "hoodie.clustering.plan.strategy.target.file.max.bytes. Writers top up small files with new "
        "inserts when hoodie.parquet.small.file.limit is above 0"
    ),
    "log_backlog": (
        "compact the table: Spark SQL CALL run_compaction(op => 'run', table => '<table>'), or let writers do it "
        "with hoodie.compact.inline=true and hoodie.compact.inline.max.delta.commits=N (streaming writers: "
        "hoodie.datasource.compaction.async.enable=true)"
    ),
    "pending_compaction": (
        "run the pending plans: Spark SQL CALL run_compaction(op => 'execute', table => '<table>'), or an "
        "async compactor (hoodie.datasource.compaction.async.enable=true); a failed one is rolled back and "
        "re-run by the next compaction"
    ),
    "pending_clustering": (
        "run the pending plans: Spark SQL CALL run_clustering(op => 'execute', table => '<table>'), or keep "
        "hoodie.clustering.async.enabled=true on a writer"
    ),
    "replaced_file_groups": _CLEAN,
    "old_file_slices": _CLEAN,
    "orphaned_files": (
        "failed writes are rolled back by the next writer (hoodie.cleaner.policy.failed.writes=EAGER) or by "
        "the cleaner (LAZY, with several writers); files no rollback names stay: list them with Hudi's "
        "org.apache.hudi.utilities.HoodieRepairTool --mode dry_run, then remove them with --mode repair "
        "--backup-path DIR"
    ),
    "metadata_table_lag": (
        "writers keep the metadata table current with hoodie.metadata.enable=true (the default); one left "
        "behind is rebuilt with Spark SQL CALL delete_metadata_table(table => '<table>') and "
        "CALL create_metadata_table(table => '<table>'); until then planning here lists storage"
    ),
}


@dataclass(frozen=True)
class HealthThresholds:
    """The limits of the checks that are not table properties."""

    max_pending_age: timedelta = timedelta(days=1)
    min_excess_files: int = 10  # small files: WARN only when packing saves at least this many files
    min_excess_share: float = 0.1  # ... and at least this share of the base files
    max_listed_partitions: int = MAX_LISTED_PARTITIONS  # orphans: storage listed only up to here


DEFAULT_THRESHOLDS = HealthThresholds()


@dataclass(frozen=True)
class Check:
    """One health check's outcome (``remedy``: set for a ``WARN``)."""

    check: str
    status: str
    value: int | None
    threshold: str
    detail: str
    remedy: str | None = field(default=None)


def _warned(check: str, warn: bool, value: int | None, threshold: str, detail: str, otherwise: str = OK) -> Check:
    """A check whose status is ``WARN`` (with its remedy) or ``otherwise``."""
    if warn:
        return Check(check, WARN, value, threshold, detail, REMEDIES[check])
    return Check(check, otherwise, value, threshold, detail)


def _int_property(state: TableState, key: str, default: int) -> tuple[int, str]:
    """A numeric table property and where it came from (the table, or Hudi's default)."""
    text = state.config.properties.get(key, "").strip()
    if text.isdigit():
        return int(text), f"{key} of the table"
    return default, f"{key} default"


def instant_moment(instant: str, zone: str) -> datetime | None:
    """When an instant (``yyyyMMddHHmmss[SSS]``) was written, in the timeline's zone (``UTC`` or
    this process's local zone); ``None`` for Hudi's reserved instants, which are no dates."""
    try:
        moment = datetime.strptime(instant[:14], "%Y%m%d%H%M%S")
    except ValueError:
        return None
    millis = instant[14:17]
    if millis.isdigit():
        moment = moment.replace(microsecond=int(millis) * 1000)
    return moment.replace(tzinfo=timezone.utc) if zone.upper() == "UTC" else moment.astimezone()


def _age(instant: Instant, timeline: Timeline, now: datetime) -> timedelta | None:
    moment = instant_moment(instant.requested_time, timeline.timezone)
    return now - moment if moment is not None else None


def _last_commit(state: TableState, now: datetime) -> Check:
    threshold = "none (how fresh the table must be is its writer's matter)"
    timeline = state.timeline
    latest = timeline.latest_commit
    if latest is None:
        return Check("last_commit", INFO, None, threshold, "no completed write on the active timeline")
    moment = instant_moment(latest.completion_time or latest.requested_time, timeline.timezone)
    age = now - moment if moment is not None else None
    operation = timeline.commit_metadata(latest).get("operationType")
    done = f", completed {latest.completion_time}" if timeline.completion_times and latest.completion_time else ""
    detail = (f"{latest.action} {latest.requested_time}{f' ({operation})' if operation else ''}{done}, "
              f"{human_age(age)} ago; {len(timeline.commits)} writes on the active timeline")
    seconds = max(0, int(age.total_seconds())) if age is not None else None
    return Check("last_commit", INFO, seconds, threshold, detail)


def _small_files(state: TableState, facts: list[GroupFacts], limits: HealthThresholds) -> Check:
    limit, source = _int_property(state, SMALL_FILE_LIMIT_KEY, DEFAULT_SMALL_FILE_LIMIT)
    count: Counter[str] = Counter()
    size: Counter[str] = Counter()
    bases = 0
    for f in facts:
        base = f.file_slice.base_file
        if base is None:
            continue
        bases += 1
        if base.size < limit:
            count[f.file_slice.partition] += 1
            size[f.file_slice.partition] += base.size
    # how many files fewer each partition would have with its small files packed to the limit
    excess = {p: n - max(1, math.ceil(size[p] / limit)) if limit > 0 else 0 for p, n in count.items()}
    fewer = sum(excess.values())
    needed = max(limits.min_excess_files, math.ceil(limits.min_excess_share * bases))
    threshold = (f"base file < {human_bytes(limit)} ({source}); WARN when packing each partition's small files "
                 f"would save {needed} files or more (at least {limits.min_excess_files}, and "
                 f"{limits.min_excess_share:.0%} of the {bases} base files)")
    detail = (f"{sum(count.values())} of {bases} base files are smaller than {human_bytes(limit)} "
              f"({human_bytes(sum(size.values()))} together); packed, they would be {fewer} files fewer")
    if fewer:
        worst = max(sorted(excess), key=lambda p: excess[p])
        detail += f", most in {worst or '(root)'!r} ({count[worst]} small files)"
    return _warned("small_files", fewer >= needed and fewer > 0, sum(count.values()), threshold, detail)


def _log_backlog(state: TableState, facts: list[GroupFacts]) -> Check:
    limit, source = _int_property(state, MAX_DELTA_COMMITS_KEY, DEFAULT_MAX_DELTA_COMMITS)
    threshold = f"more than {limit} log files behind a base file ({source})"
    if not state.config.is_mor:
        return Check("log_backlog", OK, 0, threshold, "copy-on-write table: no log files")
    worst = max(facts, key=lambda f: (len(f.file_slice.log_files), sum(x.size for x in f.file_slice.log_files)),
                default=None)
    if worst is None or not worst.file_slice.log_files:
        return Check("log_backlog", OK, 0, threshold, "no file group has log files")
    fs = worst.file_slice
    behind = sum(1 for f in facts if len(f.file_slice.log_files) > limit)
    detail = (f"file group {fs.file_id} in {fs.partition or '(root)'!r}: {len(fs.log_files)} log files, "
              f"{human_bytes(sum(x.size for x in fs.log_files))}; {behind} file group(s) past the threshold")
    return _warned("log_backlog", behind > 0, len(fs.log_files), threshold, detail)


def _pending(name: str, instants: list[Instant], timeline: Timeline, now: datetime, max_age: timedelta) -> Check:
    threshold = f"pending longer than {human_age(max_age)}"
    if not instants:
        return Check(name, OK, 0, threshold, "none pending")
    oldest = min(instants, key=lambda i: i.requested_time)
    age = _age(oldest, timeline, now)
    late = age is not None and age > max_age
    detail = f"{len(instants)} pending; oldest {oldest.requested_time} ({oldest.state}), {human_age(age)} old"
    return _warned(name, late, len(instants), threshold, detail)


def _clustering(timeline: Timeline) -> list[Instant]:
    """Pending clustering: ``clustering`` instants (table version 8+) and pending replacecommits
    (before, clustering was requested as a replacecommit)."""
    return timeline.pending_instants("clustering", "replacecommit")


def _retention_threshold(kept: Retention) -> str:
    window = f"the last {kept.commits} commits ({kept.source})"
    return f"WARN when still on storage after the cleaner's retention: {window}"


def _retained_until(kept: Retention) -> str:
    if kept.earliest is None:
        return f"the table has at most {kept.commits} commits, so the cleaner keeps every version"
    return f"the cleaner keeps what a read at {kept.earliest} or later may need"


def _replaced(groups: list[ReplacedGroup], kept: Retention) -> Check:
    threshold = _retention_threshold(kept)
    if not groups:
        return Check("replaced_file_groups", OK, 0, threshold, "no replaced file group on storage")
    late = [g for g in groups if kept.cleanable(g.replaced_by)]
    files = sum(len(g.files) for g in groups)
    detail = (f"{len(groups)} replaced file group(s) on storage ({files} files, "
              f"{human_bytes(sum(g.size for g in groups))}), replaced by {len({g.replaced_by for g in groups})} "
              f"replacecommit(s); {len(late)} past the retention ({human_bytes(sum(g.size for g in late))}); "
              f"{_retained_until(kept)}")
    return _warned("replaced_file_groups", bool(late), len(groups), threshold, detail, otherwise=INFO)


def _old_slices(slices: list[OlderSlice], cleanable: list[OlderSlice], kept: Retention) -> Check:
    threshold = _retention_threshold(kept)
    if not slices:
        return Check("old_file_slices", OK, 0, threshold, "every file group has one file slice on storage")
    size = sum(s.file_slice.total_size for s in slices)
    detail = (f"{len(slices)} older file slice(s) of live file groups ({sum(s.files for s in slices)} files, "
              f"{human_bytes(size)}); {len(cleanable)} past the retention "
              f"({human_bytes(sum(s.file_slice.total_size for s in cleanable))}); {_retained_until(kept)}")
    return _warned("old_file_slices", bool(cleanable), len(slices), threshold, detail, otherwise=INFO)


def _orphans(state: TableState, limits: HealthThresholds) -> Check:
    threshold = "more than 0 data files on storage that no commit accounts for"
    found = orphaned_files(state, limits.max_listed_partitions)
    if found is None:
        detail = (f"not looked for: the table has more than {limits.max_listed_partitions} partitions, "
                  "one storage listing each")
        return Check("orphaned_files", INFO, None, threshold, detail)
    if not found:
        return Check("orphaned_files", OK, 0, threshold, "every data file on storage belongs to a commit")
    kinds = Counter("log" if f.name.startswith(".") else "base" for f in found)
    detail = (f"{len(found)} orphaned file(s) ({kinds['base']} base, {kinds['log']} log; "
              f"{human_bytes(sum(f.size for f in found))}), e.g. {found[0].path!r}")
    return _warned("orphaned_files", True, len(found), threshold, detail)


def _metadata_lag(state: TableState) -> Check:
    threshold = "more than 0 data-table instants not in the metadata table"
    mdt = metadata_timeline(state)
    if mdt is None:
        return Check("metadata_table_lag", INFO, None, threshold, "no metadata table")
    lag = metadata_lag(state.timeline, mdt)
    detail = f"metadata table current to {lag.current_to}, data table at {lag.data_latest}"
    return _warned("metadata_table_lag", lag.behind > 0, lag.behind, threshold, detail)


def health_checks(state: TableState, now: datetime | None = None,
                  limits: HealthThresholds = DEFAULT_THRESHOLDS) -> list[Check]:
    """The checks of the module docstring, in that order (``now``: the clock ages are measured by)."""
    now = now or datetime.now(timezone.utc)
    facts = list(group_facts(state.fs_view, None))
    timeline = state.timeline
    kept = retention(state)
    slices = older_slices(state)
    return [
        _last_commit(state, now),
        _small_files(state, facts, limits),
        _log_backlog(state, facts),
        _pending("pending_compaction", timeline.pending_instants("compaction"), timeline, now, limits.max_pending_age),
        _pending("pending_clustering", _clustering(timeline), timeline, now, limits.max_pending_age),
        _replaced(replaced_groups(state), kept),
        _old_slices(slices, cleanable_slices(slices, kept, timeline), kept),
        _orphans(state, limits),
        _metadata_lag(state),
    ]


def health_table(state: TableState, now: datetime | None = None) -> pa.Table:
    """:func:`health_checks` as rows."""
    rows = [c.__dict__ for c in health_checks(state, now)]
    return pa.Table.from_pylist(rows, schema=HEALTH_SCHEMA)


__all__ = [
    "DEFAULT_THRESHOLDS",
    "HEALTH_SCHEMA",
    "REMEDIES",
    "Check",
    "HealthThresholds",
    "health_checks",
    "health_table",
    "instant_moment",
]
