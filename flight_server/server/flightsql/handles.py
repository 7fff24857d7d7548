"""Prepared statement handles, issued and redeemed through the one ticket codec.

Handles are stateless signed tickets (``query.tickets.PreparedHandle``): any serving process
redeems any of them. A client executing a prepared statement sends each handle back to the
process that issued it, though (the prepared handle with every DoPut, the bound handle with the
GetFlightInfo that follows), and redeeming one costs checking its signature and decoding its
bound parameters again. So the handles this process issued are remembered, bounded, until they
expire: a handle given back byte for byte is the very handle issued, and redeeming it is a
look-up. Any other handle is redeemed by the codec (signature, expiry, kind).
"""

from __future__ import annotations

import time

from catalog.lru import BoundedLRU
from flight_server.server.query.tickets import PreparedHandle, TicketCodec

#: bytes of issued handles remembered (a handle is a few hundred bytes, its parameter row too)
ISSUED_BYTES = 4 << 20


class PreparedHandles:
    """The prepared statement handles of one serving process."""

    def __init__(self, max_bytes: int = ISSUED_BYTES):
        self._issued: BoundedLRU[bytes, tuple[PreparedHandle, float]] = BoundedLRU("prepared handles", max_bytes)

    def issue(self, codec: TicketCodec, handle: PreparedHandle) -> bytes:
        """The signed handle (remembered until it expires)."""
        expires_at = codec.expiry()
        raw = codec.issue(handle, expires_at)
        size = 2 * len(raw) + (handle.parameters.nbytes if handle.parameters is not None else 0)
        self._issued.put(raw, (handle, expires_at), size)
        return raw

    def redeem(self, codec: TicketCodec, raw: bytes) -> PreparedHandle:
        """A genuine, unexpired prepared statement handle (its user is checked when it is analysed).

        Raises:
            InvalidTicketError: malformed, forged, expired or not a prepared statement handle.
        """
        codec.limits.check_ticket(raw)
        issued = self._issued.get(raw)
        if issued is not None and time.time() <= issued[1]:
            return issued[0]
        return codec.redeem(raw, (PreparedHandle,), None)


__all__ = ["PreparedHandles"]
