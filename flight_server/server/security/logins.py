"""Password guessing made slow: failed logins throttled per user and per process.

After ``free_failures`` wrong passwords for a user, each further attempt for that user must wait
a delay that doubles with every failure (from ``first_delay`` up to ``longest_delay``) after the
last one; an attempt that comes sooner is refused at once with a retry hint
(:class:`~flight_server.server.security.budgets.ServerBusyError`), before the password is even
checked, so it costs neither a scrypt hash nor a server thread held asleep. A success clears the
user's record.

Per peer: pyarrow's server middleware sees only the call's method and headers, not the peer
address, and the handshake is authenticated there, so a peer cannot be told from another. The
process-wide bound stands in for it: at most ``failures_per_second`` failed logins (a burst of
twice that) across every user, after which logins wait likewise. Existing bearer tokens keep
working meanwhile.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

from flight_server.server.security.budgets import ServerBusyError

MAX_TRACKED_USERS = 10_000


@dataclass
class _Failures:
    count: int
    last: float


class LoginThrottle:
    """Counts failed logins; see the module docstring.

    Args:
        free_failures: wrong passwords per user before attempts must wait.
        first_delay, longest_delay: the wait after the first counted failure, and its cap (s).
        failures_per_second: failed logins of the whole process, on average (0: unbounded).
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(
        self,
        free_failures: int = 3,
        first_delay: float = 0.5,
        longest_delay: float = 60.0,
        failures_per_second: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.free_failures = free_failures
        self.first_delay = first_delay
        self.longest_delay = longest_delay
        self.rate = failures_per_second
        self._clock = clock
        self._users: dict[str, _Failures] = {}
        self._bucket = 2 * failures_per_second  # failures the process may still take at once
        self._filled = clock()
        self._lock = threading.Lock()

    def _wait_for(self, failures: _Failures) -> float:
        over = failures.count - self.free_failures
        if over < 0:
            return 0.0
        delay = min(self.longest_delay, self.first_delay * (2 ** min(over, 30)))
        return failures.last + delay - self._clock()

    def _refill(self, now: float) -> None:
        if self.rate:
            self._bucket = min(2 * self.rate, self._bucket + (now - self._filled) * self.rate)
        self._filled = now

    def check(self, user: str) -> None:
        """Before checking a password of ``user``.

        Raises:
            ServerBusyError: the user, or the process, must wait before the next attempt.
        """
        with self._lock:
            now = self._clock()
            self._refill(now)
            failures = self._users.get(user)
            wait = self._wait_for(failures) if failures is not None else 0.0
            if wait > 0:
                raise ServerBusyError("login_attempts_per_user", self.free_failures,
                                      f"too many failed logins as {user}", round(wait, 3))
            if self.rate and self._bucket < 1:
                raise ServerBusyError("login_failures_per_second", self.rate, "too many failed logins on this server",
                                      round((1 - self._bucket) / self.rate, 3))

    def failed(self, user: str) -> None:
        with self._lock:
            now = self._clock()
            self._refill(now)
            self._bucket = max(0.0, self._bucket - 1)
            failures = self._users.get(user)
            if failures is None:
                if len(self._users) >= MAX_TRACKED_USERS:  # bounded: forget the quietest
                    del self._users[min(self._users, key=lambda u: self._users[u].last)]
                failures = self._users[user] = _Failures(0, now)
            failures.count += 1
            failures.last = now

    def succeeded(self, user: str) -> None:
        with self._lock:
            self._users.pop(user, None)


__all__ = ["LoginThrottle"]
