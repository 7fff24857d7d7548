"""Engine processes, seen from the serving process: how one is started, talked to and killed
(:class:`EngineProcess`), and the pool that lends each to one statement at a time
(:class:`EnginePool`)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import BinaryIO, Callable

import pyarrow.flight as flight

from flight_server.server.engine import channel
from flight_server.server.engine.dataset_forms import HeldForms
from flight_server.server.engine.settings import EngineSettings

log = logging.getLogger(__name__)

#: environment variables an engine process keeps (nothing else: no storage credentials)
_KEPT_ENVIRONMENT = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "TMPDIR", "HOME", "MIMALLOC_ALLOW_LARGE_OS_PAGES")
#: how long a new engine process may take to start (imports on a loaded machine)
START_SECONDS = 60.0
_SHUTTING_DOWN = "the server is shutting down"
#: the script an engine process starts with (it enters its namespaces, then runs the engine process)
_ENTRY = str(Path(__file__).with_name("entry.py"))


class _Launcher:
    """Starts engine processes from one thread that lives as long as the serving process: an
    engine process asks to die with the thread that started it (``PR_SET_PDEATHSIG`` follows the
    parent thread, not the process), and gRPC's handler threads come and go."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[list[str], int, Future[subprocess.Popen[bytes]]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self, command: list[str], fd: int) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="hudi-sql-engine-launcher", daemon=True)
                self._thread.start()
        started: Future[subprocess.Popen[bytes]] = Future()
        self._requests.put((command, fd, started))
        return started.result()

    def _loop(self) -> None:
        environment = {key: os.environ[key] for key in _KEPT_ENVIRONMENT if key in os.environ}
        while True:
            command, fd, started = self._requests.get()
            try:
                started.set_result(subprocess.Popen(
                    command, pass_fds=(fd,), env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    start_new_session=True,
                ))
            except BaseException as err:
                started.set_exception(err)


_LAUNCHER = _Launcher()


class EngineProcess:
    """One engine process and its channel (``results`` reads what the process writes on it);
    :meth:`interrupt` kills it (the watchdog's stop)."""

    def __init__(self, settings: EngineSettings):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        arguments = json.dumps(dataclasses.asdict(settings))
        command = [sys.executable, _ENTRY, str(theirs.fileno()), arguments, str(settings.process_allowance())]
        try:
            self._process = _LAUNCHER.start(command, theirs.fileno())
        finally:
            theirs.close()
        self.channel = ours
        self.results: BinaryIO = ours.makefile("rb")
        ours.settimeout(START_SECONDS)
        try:
            ready = channel.read_json(self.results)
        except (OSError, ValueError, channel.ChannelClosed) as err:
            self.interrupt()
            raise flight.FlightUnavailableError("the SQL engine could not start; retry later") from err
        ours.settimeout(None)
        self.datasets = HeldForms()  # the datasets it keeps, by key
        if not ready.get("ready"):
            self.interrupt()
            raise flight.FlightUnavailableError("the SQL engine could not start; retry later")
        self.network_isolated = ready.get("network") == "none"

    @property
    def pid(self) -> int:
        return self._process.pid

    def interrupt(self) -> None:
        """Kill the process now (whatever its engine is doing)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            self._process.send_signal(signal.SIGKILL)

    def close(self) -> None:
        self.interrupt()
        with contextlib.suppress(OSError):
            self.results.close()
        with contextlib.suppress(OSError):
            self.channel.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=5)

    def alive(self) -> bool:
        return self._process.poll() is None

    def ended_by(self) -> int | None:
        """The signal that ended the process (``None``: it did not end by a signal, or still runs)."""
        code = self._process.poll()
        return -code if code is not None and code < 0 else None


class EnginePool:
    """Idle engine processes, each lent to one statement at a time (at most ``idle`` kept).

    A process that may not serve again (retired: :func:`.client_errors.reusable`) is replaced in
    the background as soon as it is given back, while the pool holds fewer than ``idle``
    processes (idle, lent or starting), so the statement that would have needed it finds a warm
    one instead of paying a start (about a CPU-second of imports)."""

    def __init__(self, start: Callable[[], EngineProcess], idle: int):
        self._start = start
        self._idle_max = idle
        self._idle: list[EngineProcess] = []
        self._lent: set[EngineProcess] = set()
        self._starting = 0  # replacements being started
        self._lock = threading.Lock()
        self._warmed = threading.Condition(self._lock)  # a replacement joined the idle ones
        self._closed = False
        self.started = 0
        self.replaced = 0

    def take(self) -> EngineProcess:
        """An idle process (the last given back: the dead ones met on the way are ended), else
        a replacement being started (its start is under way: waiting costs less than starting
        another), else a new one."""
        dead: list[EngineProcess] = []
        process = None
        deadline = time.monotonic() + START_SECONDS
        with self._lock:
            while process is None:
                if self._closed:
                    raise flight.FlightUnavailableError(_SHUTTING_DOWN)
                while self._idle and process is None:
                    candidate = self._idle.pop()
                    if candidate.alive():
                        process = candidate
                        self._lent.add(process)
                    else:
                        dead.append(candidate)
                left = deadline - time.monotonic()
                if process is not None or not self._starting or left <= 0:
                    break
                self._warmed.wait(left)
            if process is None:
                self.started += 1
        for gone in dead:
            gone.close()
        if process is not None:
            return process
        process = self._start()
        with self._lock:
            closed = self._closed
            if not closed:
                self._lent.add(process)
        if closed:  # the server began to stop while the process started
            process.close()
            raise flight.FlightUnavailableError(_SHUTTING_DOWN)
        return process

    def give_back(self, process: EngineProcess, reusable: bool) -> None:
        """Keep ``process`` for the next statement when ``reusable``; else end it and start a
        replacement in the background (so the next statement pays no start)."""
        with self._lock:
            self._lent.discard(process)
            keep = reusable and not self._closed and len(self._idle) < self._idle_max
            if keep:
                self._idle.append(process)
            replace = not reusable and not self._closed and self._held() < self._idle_max
            if replace:
                self._starting += 1
        if not keep:
            threading.Thread(target=process.close, name="hudi-sql-engine-close", daemon=True).start()
        if replace:
            threading.Thread(target=self._replace, name="hudi-sql-engine-start", daemon=True).start()

    def _held(self) -> int:
        """The processes idle, lent or starting (under the lock)."""
        return len(self._idle) + len(self._lent) + self._starting

    def _replace(self) -> None:
        try:
            process = self._start()
        except Exception:  # the next statement starts one itself (and tells its client)
            with self._lock:
                self._starting -= 1
                self._warmed.notify_all()
            log.warning("could not start a spare SQL engine process", exc_info=True)
            return
        with self._lock:
            self._starting -= 1
            self.replaced += 1
            self._warmed.notify_all()  # the waiters take it, or start their own
            if not self._closed and len(self._idle) < self._idle_max:
                self._idle.append(process)
                return
        process.close()

    def idle(self) -> list[EngineProcess]:
        with self._lock:
            return list(self._idle)

    def close(self) -> None:
        """Kill every process, idle or lent; none is lent afterwards."""
        with self._lock:
            self._closed = True
            self._warmed.notify_all()
            processes = self._idle + list(self._lent)
            self._idle = []
        for process in processes:
            process.interrupt()
        for process in processes:
            process.close()


__all__ = ["START_SECONDS", "EnginePool", "EngineProcess"]
