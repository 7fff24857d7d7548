"""A minimal server side of Flight's basic-auth handshake for client tests: fixed users, one
bearer token. (The service's real users and tokens are the server's business; the clients only
need a server that answers the handshake as interfaces.md section 6 says.)"""

from __future__ import annotations

import base64

import pyarrow.flight as flight


class _SendBearer(flight.ServerMiddleware):
    def __init__(self, token: str):
        self.token = token

    def sending_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"}


class BasicAuthMiddlewareFactory(flight.ServerMiddlewareFactory):
    """``Basic user:password`` of a known user -> answers with ``Bearer <token>``; every other
    call must carry that bearer token."""

    def __init__(self, users: dict[str, str], token: str):
        self.users = users
        self.token = token

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[str]]) -> flight.ServerMiddleware | None:
        value = (headers.get("authorization") or [""])[0]
        if value.startswith("Basic "):
            user, _, password = base64.b64decode(value[6:]).decode().partition(":")
            if user not in self.users or self.users[user] != password:
                raise flight.FlightUnauthenticatedError("wrong user name or password")
            return _SendBearer(self.token)
        if value != f"Bearer {self.token}":
            raise flight.FlightUnauthenticatedError("missing or unknown bearer token")
        return None


class HandshakeOnly(flight.ServerAuthHandler):
    """Lets the Handshake RPC through (pyarrow answers UNIMPLEMENTED without a handler); the
    middleware above does the checking."""

    def authenticate(self, outgoing: flight.ServerAuthSender, incoming: flight.ServerAuthReader) -> None:
        return None

    def is_valid(self, token: bytes) -> str:
        return ""
