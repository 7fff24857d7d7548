"""Prepared statement handles: a handle this process issued is redeemed by a look-up while it is
valid, and by the codec's rules otherwise (expired, altered, another process's, another kind)."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from catalog.errors import InvalidTicketError
from catalog.plan.options import ReadOptions
from flight_server.server.flightsql.dispatch import _parameters
from flight_server.server.flightsql.handles import PreparedHandles
from flight_server.server.query.tickets import PinnedScan, PreparedHandle, ScanTicket, TicketCodec, parameters_ipc
from flight_server.server.security.limits import LimitExceededError, Limits
from flight_server.server.security.tickets import TicketSigner

SQL = "SELECT * FROM ns.t WHERE uuid = ?"
ROW = pa.record_batch([pa.array(["trip-1"])], names=["p0"])


@pytest.fixture
def codec():
    return TicketCodec(TicketSigner(b"k" * 32, ttl_seconds=60), Limits(max_body_bytes=4096))


def test_an_issued_handle_is_redeemed_as_issued(codec, monkeypatch):
    handles = PreparedHandles()
    handle = PreparedHandle("alice", SQL, ROW)
    raw = handles.issue(codec, handle)
    monkeypatch.setattr(codec, "redeem", lambda *a: pytest.fail("the codec was asked"))
    assert handles.redeem(codec, raw) is handle
    assert handles.redeem(codec, raw).parameter_values() == ["trip-1"]


def test_other_handles_are_redeemed_by_the_codec(codec):
    handles = PreparedHandles()
    elsewhere = codec.issue(PreparedHandle("alice", SQL, ROW))  # another serving process issued it
    redeemed = handles.redeem(codec, elsewhere)
    assert (redeemed.user, redeemed.sql, redeemed.parameter_values()) == ("alice", SQL, ["trip-1"])
    raw = handles.issue(codec, PreparedHandle("alice", SQL))
    body, _, signature = raw.rpartition(b".")
    with pytest.raises(InvalidTicketError, match="signature"):
        handles.redeem(codec, body.replace(b"a", b"b", 1) + b"." + signature)
    scan = codec.issue(ScanTicket("alice", PinnedScan("ns.t", "/t", None, ReadOptions())))
    with pytest.raises(InvalidTicketError, match="prepared statement handle"):
        handles.redeem(codec, scan)
    with pytest.raises(LimitExceededError):
        handles.redeem(codec, b"x" * 10_000)


def test_a_remembered_handle_expires_as_it_would_unremembered(codec, monkeypatch):
    handles = PreparedHandles()
    raw = handles.issue(codec, PreparedHandle("alice", SQL, ROW))
    later = time.time() + 120
    monkeypatch.setattr(time, "time", lambda: later)
    with pytest.raises(InvalidTicketError, match="expired"):
        handles.redeem(codec, raw)


def test_remembered_handles_stay_within_their_byte_bound(codec):
    handles = PreparedHandles(max_bytes=16 << 10)
    for i in range(500):
        handles.issue(codec, PreparedHandle("alice", SQL, pa.record_batch([pa.array([f"trip-{i}"])], names=["p0"])))
    assert handles._issued.bytes <= 16 << 10 and len(handles._issued) < 500


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
