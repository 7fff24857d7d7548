"""Who may do what (docs/flight.md, "Authorization"): the rights of a caller and the safe defaults.

Rights: ``read`` on a namespace or a table (list, plan, read it) and ``admin`` (everything,
including register/unregister/refresh). A user's rights are its admin flag plus its grants; a
grant on ``*`` covers every namespace, an ``admin`` grant implies ``read`` where it applies, and
catalog-wide changes (re-scanning every warehouse) need the admin flag or ``admin`` on ``*``.

Anonymous callers read everything, and only while the server has no users and no tokens and
listens on a loopback address (or was started ``--insecure``); they never get ``admin``. On a
loopback address (not merely ``--insecure``) with no users and no tokens they may also make the
local changes (:data:`LOCAL_CHANGES`: refresh, register under the allowed roots), so a local
server picks up a new table folder without adding a user, which would end anonymous reads.

Lookups are cached per user for ``cache_seconds`` (about a second): planning pays no database
query per call, and a revoke or a removed user counts from the next call after that.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, TypeVar

import pyarrow.flight as flight

from flight_server.server.registry import parse_identifier
from flight_server.server.security.users import ANONYMOUS, CLUSTER_MEMBER, EVERY_NAMESPACE, Grant, UserStore

T = TypeVar("T")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost`` counts; other names do not)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, has_credentials: bool, insecure: bool, tls: bool = False) -> None:
    """Refuse to serve a non-loopback address without credentials configured (anyone could read
    every table), or with credentials but without TLS (passwords and tokens would cross the
    network in clear); ``insecure`` allows both.

    Raises:
        ValueError: the refusal, saying how to proceed.
    """
    if insecure or is_loopback(host):
        return
    if not has_credentials:
        raise ValueError(
            f"refusing to listen on {host} with no users and no tokens (anyone could read every table): "
            "add a user (hudi-flight users add), configure [server.tokens], listen on 127.0.0.1, "
            "or pass --insecure"
        )
    if not tls:
        raise ValueError(
            f"refusing to listen on {host} without TLS while users or tokens are configured (passwords and "
            "tokens would cross the network in clear): pass --tls-cert and --tls-key, listen on 127.0.0.1, "
            "or pass --insecure"
        )


@dataclass(frozen=True)
class Rights:
    """What one caller may do."""

    user: str
    admin: bool
    grants: frozenset[Grant]
    incarnation: str | None = None  # the user's account (users.User.incarnation); None: no account
    local_changes: bool = False  # the LOCAL_CHANGES without admin (anonymous on a loopback server)

    def allows(self, right: str, table: str | None = None) -> bool:
        """``right`` on ``table`` (``"ns.name"``), or on the catalog as a whole when ``None``
        (``read``: any authenticated caller; ``admin``: admin flag or ``admin`` on ``*``; a
        local change: ``local_changes``, else what ``admin`` allows)."""
        if self.admin or (self.local_changes and right in LOCAL_CHANGES):
            return True
        if right in LOCAL_CHANGES:
            right = "admin"
        if table is None:
            return right == "read" or any(g.right == "admin" and g.namespace == EVERY_NAMESPACE for g in self.grants)
        ns, name = parse_identifier(table)
        return any((right == "read" or g.right == "admin") and g.covers(ns, name) for g in self.grants)

    def sees_namespace(self, namespace: str) -> bool:
        """Whether the namespace is listed to this caller (it holds some grant in it)."""
        return self.admin or any(g.namespace in (EVERY_NAMESPACE, namespace) for g in self.grants)


#: the rights below ``admin`` that anonymous callers of a loopback server hold (else ``admin`` is needed)
LOCAL_CHANGES = frozenset({"refresh", "register"})

ANONYMOUS_RIGHTS = Rights(ANONYMOUS, False, frozenset({Grant("read", EVERY_NAMESPACE)}))
#: anonymous callers of a loopback server without users and tokens
LOCAL_ANONYMOUS_RIGHTS = Rights(ANONYMOUS, False, ANONYMOUS_RIGHTS.grants, local_changes=True)


#: the values of the ``anonymous_read`` switch (docs/flight.md, Security)
ANONYMOUS_READ_MODES = ("auto", "on", "off")


class Access:
    """The rights of callers, from the user store and the static tokens' user names.

    Args:
        users: the catalog's users and grants.
        token_users: the user names the configured static tokens map to.
        open_address: the server listens on loopback, or was started ``--insecure``.
        cache_seconds: how long a user's rights are reused.
        anonymous_read: ``auto`` (anonymous callers read only while the server has no users and
            no tokens), ``on`` (they keep reading every table when users exist) or ``off``
            (never); in every case only on an open address.
        loopback: the server listens on a loopback address only (anonymous callers may then make
            the :data:`LOCAL_CHANGES` while there are no users and no tokens).
    """

    def __init__(
        self,
        users: UserStore,
        token_users: Iterable[str],
        open_address: bool,
        cache_seconds: float = 1.0,
        anonymous_read: str = "auto",
        loopback: bool = False,
    ):
        if anonymous_read not in ANONYMOUS_READ_MODES:
            raise ValueError(f"anonymous_read must be one of {', '.join(ANONYMOUS_READ_MODES)}, not {anonymous_read!r}")
        self.anonymous_read = anonymous_read
        self.users = users
        self.token_users = frozenset(token_users)
        self.open_address = open_address
        self.loopback = loopback
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, object]] = {}
        self._lock = threading.Lock()

    def _cached(self, key: str, load: Callable[[], T]) -> T:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]  # type: ignore[return-value]
        value = load()
        with self._lock:
            if len(self._cache) > 10_000:  # bounded: many distinct users within a second
                self._cache.clear()
            self._cache[key] = (now + self.cache_seconds, value)
        return value

    def forget(self) -> None:
        """Drop the cached lookups (the next call reads the database)."""
        with self._lock:
            self._cache.clear()

    def anonymous_allowed(self) -> bool:
        """A loopback (or ``--insecure``) address, and ``anonymous_read`` on, or ``auto`` with no
        users and no tokens (adding a user then ends anonymous reads unless the switch is on)."""
        if not self.open_address or self.anonymous_read == "off":
            return False
        if self.anonymous_read == "on":
            return True
        return self._no_credentials()

    def _no_credentials(self) -> bool:
        return not self.token_users and not self._cached("\0has-users", self.users.has_users)

    def rights(self, user: str) -> Rights | None:
        """The caller's rights; ``None`` when it is not (or no longer) a known caller."""
        if user == ANONYMOUS:
            if not self.anonymous_allowed():
                return None
            local = self.loopback and self._no_credentials()
            return LOCAL_ANONYMOUS_RIGHTS if local else ANONYMOUS_RIGHTS
        if user == CLUSTER_MEMBER:  # a worker: authenticated by the shared secret, no grants
            return Rights(user, False, frozenset())
        return self._cached("user:" + user, lambda: self._load(user))

    def _load(self, user: str) -> Rights | None:
        record = self.users.user(user)
        if record is None and user not in self.token_users:
            return None
        incarnation = record.incarnation if record is not None else None
        return Rights(user, bool(record and record.admin), self.users.grants_of(user), incarnation)

    def authorize(self, user: str, right: str, table: str | None = None) -> str:
        """``user`` once it holds ``right`` on ``table``.

        Raises:
            flight.FlightUnauthenticatedError: an unknown (removed) user, or anonymous where not allowed.
            flight.FlightUnauthorizedError: the right is missing.
        """
        rights = self.rights(user)
        if rights is None:
            raise flight.FlightUnauthenticatedError(_unknown(user))
        if not rights.allows(right, table):
            needed = "admin" if right in LOCAL_CHANGES else right
            hint = " (anonymous callers refresh and register on a loopback server without users only)" \
                if user == ANONYMOUS and right in LOCAL_CHANGES else ""
            raise flight.FlightUnauthorizedError(f"{user} has no {needed} right on {table or 'the catalog'}{hint}")
        return user

    def owner(self, user: str) -> str:
        """The owner a ticket issued to ``user`` names: the name and, for an account, its
        incarnation (``users.User.incarnation``), so the tickets of an account removed and
        re-created under the same name are another user's."""
        rights = self.rights(user)
        incarnation = rights.incarnation if rights is not None else None
        return f"{user}/{incarnation}" if incarnation else user

    def allowed(self, user: str, right: str, table: str | None = None) -> bool:
        """Whether ``user`` holds ``right`` on ``table`` (``None``: the catalog as a whole)."""
        rights = self.rights(user)
        return rights is not None and rights.allows(right, table)

    def readable(self, user: str, tables: list[str]) -> list[str]:
        rights = self.rights(user)
        return [t for t in tables if rights is not None and rights.allows("read", t)]

    def visible_namespaces(self, user: str, namespaces: list[str]) -> list[str]:
        rights = self.rights(user)
        return [ns for ns in namespaces if rights is not None and rights.sees_namespace(ns)]


def _unknown(user: str) -> str:
    if user == ANONYMOUS:
        return "credentials required: authenticate (basic auth handshake) or send 'authorization: Bearer <token>'"
    return f"user {user} does not exist (any more)"


__all__ = [
    "ANONYMOUS_RIGHTS", "LOCAL_ANONYMOUS_RIGHTS", "LOCAL_CHANGES", "Access", "Rights", "check_exposure", "is_loopback",
]
