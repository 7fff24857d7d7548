"""Users and their grants, in the catalog database (the registry's SQLAlchemy engine).

A user has a name, a salted scrypt hash of the password (``hashlib.scrypt``, a random 16-byte
salt per user; the cost parameters are stored with the hash, so they can be raised later) and
an admin flag. A grant gives a user ``read`` or ``admin`` on a namespace, on one table of it
(``ns.table``) or on every namespace (``*``). The passwords themselves are never stored.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from catalog.errors import InvalidQueryError
from flight_server.server.errors import ServerError
from flight_server.server.registry import parse_identifier

RIGHTS = ("read", "admin")
ANONYMOUS = "anonymous"  # the name of callers without credentials; no user may take it
#: the caller name of a cluster worker's own calls (heartbeats): no user can be named so (':' is
#: not allowed in user names); it holds no right on any table
CLUSTER_MEMBER = "cluster:member"
EVERY_NAMESPACE = "*"
MAX_PASSWORD_BYTES = 1024
MIN_PASSWORD_CHARS = 8
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
# scrypt cost: N=2^14, r=8, p=1 (16 MiB, ~50 ms); stored with each hash.
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P, _SCRYPT_LEN = 1 << 14, 8, 1, 32
_MAX_SCRYPT_N = 1 << 20

_meta = sa.MetaData()
users_table = sa.Table(
    "hudi_flight_users",
    _meta,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("password_hash", sa.String(255), nullable=False),
    sa.Column("admin", sa.Boolean, nullable=False, default=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
grants_table = sa.Table(
    "hudi_flight_grants",
    _meta,
    sa.Column("user_name", sa.String(64), primary_key=True),
    sa.Column("right_name", sa.String(16), primary_key=True),
    sa.Column("namespace", sa.String(255), primary_key=True),
    sa.Column("table_name", sa.String(255), primary_key=True),  # "": the whole namespace
)


class UserExistsError(ServerError, ValueError):
    """A user of that name exists already."""


class UnknownUserError(ServerError, KeyError):
    """No user (or grant) of that name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def check_user_name(name: str) -> str:
    """Raises: InvalidQueryError for names outside ``[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}`` or ``anonymous``."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name == ANONYMOUS:
        raise InvalidQueryError(
            f"user name {name!r} is not allowed (1-64 of A-Z a-z 0-9 _ . @ -, not {ANONYMOUS!r})"
        )
    return name


# -- password hashes ---------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def hash_password(password: str) -> str:
    """``scrypt$N$r$p$salt$hash`` (base64) of ``password`` with a fresh random salt."""
    raw = password.encode()
    if len(raw) > MAX_PASSWORD_BYTES:
        raise InvalidQueryError(f"password is longer than {MAX_PASSWORD_BYTES} bytes")
    if len(password) < MIN_PASSWORD_CHARS:
        raise InvalidQueryError(f"password is shorter than {MIN_PASSWORD_CHARS} characters")
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(raw, salt=salt, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P, dklen=_SCRYPT_LEN)
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches ``stored`` (constant-time comparison of the digests)."""
    raw = password.encode()
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        cost = (int(n), int(r), int(p))
        expected = base64.b64decode(digest)
        salt_bytes = base64.b64decode(salt)
    except ValueError:
        return False
    if scheme != "scrypt" or len(raw) > MAX_PASSWORD_BYTES or not 1 < cost[0] <= _MAX_SCRYPT_N or cost[1] > 32:
        return False
    given = hashlib.scrypt(raw, salt=salt_bytes, n=cost[0], r=cost[1], p=cost[2], dklen=len(expected),
                           maxmem=256 << 20)
    return hmac.compare_digest(given, expected)


_DUMMY_HASH = f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${_b64(b'0' * 16)}${_b64(b'0' * _SCRYPT_LEN)}"


# -- grants ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """``right`` on ``namespace`` (``*``: every namespace), or on one ``table`` of it."""

    right: str
    namespace: str
    table: str | None = None

    @classmethod
    def parse(cls, right: str, target: str) -> "Grant":
        """``Grant.parse("read", "ns.table")``; targets are ``*``, ``NAMESPACE`` or ``NAMESPACE.TABLE``.

        Raises:
            InvalidQueryError: unknown right or malformed target.
        """
        if right not in RIGHTS:
            raise InvalidQueryError(f"right {right!r} is not one of {', '.join(RIGHTS)}")
        if target == EVERY_NAMESPACE:
            return cls(right, EVERY_NAMESPACE)
        if "." in target:
            ns, name = parse_identifier(target)
            return cls(right, ns, name)
        if not target or any(c.isspace() for c in target) or "*" in target or len(target) > 255:
            raise InvalidQueryError(f"grant target {target!r} is not '*', 'NAMESPACE' or 'NAMESPACE.TABLE'")
        return cls(right, target)

    @property
    def target(self) -> str:
        return self.namespace if self.table is None else f"{self.namespace}.{self.table}"

    def covers(self, namespace: str, table: str) -> bool:
        """Whether this grant applies to table ``namespace.table``."""
        if self.namespace == EVERY_NAMESPACE:
            return True
        return self.namespace == namespace and self.table in (None, table)


@dataclass(frozen=True)
class User:
    """A user as the server sees it (never with the password hash).

    ``incarnation`` tells accounts of one name apart: a digest of when the account was created
    and of its password hash, so a user removed and re-created (or given a new password) is a
    new incarnation, and the bearer tokens of the old one stop working.
    """

    name: str
    admin: bool
    incarnation: str = ""


def _user(row: sa.Row) -> User:
    digest = hashlib.sha256(f"{row.created_at}|{row.password_hash}".encode()).hexdigest()[:16]
    return User(row.name, bool(row.admin), digest)


class UserStore:
    """The users and grants tables on a catalog engine (created when missing).

    Args:
        engine: the registry's engine (``Registry.engine``), so users live in the catalog database.
    """

    def __init__(self, engine: sa.Engine):
        self.engine = engine
        _meta.create_all(engine)

    # -- users ---------------------------------------------------------------------------
    def add_user(self, name: str, password: str, admin: bool = False) -> User:
        """Raises: UserExistsError, InvalidQueryError (name or password not acceptable)."""
        check_user_name(name)
        hashed = hash_password(password)
        try:
            with self.engine.begin() as conn:
                conn.execute(users_table.insert().values(
                    name=name, password_hash=hashed, admin=admin, created_at=datetime.now(timezone.utc)))
        except IntegrityError as err:
            raise UserExistsError(f"user {name} exists already") from err
        found = self.user(name)
        return found if found is not None else User(name, admin)

    def remove_user(self, name: str) -> None:
        """Remove the user and every grant of it. Raises: UnknownUserError."""
        with self.engine.begin() as conn:
            conn.execute(grants_table.delete().where(grants_table.c.user_name == name))
            deleted = conn.execute(users_table.delete().where(users_table.c.name == name)).rowcount
        if not deleted:
            raise UnknownUserError(f"user {name} does not exist")

    def user(self, name: str) -> User | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(users_table).where(users_table.c.name == name)).first()
        return None if row is None else _user(row)

    def has_users(self) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(users_table.c.name).limit(1)).first() is not None

    def check_password(self, name: str, password: str) -> User | None:
        """The user when ``password`` is theirs, else ``None`` (same cost for unknown users)."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(users_table).where(users_table.c.name == name)).first()
        ok = verify_password(password, row.password_hash if row is not None else _DUMMY_HASH)
        return _user(row) if ok and row is not None else None

    # -- grants --------------------------------------------------------------------------
    def grant(self, user: str, grant: Grant) -> bool:
        """Give ``grant`` to ``user``; ``False`` when the user held it already."""
        values = {"user_name": user, "right_name": grant.right, "namespace": grant.namespace,
                  "table_name": grant.table or ""}
        try:
            with self.engine.begin() as conn:
                conn.execute(grants_table.insert().values(**values))
        except IntegrityError:
            return False
        return True

    def revoke(self, user: str, grant: Grant) -> None:
        """Raises: UnknownUserError when ``user`` does not hold ``grant``."""
        with self.engine.begin() as conn:
            deleted = conn.execute(grants_table.delete().where(
                (grants_table.c.user_name == user) & (grants_table.c.right_name == grant.right)
                & (grants_table.c.namespace == grant.namespace) & (grants_table.c.table_name == (grant.table or ""))
            )).rowcount
        if not deleted:
            raise UnknownUserError(f"{user} holds no {grant.right} grant on {grant.target}")

    def grants_of(self, user: str) -> frozenset[Grant]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(grants_table).where(grants_table.c.user_name == user)).all()
        return frozenset(Grant(r.right_name, r.namespace, r.table_name or None) for r in rows)


__all__ = [
    "ANONYMOUS",
    "EVERY_NAMESPACE",
    "Grant",
    "RIGHTS",
    "UnknownUserError",
    "User",
    "UserExistsError",
    "UserStore",
    "check_user_name",
    "hash_password",
    "verify_password",
]
