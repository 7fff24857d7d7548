"""Static bearer tokens and basic-auth logins for tests and benchmarks of the client surfaces.

The one place that knows how the server configures static tokens, so TLS and client tests do not
depend on it: ``auth_tokens`` (a list of accepted tokens) before issue 12's users and grants,
``tokens`` (token -> user name, the user's rights being its grants) after. In the latter shape the
token's user is made an admin in the server's catalog.
"""

from __future__ import annotations

import dataclasses
import secrets
from typing import Any

from flight_server.server.config import ServerConfig

TOKEN_USER = "token-user"


def _mapped() -> bool:
    return "tokens" in {f.name for f in dataclasses.fields(ServerConfig)}


def token_settings(token: str) -> dict[str, Any]:
    """ServerConfig keys that make ``token`` a static token."""
    return {"tokens": {token: TOKEN_USER}} if _mapped() else {"auth_tokens": [token]}


def token_toml(token: str) -> str:
    """The same as a config file."""
    if _mapped():
        return f'[server.tokens]\n"{token}" = "{TOKEN_USER}"\n'
    return f'[server]\nauth_tokens = ["{token}"]\n'


def _add_admin(users: Any) -> None:
    if users.user(TOKEN_USER) is None:
        users.add_user(TOKEN_USER, secrets.token_urlsafe(24), admin=True)


def allow_token_user(server: Any) -> None:
    """Give the token's user every right on a running in-process server (where users exist)."""
    if _mapped():
        _add_admin(server.users)
        server.access.forget()


def prepare_state(state_dir: str) -> None:
    """Give the token's user every right in the catalog of ``serve --state-dir state_dir`` (before it starts)."""
    if not _mapped():
        return
    from flight_server.server.registry import Registry
    from flight_server.server.state_files import private_dir, private_sqlite
    from flight_server.server.users import UserStore  # type: ignore[import-not-found, unused-ignore]

    config = ServerConfig(state_dir=state_dir)
    private_dir(config.state_path)
    private_sqlite(config.resolved_catalog_url)
    _add_admin(UserStore(Registry(config.resolved_catalog_url).engine))


def login_server_kwargs(users: dict[str, str], token: str) -> dict[str, Any]:
    """HudiFlightServer keyword arguments for a server that answers the basic-auth handshake.

    Before the service had users, a stand-in (tests/support/basic_auth.py) that knows ``users``
    and hands out ``token``; after, the service's own handshake (add the users with
    :func:`add_login_users` once the server runs).
    """
    if _mapped():
        return {}
    from tests.support.basic_auth import BasicAuthMiddlewareFactory, HandshakeOnly

    return {"middleware": {"login": BasicAuthMiddlewareFactory(users, token)}, "auth_handler": HandshakeOnly()}


def add_login_users(server: Any, users: dict[str, str]) -> None:
    """Create ``users`` (with every right) in a running server's catalog, where the service has users."""
    if not _mapped():
        return
    for name, password in users.items():
        if server.users.user(name) is None:
            server.users.add_user(name, password, admin=True)
    server.access.forget()
