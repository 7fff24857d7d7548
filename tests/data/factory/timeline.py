"""The completed instants of a freshly written table, read from its ``.hoodie`` folder.

The factory needs them to name Hudi's time-travel and incremental queries; it reads the file names
itself (no Hudi API) because only the layout matters: ``<requested>.<action>`` (table version 6)
or ``timeline/<requested>_<completed>.<action>`` (version 8+).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: actions whose completion changes the rows a query returns
DATA_ACTIONS = ("commit", "deltacommit", "replacecommit")
#: state suffixes of instants not completed (``<ts>.inflight`` is a commit in flight)
_PENDING = ("inflight", "requested")
_COMPLETED = re.compile(r"^(\d{14,17})(?:_(\d{14,17}))?\.(\w+)$")


@dataclass(frozen=True)
class Instant:
    requested: str
    completed: str
    action: str

    def as_json(self) -> dict[str, str]:
        return {"requested": self.requested, "completed": self.completed, "action": self.action}


def table_version(base: Path) -> int:
    for line in (base / ".hoodie" / "hoodie.properties").read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "hoodie.table.version":
            return int(value.strip())
    raise ValueError(f"{base}: hoodie.properties names no table version")


def completed_instants(base: Path) -> list[Instant]:
    """Every completed instant of the active timeline, oldest requested first."""
    folder = base / ".hoodie"
    if (folder / "timeline").is_dir():
        folder = folder / "timeline"
    out = []
    for entry in folder.iterdir():
        match = _COMPLETED.match(entry.name)
        if match and entry.is_file() and match.group(3) not in _PENDING:
            requested, completed, action = match.groups()
            out.append(Instant(requested, completed or requested, action))
    return sorted(out, key=lambda i: (i.requested, i.completed))


def data_instants(base: Path) -> list[Instant]:
    return [i for i in completed_instants(base) if i.action in DATA_ACTIONS]
