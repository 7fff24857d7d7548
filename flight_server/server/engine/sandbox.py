"""The SQL engine of a serving process, and the engine room's one door: every statement runs in
an engine process, never here.

Bounds written against SQL text cannot cover an engine with hundreds of functions, lambdas and
a planner that folds constants; and an engine inside the serving process takes every user down
with it. So the serving process keeps only what it must: admission (:mod:`.admission`), the
deadline and the client's cancellation (:mod:`.watchdog`), the bound on result bytes, and the
remembered result schemas. Parsing, binding, planning, constant folding, execution and result
streaming happen in an engine process (:mod:`.engine_process`) that the operating system bounds:

- its address space (``RLIMIT_AS``) grows by at most ``sql_process_memory`` (default: twice
  ``sql_memory_limit`` plus 1 GiB), so an expression that builds gigabytes fails there;
- its CPU time per statement is bounded by the statement's deadline (``RLIMIT_CPU``);
- it is killed (``SIGKILL``, which no engine call can ignore) when the statement's deadline
  passes, when its client leaves, or when the server stops, and it dies with the server;
- it is started with no descriptor but its channel and a scrubbed environment (no storage
  credentials), and its engine reaches only the files the plan named (external access off,
  ``allowed_paths`` exactly the planned local files).

A killed process, or one whose statement failed in a way that makes its engine suspect (a memory
or allocation failure, an unexpected engine error: :func:`.client_errors.reusable`), is retired
and replaced in the background; idle processes are kept (at most one per statement the SQL memory
budget admits at once), so a statement pays no process start. What a client is told of a failed
statement is decided in one place, :mod:`.client_errors`.
Views stream to the engine process as Arrow IPC through sockets passed with the request (one
thread each, which blocks while the engine does not read: backpressure); datasets of local base
files go as they are (their pickled form kept, :mod:`.dataset_forms`; sent to each engine process
once, then named by a key while it keeps them), for the engine process to scan itself. The result
streams back on the process's channel, followed by the statement's status (:mod:`.channel`): a
statement makes no socket of its own unless a view streams.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import pickle
import queue
import signal
import socket
import subprocess
import sys
import threading
import weakref
from concurrent.futures import Future
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Mapping

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.flight as flight

from catalog.errors import InvalidQueryError
from flight_server.server.engine import channel, failures
from flight_server.server.engine.admission import MemoryBudget
from flight_server.server.engine.client_errors import (
    failure_error,
    native_read_error,
    reusable,
    status_error,
    stopped_error,
)
from flight_server.server.engine.dataset_forms import DatasetForm, DatasetForms, HeldForms
from flight_server.server.engine.result_schemas import (
    SCHEMA_CACHE_BYTES,
    ResultSchemas,
    SchemaKey,
    remembered_schema,
    result_schemas,
)
from flight_server.server.engine.settings import EngineSettings
from flight_server.server.engine.watchdog import Watch, Watchdog
from flight_server.server.security.budgets import CallKeys
from flight_server.server.security.limits import LimitExceededError

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
    """Idle engine processes, each lent to one statement at a time (at most ``idle`` kept)."""

    def __init__(self, start: Callable[[], EngineProcess], idle: int):
        self._start = start
        self._idle_max = idle
        self._idle: list[EngineProcess] = []
        self._lent: set[EngineProcess] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.started = 0
        self.replaced = 0

    def take(self) -> EngineProcess:
        """An idle process (the last given back: the dead ones met on the way are ended), or a
        new one."""
        dead: list[EngineProcess] = []
        process = None
        with self._lock:
            if self._closed:
                raise flight.FlightUnavailableError(_SHUTTING_DOWN)
            while self._idle and process is None:
                candidate = self._idle.pop()
                if candidate.alive():
                    process = candidate
                    self._lent.add(process)
                else:
                    dead.append(candidate)
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
            replace = not reusable and not self._closed and not self._idle
        if not keep:
            threading.Thread(target=process.close, name="hudi-sql-engine-close", daemon=True).start()
        if replace:
            threading.Thread(target=self._replace, name="hudi-sql-engine-start", daemon=True).start()

    def _replace(self) -> None:
        try:
            process = self._start()
        except Exception:  # the next statement starts one itself (and tells its client)
            log.warning("could not start a spare SQL engine process", exc_info=True)
            return
        with self._lock:
            self.replaced += 1
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
            processes = self._idle + list(self._lent)
            self._idle = []
        for process in processes:
            process.interrupt()
        for process in processes:
            process.close()


class NativeViewCounts:
    """How many views the engine processes read with the engine's own Parquet reader, and how
    many they scanned through Arrow instead (:class:`~.native_files.FileViews`, summed)."""

    def __init__(self) -> None:
        self.read = 0
        self.declined = 0
        self._lock = threading.Lock()

    def add(self, counts: object) -> None:
        if not isinstance(counts, list) or len(counts) != 2:
            return
        read, declined = counts
        if isinstance(read, int) and isinstance(declined, int) and read >= 0 and declined >= 0:
            with self._lock:
                self.read += read
                self.declined += declined


class SandboxedEngine:
    """The serving process's SQL engine (see the module docstring); the same calls as the
    in-process :class:`~.engine.Engine` that each engine process runs."""

    def __init__(self, settings: EngineSettings, schemas: ResultSchemas | None = None):
        settings.check()
        self.settings = settings
        self.budget = MemoryBudget(
            settings.memory_budget, settings.memory_limit, settings.admission_wait_seconds,
            settings.queries_per_user, settings.queries_per_connection,
        )
        self.watchdog = Watchdog()  # memory is bounded where it grows: in the engine processes
        self.processes = EnginePool(lambda: EngineProcess(settings), self.budget.slots)
        self.file_views = NativeViewCounts()
        self._schemas = schemas if schemas is not None else result_schemas()
        self._datasets = DatasetForms()

    def stop_all(self) -> None:
        """Kill every statement's engine process now and refuse new statements (shutdown)."""
        self.watchdog.stop_all()
        self.processes.close()

    def result_schema(
        self, sql: str, views: Mapping[str, pa.Schema], cancelled: Callable[[], bool] | None = None
    ) -> pa.Schema:
        """The schema of ``sql``'s result over views of these schemas, asked of an engine process
        once (the query wrapped in ``LIMIT 0`` over empty views: constant folding included) and
        then remembered. It takes a slot of the budget but none of the caller's share, so a
        client may plan its next statement while it reads a result."""
        def ask(key: SchemaKey) -> pa.Schema:
            statement = _Statement(self, {"op": channel.SCHEMA, "sql": sql, "views": dict(key[1])}, {}, cancelled)
            try:
                for _ in statement.batches():  # no rows: the status after the schema
                    pass
                return statement.schema
            finally:
                statement.end()

        return remembered_schema(self._schemas, sql, views, ask)

    def run(
        self,
        sql: str,
        views: Mapping[str, pa.RecordBatchReader | ds.Dataset],
        cancelled: Callable[[], bool] | None = None,
        keys: CallKeys | None = None,
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """Run ``sql`` over ``views`` in an engine process; the result schema and its batches
        (streamed; the process and the caller's share, ``keys``, are given back when they end or
        are dropped).

        Raises:
            ServerBusyError: the caller's share or the SQL memory budget stayed spent
                (UNAVAILABLE, retryable).
        """
        specs: dict[str, tuple[str, Any]] = {}
        streamed: dict[str, pa.RecordBatchReader] = {}
        forms: dict[str, DatasetForm] = {}
        for name, view in views.items():
            if isinstance(view, ds.Dataset):
                forms[name] = self._datasets.form(view)
            else:
                specs[name] = (channel.STREAM, len(streamed))  # the index of its passed descriptor
                streamed[name] = view
        request = {"op": channel.RUN, "sql": sql, "views": specs}
        statement = _Statement(self, request, streamed, cancelled, keys, forms)
        try:
            schema = statement.schema
        except BaseException:
            statement.end()
            raise
        batches = statement.batches()
        weakref.finalize(batches, statement.end)
        return schema, batches


#: the source failure of a statement without streamed views: never set
_NO_STREAMED_VIEW = threading.Event()


class _Statement:
    """One request to one engine process: admitted, watched, its views pumped, its result read."""

    def __init__(
        self,
        engine: SandboxedEngine,
        request: dict[str, Any],
        views: Mapping[str, pa.RecordBatchReader],
        cancelled: Callable[[], bool] | None,
        keys: CallKeys | None = None,
        datasets: Mapping[str, DatasetForm] | None = None,
    ):
        """``request`` gets the ``datasets`` views (as the process taken holds them) and the
        keys of the datasets it is to drop."""
        self._settings = engine.settings
        self._datasets = datasets or {}
        self._counts = engine.file_views
        self._stack = contextlib.ExitStack()
        self._ended = False
        self._ok = False  # the engine process answered and may serve the next statement
        # set when reading a streamed view's table failed (never, without one)
        self._source_failed = threading.Event() if views else _NO_STREAMED_VIEW
        try:
            if engine.watchdog.closed:
                raise flight.FlightUnavailableError(_SHUTTING_DOWN)
            self._stack.enter_context(engine.budget.admitted(keys))
            process = engine.processes.take()
            # given back after the watch is released (callbacks run last first): a deadline that
            # fired meanwhile killed the process, which must not serve the next statement
            self._stack.callback(lambda: engine.processes.give_back(process, self._ok and self._watch.reason is None))
            self._process = process
            self._watch: Watch = engine.watchdog.watch(process, self._settings.timeout_seconds, cancelled)
            self._stack.callback(engine.watchdog.release, self._watch)
            held = process.datasets
            request["views"].update((name, (channel.DATASET, held.sent(form))) for name, form in self._datasets.items())
            request["drop"] = held.to_drop()
            sent = []
            pumps = []
            for name, reader in views.items():
                ours, view_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                sent.append(view_end)
                pumps.append(threading.Thread(
                    target=_pump, args=(reader, ours, self._source_failed), name=f"hudi-sql-view-{name}"[:64],
                    daemon=True,
                ))
            try:
                channel.send(process.channel, pickle.dumps(request), [s.fileno() for s in sent])
            finally:
                for end in sent:
                    end.close()
            for pump in pumps:
                pump.start()
            with self._watch.busy():
                self._reader = self._open()
            self.schema = self._reader.schema
        except BaseException:
            self.end()
            raise

    def _open(self) -> pa.RecordBatchStreamReader:
        try:
            return pa.ipc.open_stream(self._process.results)
        except (pa.ArrowException, OSError) as err:
            raise self._failure() from err

    def batches(self) -> Iterator[pa.RecordBatch]:
        limit = self._settings.max_result_bytes
        streamed = 0
        try:
            while True:
                stopped = stopped_error(self._watch.reason, self._settings)
                if stopped is not None:
                    raise stopped
                try:
                    with self._watch.busy():
                        batch = self._reader.read_next_batch()
                except StopIteration:
                    break
                except (pa.ArrowException, OSError) as err:
                    # the engine process ends the stream whole even when its statement fails: a
                    # stream broken inside is a process that died (or a channel out of step)
                    broken = self._failure()
                    self._ok = False
                    raise broken from err
                streamed += batch.nbytes
                if streamed > limit:
                    raise LimitExceededError("sql_max_result_bytes", limit, "the query's result is larger")
                yield batch
            status = self._status()
            failure = status_error(status, self._process.ended_by(), self._settings)
            if failure is None and self._source_failed.is_set():
                failure = failure_error(failures.SOURCE, self._settings)
            if failure is not None:
                raise failure
        finally:
            self.end()

    def end(self) -> None:
        if not self._ended:
            self._ended = True
            self._stack.close()

    def _status(self) -> dict[str, Any] | None:
        """The engine process's word on the request (``None``: it ended without one); it decides
        whether the process may run the next statement (:func:`.client_errors.reusable`)."""
        try:
            with self._watch.busy():
                status = channel.read_json(self._process.results)
        except (OSError, ValueError, channel.ChannelClosed):
            return None
        self._ok = reusable(status) and self._watch.reason is None
        self._counts.add(status.get("native_views"))
        if status.get("ok") is True:  # the process stored the datasets sent before it ran
            self._process.datasets.stored(self._datasets.values())
        return status

    def _failure(self) -> Exception:
        """Why the result stream broke: the watch's reason, else the engine process's status."""
        stopped = stopped_error(self._watch.reason, self._settings)
        if stopped is not None:
            return stopped
        status = self._status()
        stopped = stopped_error(self._watch.reason, self._settings)  # the deadline may have come meanwhile
        if stopped is not None:
            return stopped
        if self._source_failed.is_set():
            return failure_error(failures.SOURCE, self._settings)
        failure = status_error(status, self._process.ended_by(), self._settings)
        return failure or InvalidQueryError("SQL engine: the result stream ended early")


#: what a view's stream carries after its last batch when its source failed: not an Arrow IPC
#: message, so the engine fails reading it rather than take the rows so far for the whole view
_BROKEN = b"\xff\xff\xff\xff\x08\x00\x00\x00broken!!"


def _pump(reader: pa.RecordBatchReader, sock: socket.socket, failed: threading.Event) -> None:
    """Write ``reader`` to the engine process as an Arrow IPC stream, until it ends or the engine
    stops reading (the statement ended or its process was killed). A source that fails sets
    ``failed`` and breaks the stream (no end-of-stream marker is written)."""
    sink: BinaryIO = sock.makefile("wb")
    batches = iter(reader)
    try:
        writer = pa.ipc.new_stream(sink, reader.schema)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                writer.close()
                return
            except Exception:  # reading the table failed (the statement's caller has the error)
                failed.set()
                sink.write(_BROKEN)
                return
            writer.write_batch(batch)
    except (OSError, pa.ArrowException):
        pass  # the engine stopped reading: the statement tells why
    finally:
        with contextlib.suppress(OSError):
            sink.close()
        sock.close()
        with contextlib.suppress(Exception):
            reader.close()


__all__ = [
    "SCHEMA_CACHE_BYTES", "EnginePool", "EngineProcess", "EngineSettings", "NativeViewCounts", "ResultSchemas",
    "SandboxedEngine", "native_read_error", "result_schemas",
]
