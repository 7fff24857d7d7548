"""Decoding of instant files: JSON (layout 1 commits) or Avro container files (format doc 2.3)."""

from __future__ import annotations

import io
import json
import posixpath
from typing import Any

import fastavro

from catalog.errors import CorruptTableError

AVRO_MAGIC = b"Obj\x01"


def decode_instant_file(data: bytes, where: str) -> dict[str, Any]:
    """Decode one instant file; an empty file is empty metadata."""
    if not data.strip():
        return {}
    try:
        if data.startswith(AVRO_MAGIC):
            records: list[Any] = list(fastavro.reader(io.BytesIO(data)))
            return records[0] if records else {}
        value = json.loads(data.decode("utf-8"))
    except (ValueError, EOFError, UnicodeDecodeError, StopIteration, TypeError) as err:
        raise CorruptTableError(f"cannot decode instant file {where}: {err}") from err
    if not isinstance(value, dict):
        raise CorruptTableError(f"instant file {where} does not hold a JSON object")
    return value


def written_file_groups(metadata: dict[str, Any]) -> set[tuple[str, str]]:
    """(partition, file id) of every file group a commit wrote (format doc 2.4).

    The partition is the ``partitionToWriteStats`` key; placeholder stats without a file id
    (inflight files) are skipped.
    """
    out: set[tuple[str, str]] = set()
    for partition, stats in (metadata.get("partitionToWriteStats") or {}).items():
        out.update((partition or "", st["fileId"]) for st in stats or [] if st.get("fileId"))
    return out


def written_files(metadata: dict[str, Any]) -> set[tuple[str, str]]:
    """(partition, file name) of every base and log file a commit wrote (format doc 2.4): the
    names of its write stats' ``path``. A log file appended by several commits (table version 6)
    is named by each of them."""
    out: set[tuple[str, str]] = set()
    for partition, stats in (metadata.get("partitionToWriteStats") or {}).items():
        out.update((partition or "", posixpath.basename(st["path"])) for st in stats or [] if st.get("path"))
    return out
