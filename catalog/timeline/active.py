"""The active timeline of a Hudi table (format doc section 2).

Layout 1 (table versions 3 to 6) keeps instant files directly in ``.hoodie/``; layout 2
(versions 8 and 9) keeps them in ``.hoodie/timeline/`` with ``<requested>_<completion>.<action>``
names for completed instants. Instants are identified by their requested time, kept as strings.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import Any, Iterable, Iterator, Sequence

from catalog.storage import Storage
from catalog.table.config import TableConfig
from catalog.timeline.archived import ArchivedTimeline
from catalog.timeline.instant_files import decode_instant_file
from catalog.timeline.instants import STATE_RANK, CommitSet, Instant, parse_instant_file_name

#: actions whose completion changes the data of the table
WRITE_ACTIONS = frozenset({"commit", "deltacommit", "replacecommit"})


def timeline_folder(config: TableConfig) -> str:
    """Where the active timeline's instant files are, relative to the table root."""
    return ".hoodie" if config.timeline_layout_version < 2 else f".hoodie/{config.timeline_path}"


#: the active timeline folder of table version 8+ (timeline layout 2, default timeline path)
DEFAULT_TIMELINE_FOLDER = ".hoodie/timeline"


def load_config_and_timeline(storage: Storage) -> tuple[TableConfig, "Timeline"]:
    """The config and active timeline of the table at ``storage``.

    On a remote store the two are independent requests in most tables, so the listing of the
    default timeline folder (layout 2) is made while ``hoodie.properties`` is read: one round
    trip instead of two. A table whose config names another folder (layout 1, or another
    timeline path) lists that one after; its speculative listing is dropped.
    """
    if storage.arrow_filesystem() is not None:  # local: nothing to overlap
        config = TableConfig.load(storage)
        return config, Timeline.load(storage, config)
    with ThreadPoolExecutor(1, thread_name_prefix="hudi-timeline-listing") as pool:
        guess = pool.submit(Timeline.list_folder, storage, DEFAULT_TIMELINE_FOLDER)
        config = TableConfig.load(storage)
        names = guess.result() if timeline_folder(config) == DEFAULT_TIMELINE_FOLDER else None
    return config, Timeline.load(storage, config, names)


class Timeline(Sequence[Instant]):
    """The completed instants of a table, oldest first (by requested time), plus pending ones."""

    def __init__(self, storage: Storage, config: TableConfig, instants: list[Instant]):
        self._storage = storage
        self._config = config
        # a savepoint carries the requested time of the commit it keeps: both stay on the timeline
        latest: dict[tuple[str, bool], Instant] = {}
        for inst in instants:
            key = (inst.requested_time, inst.action == "savepoint")
            cur = latest.get(key)
            if cur is None or STATE_RANK[inst.state] > STATE_RANK[cur.state]:
                latest[key] = inst
        ordered = [latest[k] for k in sorted(latest)]
        self.completed: list[Instant] = [i for i in ordered if i.is_completed]
        self.pending: list[Instant] = [i for i in ordered if not i.is_completed]
        self._by_time = {i.requested_time: i for i in self.completed if i.action != "savepoint"}
        self.file_names = frozenset(i.file_name for i in instants)
        self._metadata_cache: dict[str, dict[str, Any]] = {}
        self.metadata_bytes = 0  # bytes of the instant files decoded so far
        self._archived: ArchivedTimeline | None = None
        self._listed: frozenset[str] | None = None  # the folder's names when it was last listed

    @staticmethod
    def _names(storage: Storage, config: TableConfig) -> frozenset[str]:
        """The names in the active timeline folder: ONE listing request (names only)."""
        return Timeline.list_folder(storage, timeline_folder(config))

    @staticmethod
    def list_folder(storage: Storage, folder: str) -> frozenset[str]:
        """The names in ``folder`` (none when it is missing): one listing request."""
        try:
            return frozenset(storage.ls_names(folder))
        except FileNotFoundError:
            return frozenset()

    @staticmethod
    def _instants(names: Iterable[str], config: TableConfig) -> list[Instant]:
        """The instants among a timeline folder's ``names`` (a folder such as ``archived``,
        ``metadata`` or ``history`` is no instant file name)."""
        layout = config.timeline_layout_version
        instants = []
        for name in names:
            inst = parse_instant_file_name(name, layout)
            if inst is not None:
                instants.append(inst)
        return instants

    @classmethod
    def load(cls, storage: Storage, config: TableConfig, names: frozenset[str] | None = None) -> "Timeline":
        """The timeline from ``names`` (the timeline folder's, listed by the caller) or a listing."""
        if names is None:
            names = cls._names(storage, config)
        timeline = cls(storage, config, cls._instants(names, config))
        timeline._listed = names
        return timeline

    def refreshed(self) -> "Timeline":
        """The timeline as storage holds it now, from one listing: ``self`` when no instant file
        came or went (the folder lists the names it listed last time: nothing is parsed), else a
        new timeline that keeps the instant files already decoded (an instant file name carries
        its state, and a completed instant's file never changes)."""
        names = self._names(self._storage, self._config)
        if names == self._listed:
            return self
        instants = self._instants(names, self._config)
        if frozenset(i.file_name for i in instants) == self.file_names:
            self._listed = names  # only other entries (a folder) came or went
            return self
        new = Timeline(self._storage, self._config, instants)
        new._listed = names
        new._metadata_cache.update(self._metadata_cache)
        new.metadata_bytes = self.metadata_bytes
        return new

    # -- Sequence over completed instants ----------------------------------------------
    def __getitem__(self, index):  # type: ignore[override]
        return self.completed[index]

    def __len__(self) -> int:
        return len(self.completed)

    def __iter__(self) -> Iterator[Instant]:
        return iter(self.completed)

    def __repr__(self) -> str:
        return f"Timeline({len(self.completed)} completed, {len(self.pending)} pending)"

    # -- queries ------------------------------------------------------------------------
    @cached_property
    def commits(self) -> list[Instant]:
        """Completed data-writing instants (commit, deltacommit, replacecommit), oldest first."""
        return [i for i in self.completed if i.action in WRITE_ACTIONS]

    @property
    def timezone(self) -> str:
        """``hoodie.table.timeline.timezone``: the zone instants are written in, ``LOCAL`` or ``UTC``."""
        return self._config.timeline_timezone

    @property
    def latest_commit(self) -> Instant | None:
        return self.commits[-1] if self.commits else None

    def get(self, requested_time: str) -> Instant | None:
        """A completed instant: active, or archived once the archive was loaded."""
        inst = self._by_time.get(requested_time)
        if inst is None and self._archived is not None:
            inst = self._archived_by_time.get(requested_time)
        return inst

    # -- archived timeline (loaded only for queries older than the active timeline) ------
    def archived(self) -> ArchivedTimeline:
        """The archived timeline, read on first use (format doc 2.8)."""
        if self._archived is None:
            self._archived = ArchivedTimeline.load(self._storage, self._config)
        return self._archived

    @cached_property
    def _archived_by_time(self) -> dict[str, Instant]:
        active = self.start
        return {
            i.requested_time: i
            for i in self.archived().instants
            if active is None or i.requested_time < active
        }

    @cached_property
    def archived_commits(self) -> list[Instant]:
        """Completed data-writing instants of the archived timeline older than the active one."""
        return [i for i in self._archived_by_time.values() if i.action in WRITE_ACTIONS]

    def needs_archive(self, instant: str | None) -> bool:
        """Whether a query reaching back to ``instant`` (``None``: the beginning) needs the
        archived timeline: it is older than the first active instant."""
        return self.start is not None and (instant is None or instant < self.start)

    def all_commits(self, instant: str | None) -> list[Instant]:
        """The completed write instants, archived ones included when a query reaching back to
        ``instant`` needs them, oldest first."""
        if not self.needs_archive(instant):
            return self.commits
        return sorted(self.archived_commits + self.commits, key=lambda i: i.requested_time)

    def is_completed(self, requested_time: str) -> bool:
        return requested_time in self._by_time

    @cached_property
    def commit_set(self) -> CommitSet:
        """The committed-or-not facts of this timeline as plain data (readers carry it)."""
        return CommitSet(
            frozenset(self._by_time),
            frozenset(i.requested_time for i in self.pending if i.action != "savepoint"),
            self.start,
        )

    def is_pending(self, requested_time: str) -> bool:
        return requested_time in self.commit_set.pending

    @cached_property
    def start(self) -> str | None:
        """Requested time of the first active instant (older instants count as committed)."""
        first = [i.requested_time for i in (self.completed + self.pending)]
        return min(first) if first else None

    def is_committed(self, requested_time: str) -> bool:
        """Completed, or older than the active timeline (see :class:`CommitSet`)."""
        return self.commit_set.is_committed(requested_time)

    def pending_instants(self, *actions: str) -> list[Instant]:
        return [i for i in self.pending if not actions or i.action in actions]

    def completion_time(self, requested_time: str) -> str | None:
        inst = self.get(requested_time)
        return inst.completion_time if inst else None

    # -- instant files ------------------------------------------------------------------
    def _folder(self) -> str:
        return timeline_folder(self._config)

    def read_instant_file(self, instant: Instant) -> dict[str, Any]:
        """Decoded content of an instant file (JSON or Avro); ``{}`` for empty files."""
        cached = self._metadata_cache.get(instant.file_name)
        if cached is not None:
            return cached
        path = f"{self._folder()}/{instant.file_name}"
        data = self._storage.read_bytes(path)
        value = decode_instant_file(data, f"{self._storage.uri}/{path}")
        self._metadata_cache[instant.file_name] = value
        self.metadata_bytes += len(data)
        return value

    def commit_metadata(self, instant: Instant) -> dict[str, Any]:
        if instant.requested_time not in self._by_time and self._archived is not None:
            return self._archived.metadata.get(instant.requested_time, {})
        return self.read_instant_file(instant)

    def requested_file(self, instant: Instant) -> dict[str, Any]:
        """The ``.requested`` file of an instant (compaction and clustering plans)."""
        name = f"{instant.requested_time}.{instant.action}.requested"
        path = f"{self._folder()}/{name}"
        try:
            data = self._storage.read_bytes(path)
        except FileNotFoundError:
            return {}
        return decode_instant_file(data, f"{self._storage.uri}/{path}")

    # -- derived facts ------------------------------------------------------------------
    @cached_property
    def clean_horizon(self) -> str | None:
        """The oldest instant whose file versions the cleaner kept, ``None`` when nothing was cleaned.

        As Hudi's time-travel check has it: the latest completed clean's ``earliestCommitToRetain``;
        when that is empty (cleaning by file versions), the first completed write of the active
        timeline, since older instants may have lost their files.
        """
        cleans = [i for i in self.completed if i.action == "clean"]
        if not cleans:
            return None
        retained = self.read_instant_file(cleans[-1]).get("earliestCommitToRetain")
        if retained:
            return str(retained)
        return self.commits[0].requested_time if self.commits else None

    def replaced_file_groups(self, as_of: str | None) -> dict[str, set[str]]:
        """Partition -> file ids retired by completed replacecommits at or before ``as_of``."""
        out: dict[str, set[str]] = {}
        for inst in self.all_commits(as_of) if as_of is not None else self.commits:
            if inst.action != "replacecommit" or (as_of is not None and inst.requested_time > as_of):
                continue
            meta = self.commit_metadata(inst)
            for partition, ids in (meta.get("partitionToReplaceFileIds") or {}).items():
                out.setdefault(partition or "", set()).update(ids or [])
        return out

    def latest_schema_json(self, as_of: str | None = None) -> str | None:
        """The Avro schema (without meta fields) recorded by the latest write (at or before
        ``as_of``) that has one."""
        commits = self.commits if as_of is None else [i for i in self.all_commits(as_of) if i.requested_time <= as_of]
        for inst in reversed(commits):
            meta = self.commit_metadata(inst)
            schema = (meta.get("extraMetadata") or {}).get("schema")
            if schema:
                return schema
        return None

    @property
    def completion_times(self) -> bool:
        """Whether the timeline records completion times (table version 8+, layout 2)."""
        return self._config.table_version >= 8

    def range_time(self, instant: Instant) -> str:
        """The time an incremental range compares: the completion time in table version 8+, the
        requested time before (format doc 7.5)."""
        if self.completion_times and instant.completion_time:
            return instant.completion_time
        return instant.requested_time

    def instants_in_range(self, start: str | None, end: str | None) -> list[Instant]:
        """Completed write instants for an incremental read of ``(start, end]``."""
        out = []
        commits = self.commits
        if commits and (start is None or start < self.range_time(commits[0])):
            commits = self.all_commits(None)
        for inst in commits:
            t = self.range_time(inst)
            if (start is None or t > start) and (end is None or t <= end):
                out.append(inst)
        return out


__all__ = ["WRITE_ACTIONS", "Timeline", "timeline_folder"]
