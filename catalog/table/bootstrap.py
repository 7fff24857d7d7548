"""Bootstrapped tables: where the data columns of a metadata-only bootstrap live.

Hudi's bootstrap turns a plain Parquet dataset into a Hudi table. ``FULL_RECORD`` rewrites every
record (commit ``00000000000002``): an ordinary table. ``METADATA_ONLY`` (commit
``00000000000001``) writes *skeleton* base files holding only the ``_hoodie_*`` columns, one per
source file and in its row order; the data columns stay in the source file. A reader stitches a
skeleton file and its source file together by row position.

The bootstrap index (``.hoodie/.aux/.bootstrap/``, two HFiles whose values are Avro container
files) maps each skeleton file group to its source file. It stores absolute source paths and the
base path they were written under (``INDEX_INFO``); :class:`BootstrapIndex` takes each path
relative to that base and resolves it under ``hoodie.bootstrap.base.path`` of the table's
properties, so a lake moved elsewhere (and the property rewritten) still reads.
"""

from __future__ import annotations

import dataclasses
import io
import posixpath
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import urlsplit

import fastavro
from fsspec.core import split_protocol

from catalog.errors import CorruptTableError, UnsupportedTableError
from catalog.format.hfile import HFileReader
from catalog.storage import Storage
from catalog.table.config import TableConfig
from catalog.table.files import FileSlice

#: the instant of a metadata-only bootstrap: its base files are skeletons
METADATA_BOOTSTRAP_INSTANT = "00000000000001"
#: the instant of a full-record bootstrap: its base files are ordinary
FULL_BOOTSTRAP_INSTANT = "00000000000002"
BASE_PATH_KEY = "hoodie.bootstrap.base.path"
#: the file-group index: ``part=<partition>;fileid=<file id>`` -> HoodieBootstrapFilePartitionInfo
FILE_ID_INDEX = ".hoodie/.aux/.bootstrap/.fileids/00000000-0000-0000-0000-000000000000-0_1-0-1_00000000000001.hfile"
_INDEX_INFO = "INDEX_INFO"


def bootstrap_base_path(config: TableConfig) -> str | None:
    """``hoodie.bootstrap.base.path``: where the source dataset of a bootstrapped table is now."""
    return (config.properties.get(BASE_PATH_KEY) or "").strip() or None


def _protocol(uri: str) -> str:
    protocol, _ = split_protocol(uri)
    return "file" if protocol in (None, "file", "local") else protocol


def is_skeleton(fs: FileSlice) -> bool:
    """Whether the slice's base file is a metadata-only bootstrap skeleton."""
    return fs.base_file is not None and fs.base_file.instant == METADATA_BOOTSTRAP_INSTANT


def _avro_record(data: bytes, what: str) -> Mapping[str, Any]:
    """The single record of an Avro container file (how Hudi serializes index values)."""
    try:
        records = list(fastavro.reader(io.BytesIO(data)))
    except Exception as err:  # noqa: BLE001 - any decoding failure means a damaged index
        raise CorruptTableError(f"bootstrap index: cannot decode {what}: {err}") from None
    if len(records) != 1 or not isinstance(records[0], dict):
        raise CorruptTableError(f"bootstrap index: {what} holds {len(records)} records, expected 1")
    return records[0]


def _path_of(uri: str) -> str:
    """The path part of a Hadoop path or URI (``file:/a/b`` -> ``/a/b``)."""
    return urlsplit(uri).path if "://" in uri or uri.startswith("file:") else uri


def source_storage(table: Storage, config: TableConfig) -> Storage:
    """The storage of the source dataset (``hoodie.bootstrap.base.path``), opened with the table's
    storage options.

    Raises:
        UnsupportedTableError: no such property, a chained URL, or another kind of storage than
            the table's (whose options would not fit it).
    """
    base = bootstrap_base_path(config)
    if base is None:
        raise UnsupportedTableError(
            f"metadata-only bootstrap skeleton files without {BASE_PATH_KEY} in hoodie.properties are not supported"
        )
    if "::" in base or _protocol(base) != _protocol(table.uri):
        raise UnsupportedTableError(
            f"a bootstrap source dataset ({BASE_PATH_KEY}) on another storage than the table is not supported"
        )
    return Storage(base, table.storage_options)


class BootstrapIndex:
    """The source file of each skeleton file group of a metadata-only bootstrapped table (the
    index is read when the first skeleton slice is looked up).

    Args:
        storage: the table's storage (the index lives under its ``.hoodie``).
    """

    def __init__(self, storage: Storage):
        self._storage = storage
        self._reader: HFileReader | None = None
        self._indexed_base: str | None = None

    def _index(self) -> tuple[HFileReader, str]:
        if self._reader is None or self._indexed_base is None:
            try:
                reader = HFileReader.from_storage(self._storage, FILE_ID_INDEX)
            except FileNotFoundError:
                raise CorruptTableError(
                    f"metadata-only bootstrapped table without its bootstrap index ({FILE_ID_INDEX})"
                ) from None
            info = reader.info(_INDEX_INFO)
            if info is None:
                raise CorruptTableError(f"bootstrap index {FILE_ID_INDEX} has no {_INDEX_INFO}")
            indexed_base = _path_of(str(_avro_record(info, _INDEX_INFO).get("bootstrapBasePath") or "")).rstrip("/")
            if not indexed_base:
                raise CorruptTableError(f"bootstrap index {FILE_ID_INDEX} names no bootstrap base path")
            self._indexed_base = indexed_base
            self._reader = reader
        return self._reader, self._indexed_base

    def source_files(self, slices: Iterable[FileSlice]) -> dict[tuple[str, str], str]:
        """(partition, file id) -> source file path relative to the source dataset's base path,
        for the skeleton slices among ``slices`` (one pass over the index in key order)."""
        wanted = {
            f"part={fs.partition};fileid={fs.file_id}": (fs.partition, fs.file_id) for fs in slices if is_skeleton(fs)
        }
        if not wanted:
            return {}
        reader, indexed_base = self._index()
        found: dict[tuple[str, str], str] = {}
        for key, value in reader.lookup(sorted(wanted)):
            group = wanted.get(key.decode("utf-8", "replace"))
            if group is None:
                continue
            info = _avro_record(value, f"the entry of file group {group[1]}")
            uri = ((info.get("bootstrapFileStatus") or {}).get("path") or {}).get("uri") or ""
            path = _path_of(str(uri))
            relative = posixpath.normpath(path[len(indexed_base) + 1 :])
            if not path.startswith(indexed_base + "/") or relative.startswith(("..", "/")):
                raise CorruptTableError(
                    f"bootstrap index: the source file of file group {group[1]} lies outside the bootstrap base path"
                )
            found[group] = relative
        missing = [file_id for group, file_id in wanted.values() if (group, file_id) not in found]
        if missing:
            raise CorruptTableError(
                f"bootstrap index has no source file for skeleton file group(s) {', '.join(missing[:3])}"
            )
        return found

    def with_sources(self, slices: Sequence[FileSlice]) -> list[FileSlice]:
        """``slices`` with each skeleton slice's ``bootstrap_source`` set (copies; others as they are)."""
        sources = self.source_files(slices)
        if not sources:
            return list(slices)
        return [
            dataclasses.replace(fs, bootstrap_source=sources[(fs.partition, fs.file_id)]) if is_skeleton(fs) else fs
            for fs in slices
        ]


__all__ = [
    "BASE_PATH_KEY",
    "bootstrap_base_path",
    "FULL_BOOTSTRAP_INSTANT",
    "METADATA_BOOTSTRAP_INSTANT",
    "BootstrapIndex",
    "is_skeleton",
    "source_storage",
]
