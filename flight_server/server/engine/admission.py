"""Admission of SQL work: one fair queue in front of the engine processes.

Every unit of SQL work holds one *slot* while it runs, taken here by the engine room's door
(:mod:`.sandbox`): a statement's schema step (GetFlightInfo, a prepared statement's schema: a
``LIMIT 0`` query that an engine process binds, plans and folds), a metadata table's rows, a
statement's execution and the streaming of its result. As Trino's resource groups do:

- at most ``slots`` run at once (``sql_memory_budget // sql_memory_limit``: each may use its
  memory limit), at most ``sql_queries_per_user`` of one user and ``sql_queries_per_connection``
  of one connection (anonymous callers count by connection only: ``security.budgets.CallKeys``);
- work past a limit waits in a queue, bounded per user (``sql_queue_per_user``), per connection
  (``sql_queue_per_connection``) and in all (``sql_queue_total``); it is refused at once only when
  its queue is full (UNAVAILABLE with a retry hint naming the bound);
- a freed slot goes to the group (a user; an anonymous caller's connection) served least
  recently, to that group's oldest waiter its connection's limit lets run: round-robin between
  users, so one user's backlog never delays another user's first statement, and within a user
  first come, first served;
- a waiter waits until it is admitted, its client leaves (CANCELLED), the server shuts down
  (UNAVAILABLE) or ``sql_admission_wait_seconds`` pass (refused with a retry hint); it holds no
  slot meanwhile.

What happens is told to a listener (the metrics: ``ops.metrics``) as ``(user, event, amount)``:
``queued`` and ``running`` (+1/-1 as work enters and leaves), ``refused`` (1) and ``wait`` (the
seconds an admitted unit waited); the user is the authenticated name, else ``anonymous``.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from typing import Callable, Iterator

import pyarrow.flight as flight

from flight_server.server.engine import failures
from flight_server.server.engine.settings import EngineSettings
from flight_server.server.security.budgets import CallKeys, ServerBusyError
from flight_server.server.security.users import ANONYMOUS

RETRY_SECONDS = 1.0
#: how often a waiter asks whether its client is still there
_POLL_SECONDS = 0.2
#: how many groups' last service the queue remembers (a group forgotten counts as never served)
_SERVED_REMEMBERED = 4096
#: the keys of SQL work the server does for itself (no client): one connection of its own
SERVER_WORK = CallKeys(None, "the server")

#: ``(user, event, amount)``: see the module docstring
AdmissionListener = Callable[[str, str, float], None]
#: who a limit or a queue counts: ``("user", name)`` or ``("connection", peer)``
_Key = tuple[str, str]


def default_share(slots: int) -> int:
    """The work one user may run at once when not configured: half the slots (at least one), so
    a user who holds their share leaves room for the others."""
    return max(1, slots // 2)


class _Waiter:
    """One unit of work in the queue; ``granted`` is set (under the queue's lock) with its slot."""

    def __init__(self, keys: CallKeys):
        self.keys = keys
        self.since = time.monotonic()
        self.granted = False
        self.event = threading.Event()


class Admission:
    """The fair queue of SQL work (see the module docstring), sized by ``settings``."""

    def __init__(self, settings: EngineSettings, listener: AdmissionListener | None = None):
        self.slots = settings.slots
        per_user = settings.queries_per_user or default_share(self.slots)
        self.limits = {"user": per_user, "connection": settings.queries_per_connection or per_user}
        self.queues = {"user": settings.queue_per_user, "connection": settings.queue_per_connection}
        self.queue_total = settings.queue_total
        self.wait_seconds = settings.admission_wait_seconds
        self._listener = listener
        self._lock = threading.Lock()
        self._running: collections.Counter[_Key] = collections.Counter()
        self._running_total = 0
        self._waiting: collections.Counter[_Key] = collections.Counter()
        self._waiting_total = 0
        self._groups: dict[_Key, collections.deque[_Waiter]] = {}  # the waiters, by group, oldest first
        self._served: collections.OrderedDict[_Key, int] = collections.OrderedDict()  # group -> its last grant
        self._grants = 0
        self._closed = False
        self._shutting_down = failures.told(failures.SHUTDOWN, settings)

    @contextlib.contextmanager
    def admitted(self, keys: CallKeys = SERVER_WORK, cancelled: Callable[[], bool] | None = None) -> Iterator[None]:
        """Hold one slot for ``keys`` for the block, waiting in the queue for it first.

        Raises:
            ServerBusyError: the caller's queue was full, or the wait passed ``sql_admission_wait_seconds``.
            flight.FlightCancelledError: the client left (``cancelled()``) while the work waited.
        """
        self.acquire(keys, cancelled)
        try:
            yield
        finally:
            self.release(keys)

    def acquire(self, keys: CallKeys, cancelled: Callable[[], bool] | None = None) -> None:
        """Take one slot for ``keys`` (see :meth:`admitted`); :meth:`release` gives it back."""
        group = _group(keys)
        with self._lock:
            if self._closed:
                raise flight.FlightUnavailableError(self._shutting_down)
            if group not in self._groups and self._fits(keys):
                self._take(keys, group)
                self._tell(keys, "wait", 0.0)
                return
            refusal = self._queue_full(keys)
            if refusal is not None:
                self._tell(keys, "refused", 1)
                raise refusal
            waiter = _Waiter(keys)
            self._groups.setdefault(group, collections.deque()).append(waiter)
            self._count_waiting(keys, 1)
        self._wait(waiter, cancelled)

    def close(self) -> None:
        """Refuse every waiter, and all work from now on (the server is shutting down)."""
        with self._lock:
            self._closed = True
            for queue in self._groups.values():
                for waiter in queue:
                    waiter.event.set()  # not granted: it leaves the queue and is refused

    def release(self, keys: CallKeys) -> None:
        """Give back a slot of ``keys`` and hand the freed slot to the next waiter in fair order."""
        with self._lock:
            for key in _keys(keys):
                self._running[key] -= 1
                if self._running[key] <= 0:
                    del self._running[key]
            self._running_total -= 1
            self._tell(keys, "running", -1)
            self._dispatch()

    # -- under the lock --------------------------------------------------------------------
    def _fits(self, keys: CallKeys) -> bool:
        return self._running_total < self.slots and all(
            self._running[key] < self.limits[key[0]] for key in _keys(keys)
        )

    def _take(self, keys: CallKeys, group: _Key) -> None:
        for key in _keys(keys):
            self._running[key] += 1
        self._running_total += 1
        self._grants += 1
        self._served[group] = self._grants
        self._served.move_to_end(group)
        if len(self._served) > _SERVED_REMEMBERED:
            self._served.popitem(last=False)
        self._tell(keys, "running", 1)

    def _queue_full(self, keys: CallKeys) -> ServerBusyError | None:
        """The refusal of one more waiter of ``keys`` (``None``: there is room in its queues)."""
        if self._waiting_total >= self.queue_total:
            return ServerBusyError("sql_queue_total", self.queue_total,
                                   "too many SQL statements wait on this server", RETRY_SECONDS)
        for kind, key in _keys(keys):
            bound = self.queues[kind]
            if self._waiting[(kind, key)] >= bound:
                return ServerBusyError(f"sql_queue_per_{kind}", bound,
                                       f"too many SQL statements of this {kind} wait already", RETRY_SECONDS)
        return None

    def _count_waiting(self, keys: CallKeys, change: int) -> None:
        for key in _keys(keys):
            self._waiting[key] += change
            if self._waiting[key] <= 0:
                del self._waiting[key]
        self._waiting_total += change
        self._tell(keys, "queued", change)

    def _dispatch(self) -> None:
        """Grant free slots: to the waiting group served least recently (first come among
        groups never served), its oldest waiter that fits its limits."""
        while self._running_total < self.slots and self._groups:
            order = sorted(self._groups, key=lambda g: (self._served.get(g, 0), self._groups[g][0].since))
            for group in order:
                waiter = next((w for w in self._groups[group] if self._fits(w.keys)), None)
                if waiter is not None:
                    break
            else:
                return  # every waiter's user or connection holds its share
            self._unqueue(group, waiter)
            self._take(waiter.keys, group)
            waiter.granted = True
            waiter.event.set()

    def _unqueue(self, group: _Key, waiter: _Waiter) -> None:
        queue = self._groups[group]
        queue.remove(waiter)
        if not queue:
            del self._groups[group]
        self._count_waiting(waiter.keys, -1)

    def _tell(self, keys: CallKeys, event: str, amount: float) -> None:
        if self._listener is not None:
            self._listener(keys.user or ANONYMOUS, event, amount)

    # -- waiting ---------------------------------------------------------------------------
    def _wait(self, waiter: _Waiter, cancelled: Callable[[], bool] | None) -> None:
        """Until ``waiter`` is granted its slot; else leave the queue and raise why."""
        deadline = waiter.since + self.wait_seconds
        while True:
            left = deadline - time.monotonic()
            woken = waiter.event.wait(max(0.0, min(_POLL_SECONDS, left)))
            gone = cancelled is not None and cancelled()
            if not woken and not gone and time.monotonic() < deadline:
                continue
            with self._lock:
                if waiter.granted:  # granted meanwhile: the work runs (and sees its client gone itself)
                    break
                self._unqueue(_group(waiter.keys), waiter)
                if not gone and not self._closed:
                    self._tell(waiter.keys, "refused", 1)
            if self._closed:
                raise flight.FlightUnavailableError(self._shutting_down)
            if gone:
                raise flight.FlightCancelledError("the query was cancelled while it waited: the client went away")
            raise ServerBusyError("sql_admission_wait_seconds", self.wait_seconds,
                                  "the SQL statement waited that long for its turn", RETRY_SECONDS)
        self._tell(waiter.keys, "wait", time.monotonic() - waiter.since)


def _keys(keys: CallKeys) -> list[_Key]:
    """What a unit of work of ``keys`` counts against: its connection, and its user if any."""
    counted = [("connection", keys.connection)]
    if keys.user is not None:
        counted.append(("user", keys.user))
    return counted


def _group(keys: CallKeys) -> _Key:
    """Whose turn a unit of work of ``keys`` waits for: its user's, else its connection's."""
    return ("user", keys.user) if keys.user is not None else ("connection", keys.connection)


__all__ = ["RETRY_SECONDS", "SERVER_WORK", "Admission", "AdmissionListener", "default_share"]
