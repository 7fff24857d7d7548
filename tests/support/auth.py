"""Credentials for tests: an admin user in a server's catalog and Flight clients that send a
bearer token on every call (a stock ``pyarrow.flight`` client does not keep one by itself)."""

from __future__ import annotations

import pyarrow.flight as flight

from flight_server.server.service import HudiFlightServer

ADMIN = "admin"
ADMIN_PASSWORD = "admin-password"


class _BearerHeader(flight.ClientMiddlewareFactory):
    """Adds the handshake's ``authorization`` header to every call once it is known."""

    def __init__(self) -> None:
        self.header: dict[str, str] = {}

    def start_call(self, info: flight.CallInfo) -> flight.ClientMiddleware:
        return _Sending(self.header)


class _Sending(flight.ClientMiddleware):
    def __init__(self, header: dict[str, str]):
        self._header = header

    def sending_headers(self) -> dict[str, str]:
        return dict(self._header)


def add_user(server: HudiFlightServer, name: str, password: str, admin: bool = False) -> None:
    """Create ``name`` in the server's catalog unless it exists; the server sees it at once."""
    if server.app.users.user(name) is None:
        server.app.users.add_user(name, password, admin=admin)
    server.app.access.forget()


def add_admin(server: HudiFlightServer) -> None:
    """The admin user ``ADMIN`` / ``ADMIN_PASSWORD`` in the server's catalog."""
    add_user(server, ADMIN, ADMIN_PASSWORD, admin=True)


def user_client(port: int, user: str, password: str) -> flight.FlightClient:
    """A stock pyarrow client of ``127.0.0.1:port`` authenticated as ``user`` by the handshake."""
    bearer = _BearerHeader()
    client = flight.connect(f"grpc://127.0.0.1:{port}", middleware=[bearer])
    key, value = client.authenticate_basic_token(user, password)
    bearer.header[key.decode()] = value.decode()
    return client


def admin_client(server: HudiFlightServer) -> flight.FlightClient:
    """A stock pyarrow client of ``server`` authenticated as its admin user (created if needed)."""
    add_admin(server)
    return user_client(server.port, ADMIN, ADMIN_PASSWORD)
