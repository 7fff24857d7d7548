"""Who is calling: Flight's basic-auth handshake, signed bearer tokens and static tokens.

A client authenticates with ``FlightClient.authenticate_basic_token(user, password)``: the
``Handshake`` call carries ``authorization: Basic base64(user:password)``, the password is
checked against the user's scrypt hash, and the response carries ``authorization: Bearer
<token>``. The token (``hft1.`` + payload + HMAC) is signed with a key derived from the server
secret, so every process sharing the secret accepts it and no ticket can pass for a token; it
names the user and its incarnation (``users.User.incarnation``: a user removed and re-created,
or given a new password, is a new one, and the old tokens fail) and expires after
``token_ttl_seconds``. Later calls send it as their
``authorization`` header; so may the static tokens of the configuration, each mapped to a user.

A wrong password, an unknown user, an expired, altered or foreign token is UNAUTHENTICATED;
repeated wrong passwords make the next attempts wait (``logins``).
Passwords and tokens are never logged or echoed (the caller digest of ``limits`` is a hash).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import secrets
from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow.flight as flight
from sqlalchemy.exc import SQLAlchemyError

from catalog.errors import InvalidTicketError
from catalog.lru import BoundedLRU
from flight_server.server.security.access import Access, check_exposure, is_loopback
from flight_server.server.security.logins import LoginThrottle
from flight_server.server.security.tickets import TicketSigner
from flight_server.server.security.users import ANONYMOUS, User, UserStore, check_user_name

log = logging.getLogger(__name__)

MIDDLEWARE_KEY = "hudi-flight-auth"
TOKEN_PREFIX = b"hft1."
MAX_HEADER_BYTES = 4096
MIN_STATIC_TOKEN_CHARS = 16
#: web logins (basic credentials) remembered after their first check
CHECKED_LOGINS = 1024


class TokenIssuer:
    """Signs and verifies the bearer tokens of the handshake."""

    def __init__(self, tickets: TicketSigner, ttl_seconds: float):
        key = tickets.derive("hudi-flight bearer token v1")
        self._signer = TicketSigner(key, ttl_seconds, prefix=TOKEN_PREFIX, kind="token")

    def issue(self, user: str, incarnation: str = "", now: float | None = None) -> str:
        """A token naming ``user`` (its ``incarnation``; ``""`` for a caller without an account,
        such as a cluster member), valid for the ttl from ``now`` (default: the current time)."""
        return self._signer.sign({"u": user, "i": incarnation}, self._signer.expiry(now)).decode()

    def holder_of(self, token: str) -> tuple[str, str]:
        """The user and incarnation a token names.

        Raises:
            InvalidTicketError: malformed, altered, foreign or expired token.
        """
        payload = self._signer.verify(token.encode())
        user, incarnation = payload.get("u"), payload.get("i")
        if not isinstance(user, str) or not isinstance(incarnation, str):
            raise InvalidTicketError("token names no user; log in again")
        return user, incarnation

    def user_of(self, token: str) -> str:
        """Raises: InvalidTicketError (malformed, altered, foreign or expired token)."""
        return self.holder_of(token)[0]


class Caller(flight.ServerMiddleware):
    """The authenticated user of a call (``anonymous`` without credentials); on a handshake,
    also the bearer token sent back."""

    def __init__(self, user: str, token: str | None = None):
        self.user = user
        self._token = token

    def sending_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._token}"} if self._token else {}


class HandshakeEnabled(flight.ServerAuthHandler):
    """Lets the ``Handshake`` RPC succeed (pyarrow answers UNIMPLEMENTED without an auth
    handler); the credentials are checked by :class:`AuthMiddlewareFactory` on every call."""

    def authenticate(self, outgoing: Any, incoming: Any) -> None:
        return None

    def is_valid(self, token: bytes) -> str:
        return ""


class AuthMiddlewareFactory(flight.ServerMiddlewareFactory):
    """Authenticates every call; see the module docstring."""

    def __init__(
        self,
        access: Access,
        users: UserStore,
        tokens: TokenIssuer,
        static_tokens: Mapping[str, str],
        logins: LoginThrottle | None = None,
    ):
        self.access = access
        self.users = users
        self.tokens = tokens
        self.logins = logins or LoginThrottle()
        self._static = [(t.encode(), user) for t, user in static_tokens.items()]
        # web requests' basic credentials already checked: keyed hash -> the bearer token issued
        self._checked: BoundedLRU[bytes, str] = BoundedLRU("web-logins", CHECKED_LOGINS)
        self._checked_key = secrets.token_bytes(32)

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[Any]]) -> Caller | None:
        try:
            return self._authenticate(info, headers)
        except InvalidTicketError as err:
            raise flight.FlightUnauthenticatedError(str(err)) from None
        except SQLAlchemyError as err:
            log.error("catalog database error while authenticating", exc_info=err)
            raise flight.FlightUnavailableError("catalog database error; see the server log") from None

    def _authenticate(self, info: flight.CallInfo, headers: dict[str, list[Any]]) -> Caller | None:
        values = headers.get("authorization") or headers.get("Authorization") or []
        if not values:
            self._known(ANONYMOUS)  # refused where anonymous callers are not allowed
            return None  # caller_name answers anonymous: no record, no gRPC callbacks into Python
        value = values[0].decode(errors="replace") if isinstance(values[0], bytes) else str(values[0])
        if len(value) > MAX_HEADER_BYTES:
            raise flight.FlightUnauthenticatedError(f"authorization header is longer than {MAX_HEADER_BYTES} bytes")
        scheme, _, credentials = value.partition(" ")
        scheme = scheme.lower()
        if scheme == "basic":
            if info.method != flight.FlightMethod.HANDSHAKE:
                raise flight.FlightUnauthenticatedError(
                    "basic credentials are accepted by the handshake only; send the bearer token it returns")
            account = self._login(credentials.strip())
            return Caller(account.name, self.tokens.issue(account.name, account.incarnation))
        if scheme == "bearer":
            if credentials.strip() in NO_TOKEN:  # a client that was given no token says so: anonymous
                self._known(ANONYMOUS)
                return None
            return self._bearer(credentials.strip())
        raise flight.FlightUnauthenticatedError("authorization header must be 'Basic ...' or 'Bearer ...'")

    def http_user(self, authorization: str | None) -> str:
        """The user of a web request (the console) sending this ``Authorization`` header.

        Browsers send basic credentials with every request, so ``Basic`` is accepted on each
        one: checked like the handshake's (scrypt, the login throttle) the first time, then
        remembered as a keyed hash beside the bearer token it earned, which is checked instead
        (cheap; it names the account's incarnation, and it expires). ``Bearer`` takes the
        handshake's tokens and the static ones; no header is the anonymous caller.

        Raises:
            flight.FlightUnauthenticatedError: missing, wrong or expired credentials.
        """
        if not authorization:
            return self._known(ANONYMOUS).user
        if len(authorization) > MAX_HEADER_BYTES:
            raise flight.FlightUnauthenticatedError(f"authorization header is longer than {MAX_HEADER_BYTES} bytes")
        scheme, _, credentials = authorization.partition(" ")
        scheme = scheme.lower()
        try:
            if scheme == "basic":
                return self._basic(credentials.strip())
            if scheme == "bearer":
                return self._bearer(credentials.strip()).user
        except InvalidTicketError as err:
            raise flight.FlightUnauthenticatedError(str(err)) from None
        raise flight.FlightUnauthenticatedError("authorization header must be 'Basic ...' or 'Bearer ...'")

    def _basic(self, credentials: str) -> str:
        digest = hmac.digest(self._checked_key, credentials.encode(), "sha256")
        token = self._checked.get(digest)
        if token is not None:
            try:
                return self._bearer(token).user
            except (flight.FlightUnauthenticatedError, InvalidTicketError):
                self._checked.pop(digest)  # expired, or the account changed: check the password again
        account = self._login(credentials)
        self._checked.put(digest, self.tokens.issue(account.name, account.incarnation), 1)
        return account.name

    def _known(self, user: str) -> Caller:
        self.access.authorize(user, "read")  # exists (any more) / anonymous allowed here
        return Caller(user)

    def _login(self, credentials: str) -> User:
        try:
            # Go's Flight client (the ADBC driver) sends unpadded base64; pyarrow pads it
            padded = credentials + "=" * (-len(credentials) % 4)
            user, colon, password = base64.b64decode(padded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            user, colon, password = "", "", ""
        if not colon or not user:
            raise flight.FlightUnauthenticatedError("malformed basic credentials")
        self.logins.check(user)
        account = self.users.check_password(user, password)
        if account is None:
            self.logins.failed(user)
            raise flight.FlightUnauthenticatedError("wrong user name or password")
        self.logins.succeeded(user)
        return account

    def _bearer(self, token: str) -> Caller:
        given = token.encode()
        found = None
        for known, user in self._static:  # constant time: every token is compared
            if hmac.compare_digest(given, known):
                found = user
        if found is not None:
            return self._known(found)
        if not given.startswith(TOKEN_PREFIX):
            raise flight.FlightUnauthenticatedError("token not accepted")
        user, incarnation = self.tokens.holder_of(token)
        caller = self._known(user)
        rights = self.access.rights(user)
        if rights is None or rights.incarnation != (incarnation or None):
            raise flight.FlightUnauthenticatedError(
                f"token of an earlier account {user} (removed and re-created, or its password changed); log in again")
        return caller


#: what clients given no token send as one (flightsql-dbapi: ``Bearer None``): no credentials at all
NO_TOKEN = frozenset({"", "None", "null"})


@dataclass(frozen=True)
class AuthSettings:
    """The configuration keys authentication uses (``ServerConfig.auth_settings``)."""

    host: str
    tokens: Mapping[str, str]  # static bearer token -> user name
    insecure: bool = False
    cache_seconds: float = 1.0  # how long a user's rights are reused
    token_ttl_seconds: float = 3600.0
    tls: bool = False  # the Flight port speaks TLS
    anonymous_read: str = "auto"  # security.access.ANONYMOUS_READ_MODES


def authentication(config: AuthSettings, users: UserStore, tickets: TicketSigner) -> AuthMiddlewareFactory:
    """The authentication middleware of a server (its ``access`` holds the rights).

    Raises:
        ValueError: a bad static token, or a non-loopback address with no users or tokens, or
            with them but without TLS (unless ``insecure``).
    """
    for token, user in config.tokens.items():
        check_user_name(user)
        if len(token) < MIN_STATIC_TOKEN_CHARS:
            raise ValueError(f"static tokens need at least {MIN_STATIC_TOKEN_CHARS} characters (one of user {user})")
    check_exposure(config.host, bool(config.tokens) or users.has_users(), config.insecure, config.tls)
    open_address = is_loopback(config.host) or config.insecure
    access = Access(users, config.tokens.values(), open_address, config.cache_seconds, config.anonymous_read,
                    loopback=is_loopback(config.host))
    return AuthMiddlewareFactory(access, users, TokenIssuer(tickets, config.token_ttl_seconds), dict(config.tokens))


def caller_name(context: flight.ServerCallContext) -> str:
    """The user name the authentication middleware found for this call."""
    caller = context.get_middleware(MIDDLEWARE_KEY)
    return caller.user if isinstance(caller, Caller) else ANONYMOUS


__all__ = [
    "AuthMiddlewareFactory",
    "AuthSettings",
    "Caller",
    "HandshakeEnabled",
    "MIDDLEWARE_KEY",
    "TokenIssuer",
    "authentication",
    "caller_name",
]
