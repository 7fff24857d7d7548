"""Fair shares of a busy server: concurrent work bounded per user, per connection and in total.

A caller is counted twice: under its user (an authenticated name; anonymous callers and a
``--processes`` relay's connections have none) and under its connection (gRPC's peer string,
host *and* port, so two local clients are two connections, not one shared host). A call past
the process-wide bound is refused at once with :class:`ServerBusyError`: UNAVAILABLE plus a
machine-readable retry hint (``flight_server.protocol.retry``), which the project's clients honour
with backoff. A call past its user's or connection's bound may queue for a free unit of its own
(``queue_seconds``, at most ``queue_factor`` times the bound waiting per key and ``total``
waiting in all), because generic
clients open every endpoint of a result at once and do not retry (the ADBC driver reads a
40-endpoint ``SELECT *`` with 40 concurrent streams); past the queue it is refused the same way.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

import pyarrow.flight as flight

from flight_server.protocol.retry import RetryHint, encode
from flight_server.server.security.users import ANONYMOUS

T = TypeVar("T")


class ServerBusyError(flight.FlightUnavailableError):
    """A refusal for load: the bound is named, the retry hint is in the status details."""

    def __init__(self, limit: str, bound: float, what: str, retry_after: float):
        message = f"server busy: limit {limit} ({bound:g}) reached: {what}; retry in {retry_after:g} s"
        super().__init__(message, encode(RetryHint(limit, retry_after), message))
        self.limit = limit
        self.retry_after = retry_after


@dataclass(frozen=True)
class CallKeys:
    """Who a call counts against: its user (``None``: no user bound) and its connection."""

    user: str | None
    connection: str

    @classmethod
    def of(cls, context: flight.ServerCallContext, user: str) -> "CallKeys":
        """The keys of a call by ``user`` (the authenticated name, or ``anonymous``)."""
        peer = context.peer() or ""
        peer = peer.decode(errors="replace") if isinstance(peer, bytes) else str(peer)
        identity = context.peer_identity()
        if identity and user == ANONYMOUS:  # a client certificate names the caller
            user = "cert:" + (identity.decode(errors="replace") if isinstance(identity, bytes) else str(identity))
        return cls(None if user == ANONYMOUS else user, peer)


class Budget:
    """Concurrent holds of one kind of work (streams, plans): per user, per connection, total.

    Args:
        name: the configuration key prefix named in refusals (e.g. ``streams``).
        per_user, per_connection, total: the bounds (``0``: unbounded).
        retry_after: the retry hint of a refusal, in seconds.
        setting: the configuration key of a per-user or per-connection bound, named in its
            refusal (``{name}``, ``{kind}``: ``user`` or ``connection``).
    """

    def __init__(
        self,
        name: str,
        per_user: int,
        per_connection: int,
        total: int,
        retry_after: float = 0.2,
        queue_seconds: float = 0.0,
        queue_factor: int = 4,
        setting: str = "max_{name}_per_{kind}",
    ):
        self.name = name
        self.setting = setting
        self._bounds = {"user": per_user, "connection": per_connection}
        self.total = total
        self.retry_after = retry_after
        self.queue_seconds = queue_seconds
        self.queue_factor = queue_factor
        self._held: dict[tuple[str, str], int] = {}
        self._waiting: dict[tuple[str, str], int] = {}
        self._queued = 0  # waiting calls of every key, at most ``total``: threads parked in the queue
        self._all = 0
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)

    def _keys(self, keys: CallKeys) -> list[tuple[str, str]]:
        out = [("connection", keys.connection)]
        if keys.user is not None:
            out.append(("user", keys.user))
        return out

    def acquire(self, keys: CallKeys) -> None:
        """Hold one unit for ``keys``, queueing up to ``queue_seconds`` behind the caller's own
        units. Raises: ServerBusyError (past the total bound, or still past a bound after the wait)."""
        deadline = time.monotonic() + self.queue_seconds
        with self._lock:
            while True:
                if self.total and self._all >= self.total:
                    raise ServerBusyError(f"max_{self.name}_total", self.total,
                                          f"too many {self.name} on this server", self.retry_after)
                full = self._full(keys)
                if full is None:
                    break
                (kind, key), bound = full
                left = deadline - time.monotonic()
                queue_full = self._waiting.get((kind, key), 0) >= bound * self.queue_factor or (
                    self.total and self._queued >= self.total
                )
                if left <= 0 or queue_full:
                    raise ServerBusyError(self.setting.format(name=self.name, kind=kind), bound,
                                          f"too many concurrent {self.name} of this {kind}", self.retry_after)
                self._waiting[(kind, key)] = self._waiting.get((kind, key), 0) + 1
                self._queued += 1
                try:
                    self._freed.wait(left)
                finally:
                    self._queued -= 1
                    self._waiting[(kind, key)] -= 1
                    if not self._waiting[(kind, key)]:
                        del self._waiting[(kind, key)]
            for held in self._keys(keys):
                self._held[held] = self._held.get(held, 0) + 1
            self._all += 1

    def _full(self, keys: CallKeys) -> tuple[tuple[str, str], int] | None:
        """The first of the caller's keys at its bound, with that bound (``None``: room)."""
        for kind, key in self._keys(keys):
            bound = self._bounds[kind]
            if bound and self._held.get((kind, key), 0) >= bound:
                return (kind, key), bound
        return None

    def release(self, keys: CallKeys) -> None:
        with self._lock:
            for held in self._keys(keys):
                left = self._held.get(held, 1) - 1
                if left > 0:
                    self._held[held] = left
                else:
                    self._held.pop(held, None)
            self._all = max(0, self._all - 1)
            self._freed.notify_all()

    def held(self, keys: CallKeys) -> "_Hold":
        """A context manager holding one unit for ``keys`` (acquired on entry)."""
        return _Hold(self, keys)

    def in_use(self) -> int:
        with self._lock:
            return self._all

    def guarded(self, keys: CallKeys, items: Iterator[T]) -> Iterator[T]:
        """``items``, giving the (already acquired) unit back when the stream ends, fails or
        is dropped."""
        return _Guarded(self, keys, items)


class _Hold:
    def __init__(self, budget: Budget, keys: CallKeys):
        self._budget, self._keys = budget, keys

    def __enter__(self) -> None:
        self._budget.acquire(self._keys)

    def __exit__(self, *exc: object) -> None:
        self._budget.release(self._keys)


class _Guarded(Iterator[T]):
    """An iterator that gives its unit back exactly once (also when never started)."""

    def __init__(self, budget: Budget, keys: CallKeys, items: Iterator[T]):
        self._budget, self._keys, self._items = budget, keys, items
        self._held = True
        self._lock = threading.Lock()

    def _release(self) -> None:
        with self._lock:
            held, self._held = self._held, False
        if held:
            self._budget.release(self._keys)

    def __next__(self) -> T:
        try:
            return next(self._items)
        except BaseException:
            self._release()
            raise

    def __del__(self) -> None:
        self._release()


class MemoryBudget:
    """Bytes of record batches held by the streams of this process at once.

    A stream charges the batch it is handing to gRPC and gives it back with the next one (or
    at its end). New streams are admitted only while the total is under the budget, so a burst
    of large scans is refused with a retry hint instead of growing the process without bound.
    """

    def __init__(self, limit_bytes: int, retry_after: float = 0.5):
        self.limit = limit_bytes
        self.retry_after = retry_after
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        with self._lock:
            return self._used

    def admit(self) -> None:
        """Raises: ServerBusyError when the streams in flight hold the whole budget."""
        if self.limit and self.used >= self.limit:
            raise ServerBusyError("stream_memory_bytes", self.limit, "record batches in flight fill the budget",
                                  self.retry_after)

    def _add(self, nbytes: int) -> None:
        with self._lock:
            self._used = max(0, self._used + nbytes)

    def charged(self, batches: Iterator[T], size: Callable[[T], int]) -> Iterator[T]:
        """``batches``, each charged while it is the stream's current one."""
        held = 0
        try:
            for item in batches:
                nbytes = size(item)
                self._add(nbytes - held)
                held = nbytes
                yield item
        finally:
            self._add(-held)


__all__ = ["Budget", "CallKeys", "MemoryBudget", "ServerBusyError"]
