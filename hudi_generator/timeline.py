"""Where a table version keeps its instants and log files, and how it encodes commit metadata
(format digest sections 2.2, 2.3 and 3.2).

* Table version 8 (timeline layout 2): ``.hoodie/timeline/T.<action>.requested``,
  ``T.inflight`` / ``T.<action>.inflight`` and the completed ``T_C.<action>`` holding an Avro
  ``HoodieCommitMetadata`` container file; each delta commit writes its own log file named with
  its own instant (``log.1``).
* Table version 6 (timeline layout 1, Hudi 0.14/0.15): the same three files directly under
  ``.hoodie/``, the completed one named ``T.<action>`` and holding JSON commit metadata; log files
  are named with the *base instant* of the slice they extend and roll to ``log.2``, ``log.3``, ...
  per delta commit (a writer on object storage never appends to an existing log file).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hudi_generator.commit_metadata import commit_metadata_bytes, commit_metadata_json

TABLE_VERSIONS = (6, 8)


@dataclass(frozen=True)
class TimelineLayout:
    """The instant and log-file conventions of one table version (6 or 8)."""

    table_version: int

    def __post_init__(self) -> None:
        if self.table_version not in TABLE_VERSIONS:
            raise ValueError(f"table_version must be one of {TABLE_VERSIONS}, got {self.table_version}")

    @property
    def layout_version(self) -> int:
        return 2 if self.table_version >= 8 else 1

    @property
    def folder(self) -> str:
        """The active timeline, relative to the table base path."""
        return ".hoodie/timeline/" if self.layout_version == 2 else ".hoodie/"

    def instant_files(
        self, requested: str, completed: str, action: str, metadata: bytes, completes_as: str | None = None
    ) -> list[tuple[str, bytes]]:
        """The requested, inflight and completed files of one instant, oldest state first.
        A commit's inflight file has no action word (``T.inflight``) in both layouts;
        ``completes_as``: the completed action when it differs (a ``logcompaction`` completes
        as a ``deltacommit``)."""
        inflight = "inflight" if action == "commit" else f"{action}.inflight"
        done_action = completes_as or action
        done = f"{requested}_{completed}.{done_action}" if self.layout_version == 2 else f"{requested}.{done_action}"
        return [
            (f"{self.folder}{requested}.{action}.requested", b""),
            (f"{self.folder}{requested}.{inflight}", b""),
            (f"{self.folder}{done}", metadata),
        ]

    def commit_metadata(
        self,
        partition_to_write_stats: Mapping[str, Sequence[dict]],
        operation_type: str,
        schema_json: str,
        extra_metadata: Mapping[str, str] | None = None,
    ) -> bytes:
        """Completed commit/deltacommit content: Avro (layout 2) or JSON (layout 1)."""
        encode = commit_metadata_bytes if self.layout_version == 2 else commit_metadata_json
        return encode(partition_to_write_stats, operation_type, schema_json, extra_metadata=extra_metadata)

    def log_instant(self, base_instant: str, writer_instant: str) -> str:
        """The instant a log file is named with: its slice's base instant (v6) or its writer's (v8)."""
        return writer_instant if self.layout_version == 2 else base_instant


__all__ = ["TABLE_VERSIONS", "TimelineLayout"]
