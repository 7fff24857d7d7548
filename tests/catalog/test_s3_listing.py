"""The listing timestamp parser an S3 Storage's client gets: botocore's values, without dateutil
for ISO-8601 UTC times; installed when the Storage is made, without a request."""

from __future__ import annotations

import pytest

from catalog.s3_listing import iso_timestamp
from catalog.storage import Storage


@pytest.mark.parametrize("text", ["2026-11-28T08:51:54.000Z", "2026-11-28T08:51:54Z", "2026-11-28T08:51:54.123456Z",
                                  "Sat, 28 Nov 2026 08:51:54 GMT", "2026-11-28T08:51:54+02:00", "1764319914"])
def test_iso_timestamp_reads_what_botocore_reads(text: str) -> None:
    from botocore.utils import parse_timestamp

    got, expected = iso_timestamp(text), parse_timestamp(text)
    assert got == expected and got.utcoffset() == expected.utcoffset()


def test_an_s3_storage_client_parses_listing_times_without_dateutil() -> None:
    pytest.importorskip("s3fs")
    options = {"key": "k", "secret": "s", "skip_instance_cache": True,
               "client_kwargs": {"endpoint_url": "http://127.0.0.1:9", "region_name": "us-east-1"}}
    storage = Storage("s3://no-bucket/t", options)  # nothing listens on port 9: no request was made
    defaults = storage.fs.session.get_component("response_parser_factory")._defaults
    assert defaults["timestamp_parser"] is iso_timestamp
