"""bench.latency_proxy: requests and response bytes counted by kind through the proxy, in front
of a tiny moto bucket (kept-alive connections carry several requests; no timing assertions)."""

from __future__ import annotations

import pytest

from bench.latency_proxy import LatencyProxy, Traffic, request_kind
from tests.support.processes import poll


def test_request_kinds_of_path_style_s3() -> None:
    assert request_kind("GET", "/bench?list-type=2&prefix=a/", {}) == "LIST"
    assert request_kind("GET", "/bench/", {}) == "LIST"
    assert request_kind("GET", "/bench/a/b.parquet", {}) == "GET"
    assert request_kind("GET", "/bench/a/b.parquet", {"range": "bytes=0-9"}) == "GET range"
    assert request_kind("HEAD", "/bench/a", {}) == "HEAD"
    assert request_kind("PUT", "/bench/a", {}) == "PUT"
    later = Traffic({"GET": 5, "HEAD": 1}, {"GET": 50, "HEAD": 0})
    assert (later - Traffic({"GET": 2}, {"GET": 20})).requests == {"GET": 3, "HEAD": 1}


def test_counts_requests_and_bytes_through_the_proxy_to_moto() -> None:
    pytest.importorskip("moto")
    boto3 = pytest.importorskip("boto3")
    from bench.planning import REGION, MotoServer

    moto = MotoServer()
    try:
        with LatencyProxy(moto.endpoint, delay_ms=1) as proxy:
            s3 = boto3.client("s3", endpoint_url=proxy.endpoint, region_name=REGION,
                              aws_access_key_id="testing", aws_secret_access_key="testing")
            s3.create_bucket(Bucket="tiny", CreateBucketConfiguration={"LocationConstraint": REGION})
            payload = bytes(range(256)) * 40  # 10,240 bytes
            s3.put_object(Bucket="tiny", Key="dir/blob.bin", Body=payload)
            s3.put_object(Bucket="tiny", Key="dir/empty.bin", Body=b"")
            before = proxy.traffic()
            assert s3.get_object(Bucket="tiny", Key="dir/blob.bin")["Body"].read() == payload
            part = s3.get_object(Bucket="tiny", Key="dir/blob.bin", Range="bytes=100-199")["Body"].read()
            assert part == payload[100:200]
            assert s3.head_object(Bucket="tiny", Key="dir/blob.bin")["ContentLength"] == len(payload)
            listed = s3.list_objects_v2(Bucket="tiny", Prefix="dir/")
            assert [o["Key"] for o in listed["Contents"]] == ["dir/blob.bin", "dir/empty.bin"]
            got = proxy.traffic() - before
            assert got.requests == {"GET": 1, "GET range": 1, "HEAD": 1, "LIST": 1, "PUT": 0}
            assert got.bytes["GET"] == len(payload) and got.bytes["GET range"] == 100
            assert got.bytes["HEAD"] == 0 and got.bytes["LIST"] > 0
            assert got.total_requests == 4
            assert proxy.traffic().requests["PUT"] == 3  # bucket + two objects
            # moto's own log saw the same requests: the proxy forwarded each one once
            assert proxy.traffic().total_requests == 7
            poll(lambda: moto.request_count() >= 7, 10, "moto to log the requests it served")
            assert moto.request_count() == 7  # a 206 (ranged GET) too
    finally:
        moto.stop()
