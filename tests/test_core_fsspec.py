"""All table IO goes through fsspec: a table in ``memory://`` (or any registered protocol) reads
exactly like the same table on local disk."""

from __future__ import annotations

import os
import uuid

import fsspec
import pytest

from catalog import HudiTable
from tests.core_compare import assert_same_rows


@pytest.mark.parametrize("name", ["sample_table/cow/v6_complexkeygen_hivestyle", "sample_table/cow/v9_txns_simple_nometa"])
def test_memory_filesystem(fixture_table, name):
    local = fixture_table(name)
    mem = fsspec.filesystem("memory")
    root = f"/h1-{uuid.uuid4().hex}"
    for dirpath, _, files in os.walk(local):
        for f in files:
            src = os.path.join(dirpath, f)
            mem.pipe_file(root + "/" + os.path.relpath(src, local), open(src, "rb").read())
    try:
        table = HudiTable.open(f"memory://{root}")
        result = table.read(filters=[("_hoodie_commit_time", "is not null", None)])
        assert_same_rows(result, HudiTable.open(local).read(), name)
        stats = table.storage.stats.snapshot()
        assert stats["list"] > 0 and stats["open"] >= 1 and stats["read"] >= 1
        assert len(table.timeline) == len(HudiTable.open(local).timeline)
    finally:
        mem.rm(root, recursive=True)


def test_interpreter_exits_cleanly_after_reads():
    """Regression: Arrow CPU threads calling into the fsspec-backed PyFileSystem, and a
    PyFileSystem cached on the table until interpreter exit, aborted the process now and then ("terminate called without an active exception"). The
    failure was intermittent (up to one run in three), so several processes are run."""
    import subprocess
    import sys
    from pathlib import Path

    from tests.fixtures import HUDI_DIR

    if not (HUDI_DIR / "sample_table/cow/v9_txns_simple_nometa.zip").exists():
        pytest.fail("fixture zip missing")
    code = (
        "import sys, tempfile\n"
        "from pathlib import Path\n"
        "from tests.fixtures import extract_table\n"
        "from catalog import HudiTable\n"
        "d = Path(tempfile.mkdtemp())\n"
        "for name in ('sample_table/cow/v9_txns_simple_nometa', 'sample_table/cow/v6_complexkeygen_hivestyle'):\n"
        "    t = HudiTable.open(str(extract_table(name, d)), use_metadata_table=False)\n"
        "    t.read(); t.read(columns=[]); t.read(columns=[], filters=[('_hoodie_record_key', 'is not null', None)])\n"
    )
    root = str(Path(__file__).resolve().parents[1])
    for _ in range(10):
        proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
