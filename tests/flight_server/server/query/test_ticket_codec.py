"""The one ticket codec: every kind round-trips, a ticket of one kind never passes for another,
a ticket of another user is refused the same way everywhere, and a snapshot's instant travels once."""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog.errors import InvalidTicketError
from catalog.plan.options import ReadOptions
from catalog.table.files import BaseFile, FileSlice, Split
from flight_server.server.query.tickets import (
    CountTicket,
    PinnedScan,
    PreparedHandle,
    ScanTicket,
    SplitTicket,
    StatementTicket,
    TicketCodec,
)
from flight_server.server.security.limits import Limits
from flight_server.server.security.tickets import TicketSigner

INSTANT = "20240101000000000"
SCAN = PinnedScan("ns.t", "/tables/t", INSTANT, ReadOptions(as_of=INSTANT, columns=("a",), filters=(("a", "=", 1),)))
SPLIT = Split(FileSlice("p=1", "fg1", INSTANT, BaseFile.parse(f"fg1_0-1-0_{INSTANT}.parquet", 100)), 100, 10, 0.5,
              row_groups=(0, 2))


@pytest.fixture
def codec():
    return TicketCodec(TicketSigner(b"k" * 32), Limits())


@pytest.mark.parametrize("ticket", [
    SplitTicket("alice", SCAN, SPLIT),
    # a metadata-only bootstrap skeleton travels with its source file
    SplitTicket("alice", SCAN, Split(FileSlice("p0", "fg2", "00000000000001",
                                               BaseFile.parse("fg2_0-1-0_00000000000001.parquet", 50),
                                               bootstrap_source="p0/part-0.parquet"), 50, 5, 0.1)),
    ScanTicket("alice", PinnedScan(SCAN.table, SCAN.uri, SCAN.instant, SCAN.options.replace(limit=5))),
    StatementTicket("alice", "SELECT 1 FROM __hudi_scan_0", (("__hudi_scan_0", SCAN),)),
    CountTicket("alice", "n", 42, SCAN),
    PreparedHandle("alice", "SELECT * FROM ns.t WHERE a = ?", pa.record_batch([pa.array([7])], names=["p0"])),
])
def test_every_kind_round_trips_for_its_user_only(codec, ticket):
    raw = codec.issue(ticket)
    got = codec.redeem(raw, (type(ticket),), "alice")
    if isinstance(ticket, PreparedHandle):
        assert (got.sql, got.user, got.parameter_values()) == (ticket.sql, ticket.user, [7])
    else:
        assert got == ticket
    with pytest.raises(flight.FlightUnauthorizedError, match="issued to another user"):
        codec.redeem(raw, (type(ticket),), "bob")
    other = SplitTicket if not isinstance(ticket, SplitTicket) else StatementTicket
    with pytest.raises(InvalidTicketError):
        codec.redeem(raw, (other,), "alice")


def test_a_snapshot_instant_travels_once(codec):
    doc = codec.signer.verify(codec.issue(SplitTicket("alice", SCAN, SPLIT)))
    assert doc["s"]["i"] == INSTANT and "as_of" not in doc["s"]["o"]
    incremental = PinnedScan("ns.t", "/t", INSTANT, ReadOptions(query_type="incremental", start="20230101000000000", end=INSTANT))
    assert codec.redeem(codec.issue(ScanTicket("alice", incremental)), (ScanTicket,), None).scan == incremental


def test_forged_and_incomplete_payloads_are_refused(codec):
    forged = TicketCodec(TicketSigner(b"x" * 32), Limits()).issue(CountTicket("alice", "n", 1, SCAN))
    with pytest.raises(InvalidTicketError):
        codec.redeem(forged, (CountTicket,), "alice")
    incomplete = codec.signer.sign({"k": "count", "u": "alice", "n": "n"}, codec.expiry())
    with pytest.raises(InvalidTicketError, match="incomplete"):
        codec.redeem(incomplete, (CountTicket,), "alice")


@pytest.mark.parametrize("scan", [
    SCAN,
    PinnedScan("ns.t", "/tables/t", INSTANT, ReadOptions(query_type="incremental", start="20230101000000000",
                                                         end=INSTANT)),
    PinnedScan("ns.t", "/tables/t", None, ReadOptions()),
])
def test_a_redeemed_pin_has_the_key_and_json_form_of_the_issued_one(codec, scan):
    """The plan cache finds ``do_get``'s plan by the pin's key: the redeemed pin (which keeps the
    signed JSON form instead of making it again) must have the same key as the planned one."""
    got = codec.redeem(codec.issue(SplitTicket("alice", scan, SPLIT)), (SplitTicket,), "alice").scan
    assert got == scan
    assert got.key == scan.key
    fresh = PinnedScan(got.table, got.uri, got.instant, got.options)
    assert fresh.to_json() == got.to_json() == scan.to_json()


def test_issued_tickets_are_redeemed_as_issued_within_their_bound(monkeypatch):
    """A remembered ticket is not verified or parsed again; its kind, owner and expiry still
    count; one not remembered (another codec issued it, or it was forgotten) is verified."""
    signer = TicketSigner(b"k" * 32, ttl_seconds=60)
    codec = TicketCodec(signer, Limits(), issued_bytes=8 << 10)
    ticket = SplitTicket("alice", SCAN, SPLIT)
    raw = codec.issue(ticket)
    verified = []
    real_verify = signer.verify
    monkeypatch.setattr(signer, "verify", lambda *a: verified.append(1) or real_verify(*a))
    assert codec.redeem(raw, (SplitTicket,), "alice") is ticket and verified == []
    with pytest.raises(flight.FlightUnauthorizedError, match="issued to another user"):
        codec.redeem(raw, (SplitTicket,), "bob")
    with pytest.raises(InvalidTicketError, match="not a Flight SQL statement ticket"):
        codec.redeem(raw, (StatementTicket,), "alice")
    assert verified == []

    elsewhere = TicketCodec(signer, Limits()).issue(ticket, codec.expiry() + 1)  # another process: verified
    assert codec.redeem(elsewhere, (SplitTicket,), "alice") == ticket and verified == [1]
    altered = raw[:-2] + (b"A" if raw[-2:-1] != b"A" else b"B") + raw[-1:]
    with pytest.raises(InvalidTicketError):
        codec.redeem(altered, (SplitTicket,), "alice")

    later = time.time() + 120
    monkeypatch.setattr(time, "time", lambda: later)
    with pytest.raises(InvalidTicketError, match="expired"):
        codec.redeem(raw, (SplitTicket,), "alice")

    for i in range(20):  # ~1.7 KB each: the bound keeps the last few only
        codec.issue(SplitTicket(f"user{i}", SCAN, SPLIT), later + 60)
    assert codec._issued.bytes <= 8 << 10 and raw not in codec._issued
