"""Ticket signing: genuine tickets verify; forged, altered, foreign and expired ones do not."""

from __future__ import annotations

import base64
import json
import os
import stat

import pytest

from catalog.errors import InvalidTicketError
from flight_server.server.security.tickets import TicketSigner, load_or_create_secret

SECRET = bytes(range(32))
PAYLOAD = {"t": "ns.tbl", "i": "20240101000000000", "s": {"p": "a=1", "f": "fg-1"}}


def _signer(secret: bytes = SECRET, ttl: float = 60) -> TicketSigner:
    return TicketSigner(secret, ttl)


def test_roundtrip_and_expiry_are_pinned():
    signer = _signer()
    ticket = signer.sign(PAYLOAD, expires_at=1000.0)
    assert signer.verify(ticket, now=999.0) == PAYLOAD
    # another server sharing the secret serves it too
    assert TicketSigner(SECRET).verify(ticket, now=0) == PAYLOAD


def test_expired_ticket_refused():
    signer = _signer()
    ticket = signer.sign(PAYLOAD, expires_at=1000.0)
    with pytest.raises(InvalidTicketError, match="expired"):
        signer.verify(ticket, now=1000.5)


def test_default_expiry_uses_ttl():
    signer = _signer(ttl=30)
    assert signer.expiry(now=100.0) == 130.0


def test_other_secret_refused():
    ticket = _signer().sign(PAYLOAD, expires_at=1e12)
    with pytest.raises(InvalidTicketError, match="signature"):
        _signer(b"x" * 32).verify(ticket)


def _reencode(ticket: bytes, mutate) -> bytes:
    prefix, body, sig = ticket.split(b".")
    doc = json.loads(base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4)))
    mutate(doc)
    new_body = base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=")
    return b".".join([prefix, new_body, sig])


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(exp=d["exp"] + 10_000),  # extend the lifetime
        lambda d: d.update(t="ns.other"),  # another table
        lambda d: d["s"].update(f="fg-2"),  # another file group
    ],
)
def test_altered_payload_refused(mutate):
    signer = _signer()
    ticket = signer.sign(PAYLOAD, expires_at=1e12)
    with pytest.raises(InvalidTicketError, match="signature"):
        signer.verify(_reencode(ticket, mutate))


@pytest.mark.parametrize(
    "ticket",
    [b"", b"garbage", b"hf1.abc", b"hf1.e30.", b"hf1.e30.!!notbase64!!", b"hf2.e30.AAAA"],
)
def test_forged_or_malformed_refused(ticket):
    with pytest.raises(InvalidTicketError):
        _signer().verify(ticket)


def test_flipped_signature_bit_refused():
    signer = _signer()
    ticket = bytearray(signer.sign(PAYLOAD, expires_at=1e12))
    ticket[-3] = ord("A") if ticket[-3] != ord("A") else ord("B")
    with pytest.raises(InvalidTicketError):
        signer.verify(bytes(ticket))


def test_short_secret_rejected():
    with pytest.raises(ValueError):
        TicketSigner(b"short")


def test_secret_generated_once_and_private(tmp_path):
    path = tmp_path / "state" / "ticket-secret"
    first = load_or_create_secret(path)
    assert len(first) == 32
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_or_create_secret(path) == first


def test_bad_secret_file(tmp_path):
    path = tmp_path / "secret"
    path.write_text("not hex")
    with pytest.raises(ValueError, match="hex"):
        load_or_create_secret(path)
