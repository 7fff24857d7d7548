"""Opaque, signed, expiring Flight tickets.

A ticket is ``b"hf1." + base64url(json payload) + b"." + base64url(HMAC-SHA256(secret, payload))``.
The payload is whatever the service needs to read one split without re-planning (table, pinned
instant, query options, the split itself) plus an absolute expiry. Any server holding the same
secret can verify and serve it. The issuing process also remembers the tickets it issued and the
plans behind them (``query/tickets.py``, ``query/queries.py``), but only as caches: a process that
remembers nothing serves a ticket with the same rows.

The payload is signed, not encrypted: it must never carry credentials (storage options stay in
the registry of the serving server).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any, Mapping

from catalog.errors import InvalidTicketError
from flight_server.server.security.state_files import private_dir

_PREFIX = b"hf1."
SECRET_BYTES = 32


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def _unb64(data: bytes) -> bytes:
    return base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4))


class TicketSigner:
    """Signs and verifies ticket payloads with one shared secret.

    Args:
        secret: the HMAC key; at least 16 bytes.
        ttl_seconds: lifetime of the tickets this signer issues.
        prefix: marks what is signed (``hf1.`` tickets; bearer tokens use their own prefix and key).
        kind: what error messages call the signed thing.
    """

    def __init__(self, secret: bytes, ttl_seconds: float = 3600.0, *, prefix: bytes = _PREFIX, kind: str = "ticket"):
        if len(secret) < 16:
            raise ValueError(f"{kind} secret must be at least 16 bytes")
        if ttl_seconds <= 0:
            raise ValueError(f"{kind} ttl must be positive")
        self._secret = bytes(secret)
        self.ttl_seconds = float(ttl_seconds)
        self.prefix = prefix
        self.kind = kind

    def derived(self, purpose: str) -> "TicketSigner":
        """A signer under a key derived from this secret for ``purpose`` (e.g. cluster heartbeats):
        its tokens and this signer's tickets never verify under each other."""
        return TicketSigner(self.derive("hudi-flight/" + purpose), self.ttl_seconds, kind=purpose)

    def _mac(self, body: bytes) -> bytes:
        return hmac.digest(self._secret, body, "sha256")  # one-shot, in C

    def derive(self, label: str) -> bytes:
        """A key for another use of this signer's secret (see :func:`derive_key`)."""
        return derive_key(self._secret, label)

    def expiry(self, now: float | None = None) -> float:
        """The absolute expiry (epoch seconds) of a ticket issued at ``now``."""
        return (time.time() if now is None else now) + self.ttl_seconds

    def sign(self, payload: Mapping[str, Any], expires_at: float) -> bytes:
        """Serialise ``payload`` with its expiry and sign it."""
        doc = dict(payload)
        doc["exp"] = round(expires_at, 3)
        body = _b64(json.dumps(doc, separators=(",", ":"), sort_keys=True).encode())
        return self.prefix + body + b"." + _b64(self._mac(body))

    def verify(self, ticket: bytes, now: float | None = None) -> dict[str, Any]:
        """Return the payload of a genuine, unexpired ticket.

        Raises:
            InvalidTicketError: malformed, bad signature (forged, altered or signed under another
                secret) or expired.
        """
        kind = self.kind
        if not ticket.startswith(self.prefix) or ticket.count(b".") != 2:
            raise InvalidTicketError(f"{kind} is not a hudi-flight {kind}")
        body, _, sig = ticket[len(self.prefix):].partition(b".")
        try:
            given = _unb64(sig)
        except ValueError as err:
            raise InvalidTicketError(f"{kind} signature is malformed") from err
        if not hmac.compare_digest(given, self._mac(body)):
            raise InvalidTicketError(f"{kind} signature does not match (forged, altered or from another server)")
        try:
            doc = json.loads(_unb64(body))
        except ValueError as err:  # signed by us yet unreadable: only if the secret leaked
            raise InvalidTicketError(f"{kind} payload is not valid JSON") from err
        exp = doc.pop("exp", None)
        if not isinstance(exp, (int, float)):
            raise InvalidTicketError(f"{kind} has no expiry")
        if (time.time() if now is None else now) > exp:
            again = "plan the query again" if kind == "ticket" else "authenticate again"
            raise InvalidTicketError(f"{kind} expired; {again}")
        return doc


def derive_key(secret: bytes, label: str) -> bytes:
    """A key for another use of the server secret (HMAC-SHA256 of ``label``), so that what one
    signer issues can never pass for what another issues."""
    return hmac.new(secret, label.encode(), hashlib.sha256).digest()


def load_or_create_secret(path: str | os.PathLike[str]) -> bytes:
    """Read the hex secret at ``path``; on first start create it (mode 0600) and return it."""
    p = Path(path)
    if p.exists():
        text = p.read_text().strip()
        try:
            secret = bytes.fromhex(text)
        except ValueError as err:
            raise ValueError(f"ticket secret file {p} does not hold a hex string") from err
        if len(secret) < 16:
            raise ValueError(f"ticket secret in {p} is shorter than 16 bytes")
        return secret
    private_dir(p.parent)
    secret = secrets.token_bytes(SECRET_BYTES)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another server process created it first: use theirs
        time.sleep(0.05)
        return load_or_create_secret(p)
    with os.fdopen(fd, "w") as fh:
        fh.write(secret.hex() + "\n")
    return secret


def configured_signer(secret_hex: str | None, secret_file: str | os.PathLike[str], ttl_seconds: float) -> TicketSigner:
    """The signer of a server: the configured hex secret, else the one persisted in ``secret_file``
    (created on first start). Every process and machine of a cluster must end up with the same."""
    secret = bytes.fromhex(secret_hex) if secret_hex else load_or_create_secret(secret_file)
    return TicketSigner(secret, ttl_seconds)


__all__ = ["TicketSigner", "configured_signer", "derive_key", "load_or_create_secret"]
