"""Java ``.properties`` text as ``java.util.Properties.store`` writes it (hoodie.properties,
.hoodie_partition_metadata)."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from datetime import datetime, timezone

_SPECIAL = {
    "\\": "\\\\", ":": "\\:", "=": "\\=", "#": "\\#", "!": "\\!",
    "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f",
}


def _escape(text: str, is_key: bool) -> str:
    out = []
    for pos, ch in enumerate(text):
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif ch == " " and (is_key or pos == 0):
            out.append("\\ ")
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def render_properties(props: Mapping[str, str], comment: str | None = None, when: datetime | None = None) -> bytes:
    """Encode ``props`` (insertion order kept) with the comment and date header lines Java writes."""
    when = when or datetime.now(timezone.utc)
    lines = []
    if comment:
        lines.append(f"#{comment}")
    lines.append("#" + when.strftime("%a %b %d %H:%M:%S UTC %Y"))
    lines.extend(f"{_escape(k, True)}={_escape(str(v), False)}" for k, v in props.items())
    return ("\n".join(lines) + "\n").encode("latin-1")


def table_checksum(database: str, table: str) -> str:
    """``hoodie.table.checksum``: CRC32 of ``<database>.<table>`` (database may be empty), which
    Java checks when it loads hoodie.properties."""
    return str(zlib.crc32(f"{database}.{table}".encode("utf-8")))
