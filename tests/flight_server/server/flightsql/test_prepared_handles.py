"""Prepared statement handles: a handle this process issued is redeemed by a look-up while it is
valid, and by the codec's rules otherwise (expired, altered, another process's, another kind)."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from catalog.errors import InvalidTicketError
from catalog.plan.options import ReadOptions
from flight_server.server.flightsql.dispatch import _parameters
from flight_server.server.query.tickets import PinnedScan, PreparedHandle, ScanTicket, TicketCodec, parameters_ipc
from flight_server.server.security.limits import LimitExceededError, Limits
from flight_server.server.security.tickets import TicketSigner

SQL = "SELECT * FROM ns.t WHERE uuid = ?"
ROW = pa.record_batch([pa.array(["trip-1"])], names=["p0"])
SIGNER = TicketSigner(b"k" * 32, ttl_seconds=60)


def _codec(issued_bytes: int = 4 << 20) -> TicketCodec:
    return TicketCodec(SIGNER, Limits(max_body_bytes=4096), issued_bytes=issued_bytes)


def test_an_issued_handle_is_redeemed_as_issued(monkeypatch):
    codec = _codec()
    handle = PreparedHandle("alice", SQL, ROW)
    raw = codec.issue(handle)
    monkeypatch.setattr(SIGNER, "verify", lambda *a: pytest.fail("the signature was checked again"))
    assert codec.redeem(raw, (PreparedHandle,), None) is handle
    assert codec.redeem(raw, (PreparedHandle,), None).parameter_values() == ["trip-1"]


def test_other_handles_are_verified():
    codec = _codec()
    elsewhere = _codec(0).issue(PreparedHandle("alice", SQL, ROW))  # another serving process issued it
    redeemed = codec.redeem(elsewhere, (PreparedHandle,), None)
    assert (redeemed.user, redeemed.sql, redeemed.parameter_values()) == ("alice", SQL, ["trip-1"])
    raw = codec.issue(PreparedHandle("alice", SQL))
    body, _, signature = raw.rpartition(b".")
    with pytest.raises(InvalidTicketError, match="signature"):
        codec.redeem(body.replace(b"a", b"b", 1) + b"." + signature, (PreparedHandle,), None)
    scan = codec.issue(ScanTicket("alice", PinnedScan("ns.t", "/t", None, ReadOptions())))
    with pytest.raises(InvalidTicketError, match="prepared statement handle"):
        codec.redeem(scan, (PreparedHandle,), None)
    with pytest.raises(LimitExceededError):
        codec.redeem(b"x" * 10_000, (PreparedHandle,), None)


def test_a_remembered_handle_expires_as_it_would_unremembered(monkeypatch):
    codec = _codec()
    raw = codec.issue(PreparedHandle("alice", SQL, ROW))
    later = time.time() + 120
    monkeypatch.setattr(time, "time", lambda: later)
    with pytest.raises(InvalidTicketError, match="expired"):
        codec.redeem(raw, (PreparedHandle,), None)


def test_remembered_handles_are_charged_their_parameter_rows_within_the_bound():
    codec = _codec(64 << 10)
    wide = pa.record_batch([pa.array(["x" * 8000])], names=["p0"])
    raw = codec.issue(PreparedHandle("alice", SQL, wide))
    assert codec._issued.bytes >= len(raw) + wide.get_total_buffer_size()
    for i in range(500):
        codec.issue(PreparedHandle("alice", SQL, pa.record_batch([pa.array([f"trip-{i}"])], names=["p0"])))
    assert codec._issued.bytes <= 64 << 10 and len(codec._issued) < 500


@pytest.mark.parametrize(
    "batch",
    [
        pa.record_batch([pa.array(["x" * 1000])], names=["p0"]),
        pa.record_batch([pa.array([1]), pa.array([None], pa.string())], names=["a", "b"]),
        pa.record_batch([pa.array(["a", "b"])], names=["p0"]).slice(1, 1),
    ],
)
def test_the_parameter_size_bound_is_the_size_of_the_stream_a_handle_carries(batch):
    """DoPut bounds a parameter row by the IPC stream the bound handle carries, without writing it."""
    size = len(parameters_ipc(batch))
    assert _parameters(_Reader(batch), size) is batch
    with pytest.raises(LimitExceededError):
        _parameters(_Reader(batch), size - 1)


class _Reader:
    """One batch, as DoPut's reader yields it (a chunk with ``data``)."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        self.batch = batch

    def __iter__(self):
        yield _Chunk(self.batch)


class _Chunk:
    def __init__(self, data: pa.RecordBatch) -> None:
        self.data = data
