"""Cluster membership of a coordinator and endpoint placement by rendezvous hashing.

Workers announce themselves with signed heartbeats (``cluster-heartbeat`` action, sent by
:mod:`flight_server.server.cluster.worker`). A heartbeat is a token signed by the shared ticket secret
under a key derived for this one purpose, so only cluster members (holders of the secret) can
join, and a heartbeat token is never a valid ticket nor the other way round. Its expiry is the
heartbeat timeout: a replayed token keeps a worker listed no longer than it would have been
anyway.

Placement is soft affinity (Presto/Trino style): each split's file group is hashed with every
live worker (rendezvous / highest random weight hashing); the endpoint names the best worker
first and the runner-up second, for retry. While membership is unchanged a file group always
lands on the same worker, so that worker's caches stay warm; when a worker joins, only the file
groups it now wins (about 1/n of them) move, and when one leaves only its own move.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterable

from catalog.errors import InvalidQueryError, InvalidTicketError
from flight_server.protocol.wire import SCHEMES
from flight_server.server.security.state_files import private_dir
from flight_server.server.security.tickets import TicketSigner

#: The purpose the heartbeat signing key is derived for (see TicketSigner.derived).
HEARTBEAT_PURPOSE = "cluster-heartbeat"
ROLES = ("coordinator", "worker")
MAX_URI_CHARS = 512
FORGET_AFTER_TIMEOUTS = 100  # a heartbeat file this many timeouts old is deleted
_URI_SCHEMES = tuple(f"{scheme}://" for scheme in SCHEMES)


def check_uri(uri: Any, what: str) -> str:
    """A Flight location a peer can be reached at (``grpc[+tcp|+tls]://host:port``)."""
    if not isinstance(uri, str) or not uri.startswith(_URI_SCHEMES) or len(uri) > MAX_URI_CHARS:
        raise InvalidQueryError(f"{what} must be a grpc://, grpc+tcp:// or grpc+tls:// URI")
    host_port = uri.split("://", 1)[1]
    if not host_port or "/" in host_port or any(c.isspace() for c in host_port) or ":" not in host_port:
        raise InvalidQueryError(f"{what} must name host:port")
    return uri


def rendezvous(key: str, members: Iterable[str], count: int = 2) -> list[str]:
    """The ``count`` members with the highest weight for ``key`` (highest random weight hashing).

    The weight of (key, member) is a 64-bit hash of both; it depends on nothing else, so a key's
    ranking among the members that stay is unchanged by others joining or leaving.
    """

    def weight(member: str) -> bytes:
        return hashlib.blake2b(f"{key}\x00{member}".encode(), digest_size=8).digest()

    return sorted(members, key=weight, reverse=True)[:count]


class Membership:
    """The live workers a coordinator plans onto: those heard from within ``timeout`` seconds.

    With ``directory`` (the coordinator's state dir), each worker's last heartbeat is a small
    file there (modification time = last seen), so every process of a ``--processes N``
    coordinator sees every heartbeat, whichever process received it.

    Args:
        signer: the heartbeat signer (``TicketSigner.derived(HEARTBEAT_PURPOSE)``).
        timeout: seconds after its last heartbeat a worker is dropped from plans.
        directory: shared folder of the heartbeats (``None``: this process's memory).
    """

    def __init__(self, signer: TicketSigner, timeout: float, directory: Path | None = None):
        if timeout <= 0:
            raise ValueError("heartbeat timeout must be positive")
        self.signer = signer
        self.timeout = timeout
        self._dir = private_dir(directory) if directory is not None else None
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()
        self._memo: tuple[float, list[str]] | None = None  # (when, live workers): one plan, one look

    def accept(self, token: str) -> dict[str, Any]:
        """Record the heartbeat ``token`` (signed, unexpired) of a worker; a ``leave`` token
        removes it at once.

        Raises:
            InvalidTicketError: forged, altered, expired or not a heartbeat (UNAUTHENTICATED).
            InvalidQueryError: the token names no valid worker URI.
        """
        doc = self.signer.verify(token.encode())
        if doc.get("kind") != HEARTBEAT_PURPOSE:
            raise InvalidTicketError("not a cluster heartbeat")
        worker = check_uri(doc.get("worker"), "heartbeat worker")
        if doc.get("leave"):
            self._forget(worker)
        else:
            self._record(worker)
        self._memo = None
        return {"accepted": True, "workers": len(self.live())}

    def _file(self, worker: str) -> Path:
        assert self._dir is not None
        return self._dir / hashlib.sha256(worker.encode()).hexdigest()[:32]

    def _record(self, worker: str) -> None:
        if self._dir is None:
            with self._lock:
                self._seen[worker] = time.time()
            return
        target = self._file(worker)
        tmp = target.with_suffix(f".{os.getpid()}.{threading.get_ident()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(worker)
        os.replace(tmp, target)  # atomic: readers see the old or the new heartbeat, whole

    def _forget(self, worker: str) -> None:
        if self._dir is None:
            with self._lock:
                self._seen.pop(worker, None)
        else:
            self._file(worker).unlink(missing_ok=True)

    def _heard(self) -> dict[str, float]:
        if self._dir is None:
            with self._lock:
                return dict(self._seen)
        heard = {}
        forget_before = time.time() - FORGET_AFTER_TIMEOUTS * self.timeout
        for path in self._dir.iterdir():
            if "." in path.name:  # a heartbeat being written
                continue
            try:
                seen = path.stat().st_mtime
                if seen < forget_before:  # long gone: tidy up
                    path.unlink(missing_ok=True)
                    continue
                heard[path.read_text()] = seen
            except OSError:  # forgotten meanwhile
                continue
        return heard

    def live(self) -> list[str]:
        """Workers heard from within the timeout, sorted (looked up at most every
        ``timeout / 20`` seconds, so planning many endpoints reads the heartbeats once)."""
        now = time.time()
        memo = self._memo
        if memo is not None and now - memo[0] < self.timeout / 20:
            return memo[1]
        horizon = now - self.timeout
        workers = sorted(w for w, seen in self._heard().items() if seen >= horizon)
        self._memo = (now, workers)
        return workers

    def locations(self, key: str) -> list[str]:
        """Where to read the work keyed ``key`` (a file group): its best live worker, then the
        runner-up; empty (this server) when no worker is live."""
        return rendezvous(key, self.live(), 2)


def heartbeat_token(signer: TicketSigner, worker: str, ttl: float, leave: bool = False) -> str:
    """A signed heartbeat of ``worker`` valid for ``ttl`` seconds."""
    doc: dict[str, Any] = {"kind": HEARTBEAT_PURPOSE, "worker": worker}
    if leave:
        doc["leave"] = True
    return signer.sign(doc, time.time() + ttl).decode()


__all__ = ["HEARTBEAT_PURPOSE", "ROLES", "Membership", "check_uri", "heartbeat_token", "rendezvous"]
