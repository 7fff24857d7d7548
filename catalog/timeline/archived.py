"""The archived timeline: completed instants moved out of the active timeline (format doc 2.8).

Layout 1 (table versions 3 to 6): ``.hoodie/<hoodie.archivelog.folder>/.commits_.archive.N_<token>``
are Hudi log files whose AVRO_DATA blocks hold ``HoodieArchivedMetaEntry`` records (one record
per instant state; the commit metadata sits in ``hoodieCommitMetadata`` or
``hoodieReplaceCommitMetadata`` as a record).

Layout 2 (versions 8+): the LSM timeline ``.hoodie/<hoodie.timeline.path>/<hoodie.timeline.history.path>/``
(``.hoodie/timeline/history/`` by default): ``_version_`` names the
current snapshot N, ``manifest_N`` (JSON ``{"files": [{"fileName", "fileLen"}]}``) lists the valid
parquet files ``<min>_<max>_<level>.parquet``, whose rows are ``HoodieLSMTimelineInstant``
(``instantTime``, ``completionTime``, ``action``, ``metadata`` = the bytes of the completed
instant file, ``plan``, ``version``). Files of older snapshots may still lie around until the
archiver cleans them; only the manifest's files count.

Only completed instants are kept. Reading is done once, when a query needs instants older than the
active timeline (:meth:`catalog.timeline.Timeline.archived`).
"""

from __future__ import annotations

import io
import json
import re
import struct
from dataclasses import dataclass, field
from typing import Any

import fastavro
import pyarrow.parquet as pq

from catalog.errors import CorruptTableError
from catalog.format.log_file import BlockType, iter_log_blocks
from catalog.storage import Storage
from catalog.table.config import TableConfig
from catalog.timeline.instant_files import decode_instant_file
from catalog.timeline.instants import COMPLETED, Instant

VERSION_FILE = "_version_"
_MANIFEST = re.compile(r"^manifest_(\d+)$")
_LSM_FILE = re.compile(r"^(\d+)_(\d+)_(\d+)\.parquet$")
_ARCHIVE_LOG = re.compile(r"^\.commits_\.archive\.(\d+)(_.*)?$")
#: HoodieArchivedMetaEntry fields holding the metadata of completed write instants, by action
_META_FIELD = {
    "commit": "hoodieCommitMetadata",
    "deltacommit": "hoodieCommitMetadata",
    "replacecommit": "hoodieReplaceCommitMetadata",
}


@dataclass
class ArchivedTimeline:
    """Completed archived instants, oldest first (by requested time), with their metadata."""

    instants: list[Instant] = field(default_factory=list)
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        latest: dict[str, Instant] = {}
        for inst in self.instants:
            latest[inst.requested_time] = inst
        self.instants = sorted(latest.values(), key=lambda i: i.requested_time)

    @classmethod
    def load(cls, storage: Storage, config: TableConfig) -> "ArchivedTimeline":
        if config.timeline_layout_version >= 2:
            return _load_lsm(storage, f".hoodie/{config.timeline_path}/{config.timeline_history_path}")
        return _load_archive_logs(storage, f".hoodie/{config.archive_folder}")


def _ls_names(storage: Storage, folder: str) -> list[str]:
    try:
        entries = storage.ls(folder)
    except FileNotFoundError:
        return []
    return [e["name"] for e in entries if e["type"] == "file"]


# -- layout 2: LSM timeline --------------------------------------------------------------
def _load_lsm(storage: Storage, folder: str) -> ArchivedTimeline:
    names = _ls_names(storage, folder)
    if not names:
        return ArchivedTimeline()
    versions = sorted(int(m.group(1)) for m in map(_MANIFEST.match, names) if m)
    version: int | None = None
    if VERSION_FILE in names:
        text = storage.read_bytes(f"{folder}/{VERSION_FILE}").decode("utf-8", "replace").strip()
        version = int(text) if text.isdigit() else None
    if version is None or version not in versions:
        version = versions[-1] if versions else None  # Java falls back to the manifest listing
    if version is None:
        return ArchivedTimeline()
    where = f"{storage.uri}/{folder}/manifest_{version}"
    try:
        manifest = json.loads(storage.read_bytes(f"{folder}/manifest_{version}").decode("utf-8"))
        files = [str(f["fileName"]) for f in manifest.get("files") or []]
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise CorruptTableError(f"cannot decode LSM timeline manifest {where}: {err}") from err
    out = ArchivedTimeline()
    instants: list[Instant] = []
    for name in files:
        if not _LSM_FILE.match(name):
            raise CorruptTableError(f"{where}: unexpected LSM timeline file name {name!r}")
        path = f"{folder}/{name}"
        with storage.open(path) as fh:  # on this thread: no Arrow thread calls back into Python
            table = pq.ParquetFile(fh).read(
                columns=["instantTime", "completionTime", "action", "metadata"], use_threads=False
            )
        for row in table.to_pylist():
            requested, action = row["instantTime"], row["action"]
            completion = row["completionTime"] or requested
            inst = Instant(requested, action, COMPLETED, completion, name)
            instants.append(inst)
            data = row["metadata"]
            if data:
                out.metadata[requested] = decode_instant_file(data, f"{storage.uri}/{path}#{requested}")
    return ArchivedTimeline(instants, out.metadata)


# -- layout 1: archive log files ---------------------------------------------------------
def _archive_log_order(name: str) -> int:
    m = _ARCHIVE_LOG.match(name)
    return int(m.group(1)) if m else -1


def _avro_records(content: bytes, schema_text: str, where: str) -> list[dict[str, Any]]:
    """The records of an AVRO_DATA block: int32 content version, int32 count, then per record an
    int32 length and the record. Content versions 1 to 3 share this layout (Hudi's
    ``HoodieAvroDataBlockVersion.hasRecordCount`` is true for all; the version-1 data block of
    the external ``stock_ticks_mor`` table has it too)."""
    schema = fastavro.parse_schema(json.loads(schema_text))
    try:
        version, count = struct.unpack_from(">ii", content, 0)
        if version not in (1, 2, 3):
            raise CorruptTableError(f"cannot decode archived instants in {where}: Avro block version {version}")
        buf = io.BytesIO(content)
        out: list[dict[str, Any]] = []
        pos = 8
        for _ in range(count):
            (length,) = struct.unpack_from(">i", content, pos)
            buf.seek(pos + 4)
            out.append(fastavro.schemaless_reader(buf, schema, None))  # type: ignore[arg-type]
            pos += 4 + length
        return out
    except (struct.error, EOFError, ValueError, TypeError, IndexError) as err:
        raise CorruptTableError(f"cannot decode archived instants in {where}: {err}") from err


def _load_archive_logs(storage: Storage, folder: str) -> ArchivedTimeline:
    names = sorted((n for n in _ls_names(storage, folder) if _ARCHIVE_LOG.match(n)), key=_archive_log_order)
    out = ArchivedTimeline()
    instants: list[Instant] = []
    for name in names:
        path = f"{folder}/{name}"
        for block in iter_log_blocks(storage, path):
            if block.block_type is not BlockType.AVRO_DATA:
                continue  # corrupt blocks of a crashed archiver; Java skips them too
            schema_text = block.header.get("SCHEMA")
            if not schema_text:
                raise CorruptTableError(f"{storage.uri}/{path}: archive block without a SCHEMA header")
            for rec in _avro_records(block.content or b"", schema_text, f"{storage.uri}/{path}"):
                state = rec.get("actionState") or COMPLETED
                if state != COMPLETED:
                    continue
                requested, action = rec.get("commitTime"), rec.get("actionType")
                if not requested or not action:
                    continue
                completion = rec.get("completionTime") or requested
                instants.append(Instant(requested, action, COMPLETED, completion, name))
                meta = rec.get(_META_FIELD.get(action, ""))
                if meta:
                    out.metadata[requested] = meta
    return ArchivedTimeline(instants, out.metadata)


__all__ = ["ArchivedTimeline"]
