"""A warm table state on S3 (moto) sees a commit written after its last check: the next refresh
lists the timeline, finds the new instant and reads as the table now is; with nothing new it
keeps the state."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from catalog import HudiTable
from catalog.state import TableState
from catalog.storage import Storage
from hudi_generator.generator import COPY_ON_WRITE, MERGE_ON_READ, GeneratorSpec, generate

REGION = "us-east-1"


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by("_hoodie_record_key")


def _upload(s3, bucket: str, local: Path, prefix: str, timeline_last: bool) -> None:
    """Every file of ``local`` under ``prefix``; with ``timeline_last`` the completed instant
    files go after the data and metadata-table files, as a writer's commit does."""
    files = sorted(p for p in local.rglob("*") if p.is_file())
    if timeline_last:
        files.sort(key=lambda p: p.parent == local / ".hoodie" / "timeline")
    for path in files:
        s3.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(local)}")


@pytest.mark.s3
@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_a_commit_written_after_a_warm_query_is_seen_by_the_next(tmp_path: Path, table_type: str) -> None:
    boto3 = pytest.importorskip("boto3")
    from moto.server import ThreadedMotoServer

    spec = dict(rows=200, partitions=2, update_fraction=0.3, delete_fraction=0.0, table_type=table_type,
                record_index=True, workers=1)
    one, two = tmp_path / "one", tmp_path / "two"
    generate(str(one), GeneratorSpec(commits=1, **spec))  # the same table, one commit fewer
    generate(str(two), GeneratorSpec(commits=2, **spec))
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name=REGION)
        bucket = f"refresh-{table_type.lower().replace('_', '-')}"  # moto's store outlives the server
        s3.create_bucket(Bucket=bucket)
        _upload(s3, bucket, one, "t", timeline_last=False)
        options = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint,
                                                                            "region_name": REGION}}
        state = TableState.load(Storage(f"s3://{bucket}/t", options))
        first = HudiTable.open(str(one)).state.latest_instant
        assert state.latest_instant == first
        before = _sorted(HudiTable(state).read())
        assert before.equals(_sorted(HudiTable.open(str(one)).read()))
        assert state.refreshed() is state  # warm: nothing new, the state is kept

        _upload(s3, bucket, two, "t", timeline_last=True)  # the second commit, after the warm query
        moved = state.refreshed()
        second = HudiTable.open(str(two)).state.latest_instant
        assert second is not None and first is not None and second > first
        assert moved is not state and moved.latest_instant == second
        after = _sorted(HudiTable(moved).read())
        assert after.equals(_sorted(HudiTable.open(str(two)).read()))
        assert not after.equals(before)  # the commit changed rows: reading the old state would be wrong
        assert moved.refreshed() is moved
    finally:
        server.stop()
