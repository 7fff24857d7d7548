"""Static bearer tokens and basic-auth logins for tests and benchmarks of the client surfaces.

The one place that knows how the server configures static tokens (``tokens``: token -> user
name, the user's rights being its grants), so TLS and client tests do not depend on it; the
token's user is made an admin in the server's catalog.
"""

from __future__ import annotations

import secrets
from typing import Any

from flight_server.server.config import ServerConfig

TOKEN_USER = "token-user"


def token_settings(token: str) -> dict[str, Any]:
    """ServerConfig keys that make ``token`` a static token."""
    return {"tokens": {token: TOKEN_USER}}


def token_toml(token: str) -> str:
    """The same as a config file."""
    return f'[server.tokens]\n"{token}" = "{TOKEN_USER}"\n'


def _add_admin(users: Any, name: str = TOKEN_USER) -> None:
    if users.user(name) is None:
        users.add_user(name, secrets.token_urlsafe(24), admin=True)


def allow_token_user(server: Any) -> None:
    """Give the token's user every right on a running in-process server (where users exist)."""
    _add_admin(server.app.users)
    server.app.access.forget()


def prepare_state(state_dir: str, names: tuple[str, ...] = (TOKEN_USER,)) -> None:
    """Give the token's user (or the users ``names``) every right in the catalog of
    ``serve --state-dir state_dir`` (before it starts)."""
    from flight_server.server.registry import Registry
    from flight_server.server.security.state_files import private_dir, private_sqlite
    from flight_server.server.security.users import UserStore

    config = ServerConfig(state_dir=state_dir)
    private_dir(config.state_path)
    private_sqlite(config.resolved_catalog_url)
    users = UserStore(Registry(config.resolved_catalog_url).engine)
    for name in names:
        _add_admin(users, name)


def add_login_users(server: Any, users: dict[str, str]) -> None:
    """Create ``users`` (with every right) in a running server's catalog, where the service has users."""
    for name, password in users.items():
        if server.app.users.user(name) is None:
            server.app.users.add_user(name, password, admin=True)
    server.app.access.forget()
