"""Who may call: the bearer-token check of the Flight service."""

from __future__ import annotations

import hmac

import pyarrow.flight as flight


class BearerTokenMiddlewareFactory(flight.ServerMiddlewareFactory):
    """Every call must send ``authorization: Bearer <token>`` with one of the configured tokens.

    A missing or malformed header is UNAUTHENTICATED; a token that is not accepted is
    UNAUTHORIZED. Tickets stay signed either way (the token says who may call at all).
    """

    def __init__(self, tokens: list[str]):
        self._tokens = [t.encode() for t in tokens]

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[str]]) -> None:
        values = headers.get("authorization", [])
        if not values or not values[0].lower().startswith("bearer "):
            raise flight.FlightUnauthenticatedError("missing 'authorization: Bearer <token>' header")
        given = values[0][7:].strip().encode()
        if not any(hmac.compare_digest(given, t) for t in self._tokens):
            raise flight.FlightUnauthorizedError("token not accepted")
        return None


__all__ = ["BearerTokenMiddlewareFactory"]
