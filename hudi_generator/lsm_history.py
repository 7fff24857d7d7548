"""The LSM timeline (``.hoodie/timeline/history/``) Hudi 1.x archives completed instants into.

Per apache/hudi ``LSMTimeline`` / ``LSMTimelineWriter`` / ``MetadataConversionUtils
.createLSMTimelineInstant``: one layer-0 parquet file ``<minInstant>_<maxInstant>_0.parquet`` per
archival batch whose rows follow ``HoodieLSMTimelineInstant`` (``metadata`` holds the bytes of
the completed instant file), then ``manifest_<N>`` (JSON list of the valid files) and
``_version_`` (the text ``N``). The archived instants' files leave the active timeline.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

_NS = "org.apache.hudi.avro.model"
_STR = {"type": "string", "avro.java.string": "String"}

#: HoodieLSMTimelineInstant.avsc
LSM_INSTANT_AVRO = {
    "type": "record",
    "name": "HoodieLSMTimelineInstant",
    "namespace": _NS,
    "fields": [
        {"name": "instantTime", "type": ["null", _STR], "default": None},
        {"name": "completionTime", "type": ["null", _STR], "default": None},
        {"name": "action", "type": ["null", _STR], "default": None},
        {"name": "metadata", "type": ["null", "bytes"], "default": None},
        {"name": "plan", "type": ["null", "bytes"], "default": None},
        {"name": "version", "type": {"type": "int"}, "default": 1},
    ],
}
LSM_INSTANT_ARROW = pa.schema([
    pa.field("instantTime", pa.string()), pa.field("completionTime", pa.string()),
    pa.field("action", pa.string()), pa.field("metadata", pa.binary()), pa.field("plan", pa.binary()),
    pa.field("version", pa.int32(), nullable=False),
])


def write_lsm_history(
    write: Callable[[str, bytes], int], entries: Sequence[tuple[str, str, str, bytes]], version: int = 1
) -> list[str]:
    """Write one layer-0 file holding ``entries`` ((requested, completion, action, metadata bytes),
    oldest first) plus ``manifest_<version>`` and ``_version_`` through ``write(rel, data)``
    (paths relative to the history folder). Returns the names written."""
    if not entries:
        return []
    name = f"{entries[0][0]}_{entries[-1][0]}_0.parquet"
    table = pa.table({
        "instantTime": [e[0] for e in entries], "completionTime": [e[1] for e in entries],
        "action": [e[2] for e in entries], "metadata": [e[3] for e in entries],
        "plan": pa.nulls(len(entries), pa.binary()), "version": pa.array([1] * len(entries), pa.int32()),
    }, schema=LSM_INSTANT_ARROW.with_metadata({"parquet.avro.schema": json.dumps(LSM_INSTANT_AVRO)}))
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="gzip")
    size = write(name, buf.getvalue())
    manifest = {"files": [{"fileName": name, "fileLen": size}]}
    write(f"manifest_{version}", json.dumps(manifest, indent=2).encode())
    write("_version_", str(version).encode())
    return [name, f"manifest_{version}", "_version_"]


__all__ = ["LSM_INSTANT_AVRO", "write_lsm_history"]
