"""Issue 15's "done when", checked across every table with a metadata table: shared fixtures
(versions 8 and 9), external fixtures (versions 6 and 8) and generated tables (versions 6 and 8,
with and without an MDT log compaction) plan through the metadata table without falling back
and without listing a single data partition. Row equality with the reference, table by table,
lives in test_conformance_*.py, test_external_tables.py and tests/hudi_generator; version 4, which
no fixture has, is checked here on relabelled copies of the version 3 and 5 tables (the layout of
versions 3 to 5 is the same)."""

from __future__ import annotations

import re
import shutil
import warnings

import pytest

from catalog import HudiTable
from catalog.errors import MetadataTableFallbackWarning
from catalog.listing.mdt_listing import MetadataTableListing
from catalog.plan.options import ReadOptions
from catalog.plan.planner import file_slices
from catalog.storage import Storage
from hudi_generator.generator import COPY_ON_WRITE, MERGE_ON_READ, GeneratorSpec
from tests.catalog.listing.test_mdt_listing import MDT_TABLES as SHARED_MDT_TABLES
from tests.catalog.test_external_tables import COW_V5, MOR_V3
from tests.catalog.test_external_tables import MDT_TABLES as EXTERNAL_MDT_TABLES
from tests.support.compare import assert_same_rows

SMALL = dict(rows=200, partitions=3, files_per_partition=2, commits=3, update_fraction=0.25, delete_fraction=0.05)
GENERATED = {
    f"v{v}-{t.split('_')[0].lower()}{'-logcompacted' if lc else ''}": GeneratorSpec(
        **SMALL, table_type=t, table_version=v, mdt_log_compaction=lc)
    for v in (6, 8) for t in (COPY_ON_WRITE, MERGE_ON_READ) for lc in (False, True)
}


def _path(request, kind: str, name: str) -> str:
    if kind == "shared":
        return request.getfixturevalue("fixture_table")(name)
    if kind == "external":
        return request.getfixturevalue("external_table")(name)
    return request.getfixturevalue("generated_table")(GENERATED[name])


CASES = ([("shared", n) for n in SHARED_MDT_TABLES] + [("external", n) for n in EXTERNAL_MDT_TABLES]
         + [("generated", n) for n in GENERATED])


@pytest.mark.parametrize("kind, name", CASES, ids=[f"{k}:{n}" for k, n in CASES])
def test_metadata_table_planning_lists_no_data_partition(request, monkeypatch, kind, name):
    path = _path(request, kind, name)
    listed: list[str] = []
    ls = Storage.ls

    def spy(self, rel: str = ""):
        listed.append(f"{self.uri}|{rel}")
        return ls(self, rel)

    monkeypatch.setattr(Storage, "ls", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)
        table = HudiTable.open(path)
        slices = list(file_slices(table.state, ReadOptions()))
        assert isinstance(table.state.listing, MetadataTableListing)
    assert slices
    root = table.storage.uri.rstrip("/")
    # every listing is of the timeline or of the metadata table, never of a data partition
    outside = [entry for entry in listed if not (entry.split("|", 1)[0].rstrip("/") + "/" + entry.split("|", 1)[1])
               .removeprefix(root + "/").startswith(".hoodie")]
    assert not outside, outside


@pytest.mark.parametrize("name", [COW_V5, MOR_V3])
def test_version_4_reads_like_its_neighbours(external_table, tmp_path, name):
    original = external_table(name)
    copy = tmp_path / "v4"
    shutil.copytree(original, copy)
    props = copy / ".hoodie/hoodie.properties"
    props.write_text(re.sub(r"(?m)^hoodie\.table\.version=.*$", "hoodie.table.version=4", props.read_text()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MetadataTableFallbackWarning)  # cow_pt declares an MDT it lacks
        relabelled, native = HudiTable.open(str(copy)), HudiTable.open(original)
        assert relabelled.table_version == 4
        assert_same_rows(relabelled.read(), native.read(), f"{name} as version 4")
