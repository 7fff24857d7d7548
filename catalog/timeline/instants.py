"""Instants of a Hudi timeline: names, states, and which requested times count as committed."""

from __future__ import annotations

import re
from dataclasses import dataclass

COMPLETED, INFLIGHT, REQUESTED = "COMPLETED", "INFLIGHT", "REQUESTED"
KNOWN_ACTIONS = frozenset(
    {
        "commit",
        "deltacommit",
        "replacecommit",
        "clean",
        "rollback",
        "compaction",
        "logcompaction",
        "clustering",
        "restore",
        "savepoint",
        "indexing",
    }
)
#: instants in file names: also the 20-digit metadata-table instants ``<instant>001`` (an
#: operation suffix: compaction, clean...), which sort between ``<instant>`` and the next one
_FILE_INSTANT = re.compile(r"\d{14}(\d{3}){0,2}")
#: order of an instant's states, to keep the furthest one when several files exist
STATE_RANK = {REQUESTED: 0, INFLIGHT: 1, COMPLETED: 2}


@dataclass(frozen=True)
class Instant:
    """One instant: requested time, action and state (plus completion time once completed)."""

    requested_time: str
    action: str
    state: str
    completion_time: str | None
    file_name: str

    @property
    def is_completed(self) -> bool:
        return self.state == COMPLETED

    def __repr__(self) -> str:
        done = f"->{self.completion_time}" if self.completion_time else ""
        return f"Instant({self.requested_time}{done} {self.action} {self.state})"


def parse_instant_file_name(name: str, layout: int) -> Instant | None:
    """Parse an instant file name; ``None`` for names that are not instants (e.g. ``*.crc``)."""
    head, dot, tail = name.partition(".")
    if not dot or name.endswith(".crc"):
        return None
    requested, _, completion = head.partition("_")
    if not _FILE_INSTANT.fullmatch(requested) or (completion and not _FILE_INSTANT.fullmatch(completion)):
        return None
    parts = tail.split(".")
    if parts == ["inflight"]:
        action, state = "commit", INFLIGHT
    elif len(parts) == 1:
        action, state = parts[0], COMPLETED
    elif len(parts) == 2 and parts[1] in ("inflight", "requested"):
        action, state = parts[0], INFLIGHT if parts[1] == "inflight" else REQUESTED
    else:
        return None
    if action not in KNOWN_ACTIONS:
        return None
    if state == COMPLETED:
        if layout >= 2 and not completion:
            return None  # malformed in layout 2: completed files carry their completion time
        completion = completion or requested
    elif completion:
        return None
    return Instant(requested, action, state, completion or None, name)


@dataclass(frozen=True)
class CommitSet:
    """Which requested times count as committed: a plain, picklable snapshot of a timeline.

    An instant is committed when it completed, or when it is older than the active timeline's
    first instant and not pending (Java's "contains or before timeline start": archived
    instants completed long ago).
    """

    completed: frozenset[str]
    pending: frozenset[str]
    start: str | None

    def is_committed(self, requested_time: str) -> bool:
        if requested_time in self.completed:
            return True
        return self.start is not None and requested_time < self.start and requested_time not in self.pending


__all__ = [
    "COMPLETED",
    "INFLIGHT",
    "REQUESTED",
    "STATE_RANK",
    "CommitSet",
    "Instant",
    "parse_instant_file_name",
]
