"""Hudi data file names, file slices and splits of them (format doc sections 3.1-3.3).

A :class:`Split` is the unit of reading that the planner hands out and every reader (library,
Flight ``do_get``) executes: a file slice, or row groups of its base file.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

BASE_FILE_EXTENSIONS = ("parquet", "hfile", "orc", "lance")

# .<fileId>_<instant>.<ext>.<version>_<writeToken>[.cdc]
_LOG_NAME = re.compile(
    r"^\.(?P<file_id>.+)_(?P<instant>\d+)\.(?P<ext>log|archive)\.(?P<version>\d+)"
    r"(?:_(?P<token>\d+-\d+-\d+))?(?P<suffix>\.cdc)?$"
)


@dataclass(frozen=True)
class BaseFile:
    """``<fileId>_<writeToken>_<instantTime>.<ext>``."""

    name: str
    file_id: str
    write_token: str
    instant: str
    extension: str
    size: int = 0

    @classmethod
    def parse(cls, name: str, size: int = 0) -> "BaseFile | None":
        stem, dot, ext = name.rpartition(".")
        if not dot or ext.lower() not in BASE_FILE_EXTENSIONS or name.startswith("."):
            return None
        parts = stem.split("_")
        if len(parts) != 3 or not parts[2].isdigit():
            return None
        return cls(name, parts[0], parts[1], parts[2], ext.lower(), size)


@dataclass(frozen=True)
class LogFile:
    """``.<fileId>_<instant>.log.<version>_<writeToken>``; ``instant`` is the one in the name.

    In table version 6 that is the base instant of the slice; in 8+ the writer's instant.
    """

    name: str
    file_id: str
    instant: str
    version: int
    write_token: str
    suffix: str = ""
    size: int = 0

    @classmethod
    def parse(cls, name: str, size: int = 0) -> "LogFile | None":
        m = _LOG_NAME.match(name)
        if not m or m.group("ext") != "log":
            return None
        return cls(
            name,
            m.group("file_id"),
            m.group("instant"),
            int(m.group("version")),
            m.group("token") or "",
            m.group("suffix") or "",
            size,
        )

    @property
    def is_cdc(self) -> bool:
        return self.suffix == ".cdc"


@dataclass
class FileSlice:
    """One base file (optional) plus the log files that apply on top of it.

    ``bootstrap_source``: for a metadata-only bootstrap skeleton base file, the source file
    holding its data columns, relative to ``hoodie.bootstrap.base.path`` (set by the planner).
    """

    partition: str  # relative partition path; "" for a non-partitioned table
    file_id: str
    base_instant: str
    base_file: BaseFile | None = None
    log_files: list[LogFile] = field(default_factory=list)
    bootstrap_source: str | None = None

    def _rel(self, name: str) -> str:
        return posixpath.join(self.partition, name) if self.partition else name

    @property
    def base_file_path(self) -> str | None:
        """Path of the base file relative to the table root."""
        return self._rel(self.base_file.name) if self.base_file else None

    @property
    def log_file_paths(self) -> list[str]:
        return [self._rel(lf.name) for lf in self.log_files]

    @property
    def total_size(self) -> int:
        return (self.base_file.size if self.base_file else 0) + sum(lf.size for lf in self.log_files)

    @property
    def has_logs(self) -> bool:
        return bool(self.log_files)


@dataclass(frozen=True)
class Split:
    """One unit of reading: a file slice, or a row-group aligned byte range of its base file.

    ``start``/``length`` is the byte range (``length is None``: the whole slice);
    ``row_groups`` the Parquet row groups the range owns (``None``: all of them).
    """

    file_slice: FileSlice
    bytes: int
    estimated_rows: int
    weight: float
    start: int = 0
    length: int | None = None
    row_groups: tuple[int, ...] | None = None

    @property
    def partition(self) -> str:
        return self.file_slice.partition

    @property
    def file_ids(self) -> list[str]:
        return [self.file_slice.file_id]


__all__ = ["BASE_FILE_EXTENSIONS", "BaseFile", "FileSlice", "LogFile", "Split"]
