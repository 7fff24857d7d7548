"""Reader of a table's metadata table (MDT, format doc section 6).

The MDT lives under ``<table>/.hoodie/metadata`` and is itself a merge-on-read table: each MDT
partition (``files``, ``column_stats``, ``partition_stats``, ``record_index``, ...) has file
groups whose base files are HFiles and whose log files hold HFILE_DATA blocks (and DELETE
blocks). Records are ``HoodieMetadataRecord`` Avro values keyed by the HFile row.

This module answers "the merged records of these keys in that MDT partition", applying:

* the MDT's own timeline for which MDT files count (the core's ``FileSystemView``, section 3.5);
* the valid-instant rule of 6.5 for which log blocks count, and rollback command blocks (4.6);
* Hudi's per-key merge (6.4): file-list maps merge entry by entry, other payloads replace, a
  DELETE block removes the key.

Anything it cannot trust raises :class:`MetadataTableError`; callers fall back to storage.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import decimal
import hashlib
import io
import json
import re
import threading
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Iterable, Iterator, Sequence

import fastavro
import pyarrow as pa

from catalog.errors import CorruptTableError, HudiError
from catalog.format.hfile import HFileReader
from catalog.format.log_block import decode_delete_block, fold_blocks, rollback_target
from catalog.format.log_file import BlockType, LogBlock, iter_log_blocks_in
from catalog.fs_view import FileSystemView
from catalog.listing.storage import StorageListing
from catalog.listing.xxh64 import xxh64_digest
from catalog.storage import Storage
from catalog.table.config import TableConfig
from catalog.table.files import FileSlice
from catalog.timeline import Timeline
from catalog.timeline.active import load_config_and_timeline

METADATA_DIR = ".hoodie/metadata"
#: where the data table's index definitions are (relative to its base path)
INDEX_DEFS_PROPERTY, DEFAULT_INDEX_DEFS = "hoodie.table.index.defs.path", ".hoodie/.index_defs/index.json"
ALL_PARTITIONS_KEY = "__all_partitions__"
NON_PARTITIONED_KEY = "."
FILES, COLUMN_STATS, PARTITION_STATS, RECORD_INDEX = "files", "column_stats", "partition_stats", "record_index"
#: MDT deltacommits of index (re)initialisation carry requested times with this prefix (6.5 rule 5)
_INIT_PREFIX = "00000000000000"
_HASH_SEED = 0xDABADABA - (1 << 32)  # Java int seed, sign-extended to 64 bits (6.7)
_SHARD_NUMBER = re.compile(r"-(\d{4})-\d+$")


#: data-table actions whose MDT deltacommit always writes the ``files`` partition (compaction and
#: log compaction complete as commit / deltacommit)
_FILE_CHANGING = frozenset({"commit", "deltacommit", "replacecommit", "clean", "rollback"})

#: marks, among the instants a log file rolled back, that it also held a log-compacted block
COMPACTION = "<log compaction>"

class MetadataTableError(HudiError, ValueError):
    """The metadata table cannot be used for this read (missing, corrupt or out of sync)."""


# -- key encodings (6.7, 6.2) -----------------------------------------------------------------
def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def column_hash(column: str) -> str:
    """Base64 of xxh64 of a column name (first part of column/partition stats keys)."""
    return _b64(xxh64_digest(column.encode("utf-8"), _HASH_SEED & 0xFFFFFFFFFFFFFFFF))


def partition_hash(partition: str) -> str:
    """Base64 of xxh64 of a partition path; a non-partitioned table hashes ``.``."""
    return column_hash(partition or NON_PARTITIONED_KEY)


def file_hash(file_name: str) -> str:
    return _b64(hashlib.md5(file_name.encode("utf-8")).digest())


def column_stats_key(column: str, partition: str, file_name: str) -> str:
    return column_hash(column) + partition_hash(partition) + file_hash(file_name)


def partition_stats_key(column: str, partition: str) -> str:
    return column_hash(column) + partition_hash(partition)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (32-bit signed, over UTF-16 code units)."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def shard_of(key: str, groups: int) -> int:
    """The MDT file group index of ``key`` among ``groups`` (record index sharding, 6.2)."""
    return abs(java_string_hash(key)) % groups


# -- record decoding ------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _parsed_schema(text: str) -> Any:
    try:
        return fastavro.parse_schema(json.loads(text))
    except (ValueError, TypeError, KeyError) as err:
        raise CorruptTableError(f"metadata record schema does not parse: {err}") from err


def decode_records(
    cells: Iterable[tuple[bytes, bytes]], schema_text: str | None, where: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, HoodieMetadataRecord) per HFile cell; the key comes from the row (6.3, 5.7).

    Wrapper unions (column-stats values) decode as ``(record name, {"value": ...})`` so the
    wrapper type, which carries the value type in index version 1, is kept.
    """
    if not schema_text:
        raise CorruptTableError(f"{where}: no HoodieMetadataRecord schema (file info / SCHEMA header)")
    schema = _parsed_schema(schema_text)
    for row, value in cells:
        try:
            record: Any = fastavro.schemaless_reader(
                io.BytesIO(value), schema, None, return_record_name=True, return_record_name_override=True
            )
            key = row.decode("utf-8")
        except (EOFError, ValueError, IndexError, TypeError, UnicodeDecodeError) as err:
            raise CorruptTableError(f"{where}: metadata record {row[:64]!r} does not decode: {err}") from err
        record["key"] = key
        yield key, record


_TIMESTAMP_UNITS = {15: "ms", 16: "us", 17: "ns", 18: "ms", 19: "us", 20: "ns"}
_EPOCH = datetime.date(1970, 1, 1)


def stats_value(wrapper: Any, value_type: dict[str, Any] | None, arrow_type: pa.DataType) -> Any:
    """A column-stats ``minValue``/``maxValue`` as a Python value of ``arrow_type`` (6.7).

    ``wrapper`` is ``(wrapper record name, {"value": v})`` or ``None``. Index version 2 names the
    type in ``valueType.typeOrdinal``; version 1 in the wrapper. Raises ``ValueError`` for values
    it cannot place (callers then do not prune).
    """
    if wrapper is None:
        return None
    name, payload = wrapper if isinstance(wrapper, tuple) else ("", wrapper)
    value = payload["value"] if isinstance(payload, dict) else payload
    ordinal = (value_type or {}).get("typeOrdinal", 0)
    wrapper_name = name.rsplit(".", 1)[-1]
    if ordinal == 10 and isinstance(value, bytes):
        precision_scale = ((value_type or {}).get("additionalInfo") or "").split(",")
        if len(precision_scale) != 2:
            raise ValueError(f"decimal statistics without precision/scale: {value_type}")
        return decimal.Decimal(int.from_bytes(value, "big", signed=True)).scaleb(-int(precision_scale[1]))
    if (ordinal == 12 or wrapper_name == "DateWrapper") and isinstance(value, int):
        return _EPOCH + datetime.timedelta(days=value)
    unit = _TIMESTAMP_UNITS.get(ordinal) or ("us" if wrapper_name == "TimestampMicrosWrapper" else None)
    if unit is not None and isinstance(value, int):
        if not pa.types.is_timestamp(arrow_type):
            raise ValueError(f"timestamp statistics for a {arrow_type} column")
        return pa.scalar(value, pa.timestamp(unit)).cast(pa.timestamp(arrow_type.unit)).value
    if ordinal in (13, 14) or wrapper_name in ("TimeMicrosWrapper", "ArrayWrapper"):
        raise ValueError(f"statistics of type {wrapper_name or ordinal} are not used for pruning")
    return value


def merge_record(older: dict[str, Any] | None, newer: dict[str, Any]) -> dict[str, Any]:
    """Combine two versions of one MDT key (HoodieMetadataPayload semantics, 6.4 and 6.7)."""
    if older is None:
        return newer
    old_files, new_files = older.get("filesystemMetadata"), newer.get("filesystemMetadata")
    if old_files is None or new_files is None:
        return newer
    merged = dict(old_files)
    for name, info in new_files.items():
        prev = merged.get(name)
        if info["isDeleted"]:
            if prev is not None and not prev["isDeleted"]:
                del merged[name]
            else:
                merged[name] = info
        elif prev is not None and not prev["isDeleted"]:
            merged[name] = {"size": max(prev["size"], info["size"]), "isDeleted": False}
        else:
            merged[name] = info
    return {**newer, "filesystemMetadata": merged}


def live_files(record: dict[str, Any] | None) -> dict[str, int]:
    """File name -> size of the live entries of a ``files``-partition record."""
    entries = (record or {}).get("filesystemMetadata") or {}
    return {name: int(info["size"]) for name, info in entries.items() if not info["isDeleted"]}


@dataclass(frozen=True)
class KeySelection:
    """Which keys to read: all (both ``None``), exact keys, or key prefixes."""

    keys: frozenset[str] | None = None
    prefixes: tuple[str, ...] | None = None

    def cells(self, reader: HFileReader) -> Iterator[tuple[bytes, bytes]]:
        if self.keys is not None:
            return reader.lookup(sorted(self.keys))
        if self.prefixes is not None:
            return reader.lookup_prefixes(self.prefixes)
        return reader.scan()


@dataclass(frozen=True)
class _SliceRecords:
    """The merged records of one whole MDT file slice, and what an incremental update of them
    must re-check: which block instants the logs held (and whether each counted), and the
    instants of the blocks that were kept."""

    files: tuple[tuple[str, int], ...]  # (name, size) of the base file, then the log files
    records: dict[str, dict[str, Any]]
    seen: tuple[tuple[str | None, bool], ...]
    kept: frozenset[str | None]

    @cached_property
    def nbytes(self) -> int:
        """Approximate memory of the records."""
        entries = sum(len(rec.get("filesystemMetadata") or ()) for rec in self.records.values())
        return len(self.records) * _RECORD_BYTES + entries * _FILE_ENTRY_BYTES


def _slice_files(fs: FileSlice) -> tuple[tuple[str, int], ...]:
    base = ((fs.base_file.name, fs.base_file.size),) if fs.base_file is not None else (("", 0),)
    return base + tuple((lf.name, lf.size) for lf in fs.log_files)


#: approximate bytes one decoded MDT record costs in memory, per file entry it lists
_RECORD_BYTES, _FILE_ENTRY_BYTES = 400, 160
#: keyed lookups (statistics, record index) kept per MDT version
_MAX_LOOKUPS = 4096
#: an opened HFile's tail (trailer, index, file info) held in memory
_READER_BYTES = 64 << 10


class MetadataTable:
    """The MDT of one data table, checked against the data table's timeline.

    ``previous``: the same MDT as of an older data timeline. Its config is kept, its timeline
    is refreshed with one listing, and whole-partition reads (the ``files`` partition) start
    from its merged records, reading only the log files added since, whenever that is exact
    (see :meth:`_update`).
    """

    def __init__(
        self, storage: Storage, config: TableConfig, timeline: Timeline, previous: "MetadataTable | None" = None
    ):
        self.data_storage = storage
        self.data_config = config
        self.data_timeline = timeline
        self.storage: Storage = previous.storage if previous is not None else storage.child(METADATA_DIR)
        self.config: TableConfig
        self.timeline: Timeline
        try:
            if previous is not None:
                self.config = previous.config
                self.timeline = previous.timeline.refreshed()
            else:
                self.config, self.timeline = load_config_and_timeline(self.storage)
        except (HudiError, OSError) as err:
            raise MetadataTableError(f"{self.storage.uri}: metadata table unreadable: {err}") from err
        if self.config.base_file_format != "HFILE" or not self.config.is_mor:
            raise MetadataTableError(
                f"{self.storage.uri}: not a metadata table (base format {self.config.base_file_format})"
            )
        self._view = FileSystemView(self.config, self.timeline, StorageListing(self.storage, self.config))
        self._slices: dict[str, list[FileSlice]] = {}
        self._whole: dict[tuple[str, str], _SliceRecords] = {}
        self._seeds = dict(previous._whole) if previous is not None else {}
        self._lookups: dict[tuple[str, str, KeySelection], dict[str, dict[str, Any]]] = {}
        self._lookup_lock = threading.Lock()  # cached readers keep read-ahead state
        self._readers: dict[str, HFileReader] = {}
        self._log_blocks: dict[tuple[str, str], list[tuple[LogBlock, HFileReader | None]]] = {}
        self._deleted_keys: dict[tuple[str, int], frozenset[str]] = {}  # delete blocks of the lookup path
        self.log_bytes = 0
        self.lookup_records = 0
        self.update_counts = {"incremental": 0, "full": 0}

    def estimated_bytes(self) -> int:
        """Approximate memory of the records this object keeps (whole partitions, lookups)."""
        total = self.lookup_records * _RECORD_BYTES + self.log_bytes
        total += sum(_READER_BYTES + r.cached_bytes for r in list(self._readers.values()))
        total += sum(r.cached_bytes for blocks in list(self._log_blocks.values()) for _, r in blocks if r is not None)
        return total + sum(whole.nbytes for whole in list(self._whole.values()))

    # -- validity (6.5) -------------------------------------------------------------------
    @cached_property
    def valid_instants(self) -> frozenset[str]:
        """Instants whose MDT log blocks may be read: completed data-table instants; completed MDT
        deltacommits not pending on the data table (which admits MDT-only and index-initialising
        ``00000000000000xxx`` instants); completed MDT rollbacks/restores; rolled-back instants."""
        dt = self.data_timeline
        valid = {i.requested_time for i in dt.completed}
        for inst in self.timeline.completed:
            if inst.action == "deltacommit" and not dt.is_pending(inst.requested_time):
                valid.add(inst.requested_time)
            elif inst.action in ("rollback", "restore"):
                valid.add(inst.requested_time)
        return frozenset(valid | self._dt_rolled_back)

    @cached_property
    def _dt_rolled_back(self) -> set[str]:
        """Instants undone by the data table's completed rollbacks and restores (6.5 rule 3)."""
        out: set[str] = set()
        for inst in self.data_timeline.completed:
            if inst.action in ("rollback", "restore"):
                out |= _rolled_back(self.data_timeline.read_instant_file(inst))
        return out

    def check_in_sync(self) -> None:
        """Raise unless the MDT has caught up with, and is not ahead of, the data timeline."""
        mdt_done = {i.requested_time for i in self.timeline.completed if i.action == "deltacommit"}
        latest = self.data_timeline.latest_commit
        if latest is not None and latest.requested_time not in mdt_done:
            raise MetadataTableError(
                f"{self.storage.uri}: metadata table is behind the data table "
                f"(no completed deltacommit for {latest.requested_time})"
            )
        dt = self.data_timeline
        known = {i.requested_time for i in dt.completed} | self._dt_rolled_back
        first = dt.start or ""
        for t in sorted(mdt_done):
            if _is_table_service_instant(t, known):
                continue
            if t >= first and t not in known and not dt.is_pending(t) and not t.startswith(_INIT_PREFIX):
                raise MetadataTableError(
                    f"{self.storage.uri}: metadata table is ahead of the data table "
                    f"(deltacommit {t} has no data-table instant)"
                )

    def check_complete(self, partition: str) -> None:
        """Raise unless the logs of ``partition`` hold a block of every completed MDT deltacommit
        of a data-table instant newer than the partition's base files.

        A log file cut short at a block boundary (or emptied) parses without error but lacks
        whole blocks: merging without them silently drops files from the listing. Every data-table
        action that changes files (``_FILE_CHANGING``; not indexing, savepoint or restore)
        rewrites the ``files`` partition, so its deltacommit with no block there means lost
        blocks. Call after :meth:`read` of the whole partition.
        """
        slices = self.file_slices(partition)
        wholes = [self._whole.get((partition, fs.file_id)) for fs in slices]
        if not slices or any(w is None for w in wholes):
            return
        based = max((fs.base_instant for fs in slices if fs.base_file is not None), default="")
        seen = {instant for w in wholes if w is not None for instant, _ in w.seen}
        data_instants = {i.requested_time for i in self.data_timeline.completed if i.action in _FILE_CHANGING}
        for inst in self.timeline.completed:
            t = inst.requested_time
            if inst.action == "deltacommit" and t > based and t in data_instants and t not in seen:
                raise MetadataTableError(
                    f"{self.storage.uri}/{partition}: no log block of deltacommit {t} "
                    "(a metadata log file is empty or cut short)"
                )

    # -- slices and records ---------------------------------------------------------------
    def file_slices(self, partition: str) -> list[FileSlice]:
        """Latest MDT file slices of an MDT partition, ordered by file id."""
        if partition not in self._slices:
            try:
                slices = list(self._view.latest_file_slices([partition], None))
            except (HudiError, OSError) as err:
                raise MetadataTableError(f"{self.storage.uri}/{partition}: cannot build slices: {err}") from err
            self._slices[partition] = sorted(slices, key=lambda s: s.file_id)
        return self._slices[partition]

    def read(self, partition: str, selection: KeySelection = KeySelection()) -> dict[str, dict[str, Any]]:
        """Merged records of an MDT partition (all file groups), restricted to ``selection``."""
        out: dict[str, dict[str, Any]] = {}
        for fs in self.file_slices(partition):
            if selection.keys is None and selection.prefixes is None:
                out.update(self._read_whole(fs).records)
            else:
                out.update(self.read_slice(fs, selection))
        return out

    def read_slice(self, fs: FileSlice, selection: KeySelection, remember: bool = True) -> dict[str, dict[str, Any]]:
        """Merged records of one MDT file slice: base HFile, then valid log blocks in order.

        Keyed lookups are remembered for this MDT version (its files never change), unless
        ``remember`` is false (records too large to keep per lookup: bloom filters)."""
        memo_key = (fs.partition, fs.file_id, selection)
        hit = self._lookups.get(memo_key)
        if hit is not None:
            return hit
        merged: dict[str, dict[str, Any]] = {}
        with self._lookup_lock, self._errors_named(fs):
            if fs.base_file is not None:
                reader = self._base_reader(fs)
                for key, rec in decode_records(selection.cells(reader), reader.avro_schema, reader.name):
                    merged[key] = merge_record(merged.get(key), rec)
            for block, block_reader in self._log_readers(fs):
                self._apply_block(block, selection, merged, block_reader, remember=True)
        if remember and len(self._lookups) < _MAX_LOOKUPS:
            self._lookups[memo_key] = merged
            self.lookup_records += len(merged) + 1
        return merged

    def _base_reader(self, fs: FileSlice) -> HFileReader:
        """The opened base HFile of ``fs`` (index and looked-up blocks kept for this version)."""
        path = fs.base_file_path
        assert path is not None and fs.base_file is not None
        reader = self._readers.get(path)
        if reader is None:
            reader = self._readers[path] = HFileReader.from_storage(self.storage, path, size=fs.base_file.size or None)
        return reader

    def _log_readers(self, fs: FileSlice) -> list[tuple[LogBlock, HFileReader | None]]:
        """The valid blocks of ``fs``'s log files, each data block opened, kept for this version."""
        key = (fs.partition, fs.file_id)
        blocks = self._log_blocks.get(key)
        if blocks is None:
            blocks = []
            for block in self._valid_blocks(fs.log_file_paths)[0]:
                reader = None
                if block.block_type is not BlockType.DELETE:
                    reader = HFileReader.from_bytes(block.content or b"", self._where(block))
                self.log_bytes += len(block.content or b"")
                blocks.append((block, reader))
            self._log_blocks[key] = blocks
        return blocks

    def _where(self, block: LogBlock) -> str:
        return f"{self.storage.uri}/{block.path} block at {block.offset}"

    @contextlib.contextmanager
    def _errors_named(self, fs: FileSlice) -> Iterator[None]:
        try:
            yield
        except MetadataTableError:
            raise
        except (HudiError, OSError) as err:
            raise MetadataTableError(f"{self.storage.uri}/{fs.partition}/{fs.file_id}: {err}") from err

    def _read_base(self, fs: FileSlice, selection: KeySelection, merged: dict[str, dict[str, Any]]) -> None:
        if fs.base_file is not None:
            path = fs.base_file_path
            assert path is not None
            reader = HFileReader.from_storage(self.storage, path, size=fs.base_file.size or None)
            for key, rec in decode_records(selection.cells(reader), reader.avro_schema, reader.name):
                merged[key] = merge_record(merged.get(key), rec)

    def _read_whole(self, fs: FileSlice) -> _SliceRecords:
        """All merged records of one MDT file slice, updated from the previous version's when exact."""
        key = (fs.partition, fs.file_id)
        whole = self._whole.get(key)
        if whole is not None:
            return whole
        selection = KeySelection()
        with self._errors_named(fs):
            seed = self._seeds.pop(key, None)
            whole = self._update(fs, seed) if seed is not None else None
            if whole is None:
                merged: dict[str, dict[str, Any]] = {}
                self._read_base(fs, selection, merged)
                blocks, seen = self._valid_blocks(fs.log_file_paths)
                for block in blocks:
                    self._apply_block(block, selection, merged)
                whole = _SliceRecords(_slice_files(fs), merged, seen, frozenset(b.instant_time for b in blocks))
                self.update_counts["full"] += 1
            else:
                self.update_counts["incremental"] += 1
        self._whole[key] = whole
        return whole

    def _update(self, fs: FileSlice, seed: _SliceRecords) -> _SliceRecords | None:
        """``seed`` plus the blocks of the log files added since, or ``None`` when that would not
        equal a full read: another base file, an older log file that changed or went away, an
        older block whose validity changed, or a rollback of an older block."""
        files = _slice_files(fs)
        if files[: len(seed.files)] != seed.files:
            return None
        valid = self.valid_instants
        if any((instant in valid) != counted for instant, counted in seed.seen):
            return None
        new_paths = fs.log_file_paths[len(seed.files) - 1 :]
        blocks, seen, rolled_back = self._fold(new_paths)
        if COMPACTION in rolled_back or rolled_back & seed.kept:
            return None
        merged = dict(seed.records)
        selection = KeySelection()
        for block in blocks:
            self._apply_block(block, selection, merged)
        return _SliceRecords(files, merged, seen + seed.seen, seed.kept | {b.instant_time for b in blocks})

    def _valid_blocks(self, paths: list[str]) -> tuple[list[LogBlock], tuple[tuple[str | None, bool], ...]]:
        """HFILE_DATA and DELETE blocks of valid instants, with rollbacks applied (4.6, 6.5);
        and (instant, counted) of every data or delete block seen."""
        blocks, seen, _ = self._fold(paths)
        return blocks, seen

    def _fold(self, paths: list[str]) -> tuple[list[LogBlock], tuple[tuple[str | None, bool], ...], set[str | None]]:
        """The valid blocks of ``paths`` (rollbacks and log compaction applied), (instant,
        counted) of every data or delete block seen, and the instants rolled back (plus
        ``COMPACTION`` when a log-compacted block was among them)."""
        valid = self.valid_instants
        # MDT log files are small: fetch each whole (to its current end), in one parallel batch
        contents = self.storage.read_ranges(paths, [0] * len(paths), [None] * len(paths)) if paths else []
        seen: list[tuple[str | None, bool]] = []
        rolled_back: set[str | None] = set()

        def accept(block: LogBlock) -> bool:
            if block.block_type not in (BlockType.HFILE_DATA, BlockType.DELETE):
                raise CorruptTableError(f"{block.path}: unexpected {block.block_type.name} block in a metadata log")
            if "COMPACTED_BLOCK_TIMES" in block.header:
                # log compaction (applied by fold_blocks) replaces earlier blocks: an update
                # merged onto a previous version's records would not equal a full read
                rolled_back.add(COMPACTION)
                for compacted in str(block.header["COMPACTED_BLOCK_TIMES"]).split(","):
                    seen.append((compacted.strip(), compacted.strip() in valid))
            counted = block.instant_time in valid
            seen.append((block.instant_time, counted))
            return counted

        def noting_rollbacks(blocks: Iterable[LogBlock]) -> Iterator[LogBlock]:
            for block in blocks:
                if block.block_type is BlockType.COMMAND:
                    rolled_back.add(rollback_target(block))
                yield block

        # strict: a corrupt MDT block raises (and planning falls back) instead of being skipped
        blocks = (
            b
            for path, data in zip(paths, contents)
            for b in iter_log_blocks_in(data, path, self.storage.uri, strict=True)
        )
        return fold_blocks(noting_rollbacks(blocks), accept), tuple(seen), rolled_back

    def _apply_block(
        self,
        block: LogBlock,
        selection: KeySelection,
        merged: dict[str, dict[str, Any]],
        reader: HFileReader | None = None,
        remember: bool = False,
    ) -> None:
        """Merge one log block into ``merged``; ``remember``: keep a delete block's keys for the
        next lookup (the lookup path; its blocks are kept for this version anyway)."""
        content = block.content or b""
        where = self._where(block)
        if block.block_type is BlockType.DELETE:
            memo = (block.path, block.offset)
            deleted = self._deleted_keys.get(memo)
            if deleted is None:
                keys = decode_delete_block(block, content).record_keys.to_pylist()
                deleted = frozenset(k for k in keys if k is not None)
                if remember:
                    self._deleted_keys[memo] = deleted
                    self.log_bytes += sum(len(k) + 56 for k in deleted)
            _drop_deleted(merged, deleted)
            return
        reader = reader or HFileReader.from_bytes(content, where)
        schema = block.header.get("SCHEMA") or reader.avro_schema
        for key, rec in decode_records(selection.cells(reader), schema, where):
            merged[key] = merge_record(merged.get(key), rec)

    @cached_property
    def index_definitions(self) -> dict[str, dict[str, Any]]:
        """Index name -> definition, from the data table's ``index.json`` (6.10), read once per
        MDT version.

        Raises:
            MetadataTableError: a definitions path outside the table, or a file that does not parse.
            OSError: the file cannot be read.
        """
        path = self.data_config.properties.get(INDEX_DEFS_PROPERTY) or DEFAULT_INDEX_DEFS
        if path.startswith("/") or "://" in path or ".." in path.split("/"):
            raise MetadataTableError(f"index definitions path {path!r} is not inside the table")
        try:
            definitions = json.loads(self.data_storage.read_bytes(path)).get("indexDefinitions")
        except (ValueError, AttributeError) as err:
            raise MetadataTableError(f"index definitions do not parse: {err}") from err
        if not isinstance(definitions, dict):
            raise MetadataTableError("index definitions: indexDefinitions is not an object")
        return {name: spec for name, spec in definitions.items() if isinstance(spec, dict)}

    # -- hash-sharded partitions (record index, secondary indexes) --------------------------
    def shards(self, partition: str) -> list[FileSlice] | None:
        """The file slices of a hash-sharded MDT partition in shard order (6.2), or ``None`` if
        its groups are not the plain ``<partition with - for _>-NNNN-<k>`` layout 0..N-1 (e.g.
        a partitioned record index)."""
        slices = self.file_slices(partition)
        stem = partition.replace("_", "-")
        numbers = []
        for fs in slices:
            match = _SHARD_NUMBER.search(fs.file_id)
            numbers.append(int(match.group(1)) if match and fs.file_id[: match.start()] == stem else -1)
        return slices if slices and numbers == list(range(len(slices))) else None

    # -- record index -----------------------------------------------------------------------
    def record_locations(self, record_keys: Sequence[str]) -> dict[str, tuple[str, str]] | None:
        """Record key -> (partition, file id) from the record index; ``None`` if its layout is unknown.

        Keys absent from the result are not in the table.
        """
        slices = self.shards(RECORD_INDEX)
        if slices is None:
            return None  # not the plain hash-sharded layout (e.g. partitioned record index)
        wanted: dict[int, set[str]] = {}
        for key in record_keys:
            wanted.setdefault(shard_of(key, len(slices)), set()).add(key)
        out: dict[str, tuple[str, str]] = {}
        for shard, keys in wanted.items():
            records = self.read_slice(slices[shard], KeySelection(keys=frozenset(keys)))
            for key, rec in records.items():
                info = rec.get("recordIndexMetadata")
                if info is not None:
                    out[key] = (_partition_of(info["partitionName"]), record_file_id(info))
        return out


def _drop_deleted(merged: dict[str, dict[str, Any]], deleted: frozenset[str]) -> None:
    """Remove the ``deleted`` keys from ``merged``, walking the smaller side: a point lookup
    merges a key or two against delete blocks of thousands of keys."""
    if len(merged) < len(deleted):
        for key in [k for k in merged if k in deleted]:
            del merged[key]
    else:
        for key in deleted:
            merged.pop(key, None)


def record_file_id(info: dict[str, Any]) -> str:
    """The data file id of a ``HoodieRecordIndexInfo`` (6.9)."""
    if info.get("fileIdEncoding", 0) == 1:
        return str(info["fileId"])
    high, low = info["fileIdHighBits"] & 0xFFFFFFFFFFFFFFFF, info["fileIdLowBits"] & 0xFFFFFFFFFFFFFFFF
    hexed = f"{high:016x}{low:016x}"
    uuid = f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"
    index = info.get("fileIndex", -1)
    return uuid if index is None or index < 0 else f"{uuid}-{index}"


def _is_table_service_instant(instant: str, data_instants: set[str]) -> bool:
    """An MDT-internal instant named after a data-table instant plus a 3-digit suffix (Hudi's
    MDT compaction ``001``, log compaction ``005``, ...): it writes no data-table change."""
    return len(instant) > 17 and instant[:-3] in data_instants


def _partition_of(mdt_name: str) -> str:
    return "" if mdt_name == NON_PARTITIONED_KEY else mdt_name


def _rolled_back(meta: dict[str, Any]) -> set[str]:
    """Instants undone by a rollback or restore instant's metadata."""
    out = set(meta.get("commitsRollback") or [])
    for item in meta.get("instantsRollback") or []:
        if isinstance(item, dict) and item.get("commitTime"):
            out.add(item["commitTime"])
    for rollbacks in (meta.get("hoodieRestoreMetadata") or {}).values():
        for sub in rollbacks or []:
            out |= _rolled_back(sub)
    return out


__all__ = [
    "ALL_PARTITIONS_KEY",
    "KeySelection",
    "MetadataTable",
    "MetadataTableError",
    "column_stats_key",
    "decode_records",
    "java_string_hash",
    "live_files",
    "merge_record",
    "partition_stats_key",
    "record_file_id",
    "shard_of",
    "stats_value",
]
