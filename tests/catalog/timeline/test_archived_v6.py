"""Layout-1 archived timelines (table versions 3-6): ``.hoodie/archived/.commits_.archive.N_<token>``
Hudi log files of ``HoodieArchivedMetaEntry`` records. No fixture has one, so the test archives the
first commit of a Spark-written v6 table the way Hudi 0.x does (one record per instant state, the
commit metadata as a record in ``hoodieCommitMetadata``), then reads every commit before and after."""

from __future__ import annotations

import json
import re
import shutil
import struct
from pathlib import Path

import pytest

from catalog import HudiTable
from hudi_generator.log_writer import avro_data_block
from tests.support.compare import assert_same_rows

TABLE = "sample_table/cow/v6_complexkeygen_hivestyle"
_STR = ["null", "string"]
_STAT = {"type": "record", "name": "HoodieWriteStat", "fields": [
    {"name": n, "type": _STR, "default": None} for n in ("fileId", "path", "prevCommit", "partitionPath")
]}
_COMMIT = {"type": "record", "name": "HoodieCommitMetadata", "fields": [
    {"name": "partitionToWriteStats", "type": ["null", {"type": "map", "values": {"type": "array", "items": _STAT}}],
     "default": None},
    {"name": "extraMetadata", "type": ["null", {"type": "map", "values": "string"}], "default": None},
    {"name": "operationType", "type": _STR, "default": None},
]}
#: the fields of HoodieArchivedMetaEntry.avsc a reader uses (the writer schema travels in the block header)
ARCHIVED_META_ENTRY = {"type": "record", "name": "HoodieArchivedMetaEntry", "namespace": "org.apache.hudi.avro.model",
                       "fields": [
                           {"name": "hoodieCommitMetadata", "type": ["null", _COMMIT], "default": None},
                           {"name": "commitTime", "type": _STR, "default": None},
                           {"name": "actionType", "type": _STR, "default": None},
                           {"name": "actionState", "type": _STR, "default": None},
                       ]}


def _archive_first_commit(path: Path, content_version: int = 3, folder: str = "archived") -> str:
    hoodie = path / ".hoodie"
    first = sorted(p.name.split(".")[0] for p in hoodie.glob("*.commit"))[0]
    meta = json.loads((hoodie / f"{first}.commit").read_text())
    stats = {p: [{k: s.get(k) for k in ("fileId", "path", "prevCommit", "partitionPath")} for s in ss]
             for p, ss in meta["partitionToWriteStats"].items()}
    records = [
        {"commitTime": first, "actionType": "commit", "actionState": "REQUESTED", "hoodieCommitMetadata": None},
        {"commitTime": first, "actionType": "commit", "actionState": "INFLIGHT", "hoodieCommitMetadata": None},
        {"commitTime": first, "actionType": "commit", "actionState": "COMPLETED", "hoodieCommitMetadata": {
            "partitionToWriteStats": stats, "extraMetadata": meta.get("extraMetadata"),
            "operationType": meta.get("operationType")}},
    ]
    block = bytearray(avro_data_block("20991231000000000", ARCHIVED_META_ENTRY, records))
    if content_version != 3:  # older writers: the same record layout under content version 1 or 2
        at = block.index(struct.pack(">ii", 3, len(records)))
        block[at:at + 4] = struct.pack(">i", content_version)
    (hoodie / folder).mkdir(exist_ok=True)
    (hoodie / folder / ".commits_.archive.1_1-0-1").write_bytes(bytes(block))
    for name in (f"{first}.commit", f"{first}.commit.requested", f"{first}.inflight"):
        (hoodie / name).unlink()
    return first


@pytest.mark.parametrize("content_version, folder", [(3, "archived"), (1, "archived"), (3, "old_commits")])
def test_layout1_archive_time_travel_and_incremental(fixture_table, tmp_path, content_version, folder):
    """Archive blocks of content version 3 and 1 (Hudi 0.x), in the default folder and in the one
    ``hoodie.archivelog.folder`` names."""
    original = Path(fixture_table(TABLE))
    before = HudiTable.open(str(original))
    times = [i.requested_time for i in before.timeline.commits]
    assert len(times) >= 2
    expected_as_of = {t: before.read(as_of=t) for t in times}
    expected_incr = {t: before.read(query_type="incremental", end=t, start=prev)
                     for prev, t in zip([None, *times], times)}

    copy = tmp_path / "table"
    shutil.copytree(original, copy)
    first = _archive_first_commit(copy, content_version, folder)
    if folder != "archived":
        props = copy / ".hoodie/hoodie.properties"
        text = re.sub(r"(?m)^hoodie\.archivelog\.folder=.*\n", "", props.read_text())
        props.write_text(text + f"hoodie.archivelog.folder={folder}\n")
    after = HudiTable.open(str(copy))
    assert [i.requested_time for i in after.timeline.commits] == times[1:]
    assert after.read().num_rows == expected_as_of[times[-1]].num_rows
    assert after.timeline._archived is None  # a snapshot does not read the archive
    for t in times:
        assert_same_rows(after.read(as_of=t), expected_as_of[t], f"as_of {t}")
    for prev, t in zip([None, *times], times):
        if prev is None:  # reaches the archived commit: Hudi 0.x reads the active timeline only
            assert after.read(query_type="incremental", start=prev, end=t).num_rows == 0
            continue
        assert_same_rows(after.read(query_type="incremental", start=prev, end=t), expected_incr[t], f"incr {t}")
    # from the beginning to the second commit: the active one's rows, the archived one's left out
    assert_same_rows(after.read(query_type="incremental", end=times[1]), expected_incr[times[1]], "incr from start")
    archived = after.timeline.archived()
    assert [i.requested_time for i in archived.instants] == [first]
    assert archived.metadata[first]["operationType"]
