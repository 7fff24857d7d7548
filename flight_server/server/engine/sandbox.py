"""The SQL engine of a serving process, and the engine room's one door: every statement runs in
an engine process, never here.

Bounds written against SQL text cannot cover an engine with hundreds of functions, lambdas and
a planner that folds constants; and an engine inside the serving process takes every user down
with it. So the serving process keeps only what it must: admission (:mod:`.admission`: one fair
queue for every unit of SQL work, the schema step included), the
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
import pickle
import socket
import threading
import weakref
from typing import Any, BinaryIO, Callable, Iterator, Mapping

import pyarrow as pa
import pyarrow.dataset as ds

from catalog.errors import InvalidQueryError
from flight_server.server.engine import channel, failures
from flight_server.server.engine.admission import SERVER_WORK, Admission, AdmissionListener
from flight_server.server.engine.client_errors import failure_error, reusable, statement_error, stopped_error
from flight_server.server.engine.dataset_forms import DatasetForm, DatasetForms
from flight_server.server.engine.processes import EnginePool, EngineProcess
from flight_server.server.engine.result_schemas import (
    SCHEMA_CACHE_BYTES,
    ResultSchemas,
    SchemaKey,
    remembered_schema,
    result_schemas,
)
from flight_server.server.engine.settings import EngineSettings
from flight_server.server.engine.views import Source, View, Views
from flight_server.server.engine.watchdog import Watch, Watchdog
from flight_server.server.security.budgets import CallKeys
from flight_server.server.security.limits import LimitExceededError

#: what :meth:`SandboxedEngine.run` takes: a statement's views, or what builds them once it is admitted
ViewsToBuild = Views | Callable[[], Views]


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
    """The serving process's SQL engine (see the module docstring): the same calls as the
    in-process :class:`~.duckdb_engine.Engine` that each engine process runs, admitted first."""

    def __init__(
        self, settings: EngineSettings, schemas: ResultSchemas | None = None, listener: AdmissionListener | None = None
    ):
        settings.check()
        self.settings = settings
        self.admission = Admission(settings, listener)
        self.watchdog = Watchdog()  # memory is bounded where it grows: in the engine processes
        self.processes = EnginePool(lambda: EngineProcess(settings), settings.slots)
        self.file_views = NativeViewCounts()
        self._schemas = schemas if schemas is not None else result_schemas()
        self.datasets = DatasetForms()  # the pickled datasets sent to engine processes

    def stop_all(self) -> None:
        """Kill every statement's engine process now, and refuse new statements and those waiting
        their turn (shutdown)."""
        self.admission.close()
        self.watchdog.stop_all()
        self.processes.close()

    def result_schema(
        self,
        sql: str,
        views: Mapping[str, pa.Schema],
        cancelled: Callable[[], bool] | None = None,
        keys: CallKeys = SERVER_WORK,
    ) -> pa.Schema:
        """The schema of ``sql``'s result over views of these schemas, asked of an engine process
        once (the query wrapped in ``LIMIT 0`` over empty views: constant folding included) and
        then remembered. Asking is work of ``keys``, admitted as a statement is.

        Raises:
            ServerBusyError: the caller's queue was full, or its wait too long (UNAVAILABLE, retryable).
        """
        def ask(key: SchemaKey) -> pa.Schema:
            statement = _Statement(self, sql, dict(key[1]), cancelled, keys)
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
        views: ViewsToBuild,
        cancelled: Callable[[], bool] | None = None,
        keys: CallKeys = SERVER_WORK,
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """Run ``sql`` over ``views`` in an engine process; the result schema and its batches
        (streamed; the process and the admission, ``keys``, are given back when they end or are
        dropped). ``views`` may be what builds them, called once the statement is admitted (the
        rows of a metadata table, for one, are work of the statement).

        Raises:
            ServerBusyError: the caller's queue was full, or its wait too long (UNAVAILABLE, retryable).
        """
        statement = _Statement(self, sql, views, cancelled, keys)
        try:
            schema = statement.schema
        except BaseException:
            statement.end()
            raise
        batches = statement.batches()
        weakref.finalize(batches, statement.end)
        return schema, batches


class _Statement:
    """One request to one engine process: admitted, watched, its views pumped, its result read.

    ``views``: the views to run over (or what builds them once admitted), or the serialised
    schemas of views to find the result schema over (a schema request)."""

    def __init__(
        self,
        engine: SandboxedEngine,
        sql: str,
        views: ViewsToBuild | Mapping[str, bytes],
        cancelled: Callable[[], bool] | None,
        keys: CallKeys,
    ):
        self._settings = engine.settings
        self._counts = engine.file_views
        self._stack = contextlib.ExitStack()
        self._ended = False
        self._ok = False  # the engine process answered and may serve the next statement
        self._forms: dict[str, DatasetForm] = {}  # the datasets sent, once the process answered: held
        self.views = Views()
        try:
            if engine.watchdog.closed:
                raise failure_error(failures.SHUTDOWN, self._settings)
            self._stack.enter_context(engine.admission.admitted(keys, cancelled))
            if isinstance(views, Mapping):
                request: dict[str, Any] = {"op": channel.SCHEMA, "sql": sql, "views": dict(views)}
            else:
                self.views = views if isinstance(views, Views) else views()
                request = {"op": channel.RUN, "sql": sql, "views": {}}
            process = engine.processes.take()
            # given back after the watch is released (callbacks run last first): a deadline that
            # fired meanwhile killed the process, which must not serve the next statement
            self._stack.callback(lambda: engine.processes.give_back(process, self._ok and self._watch.reason is None))
            self._process = process
            self._watch: Watch = engine.watchdog.watch(process, self._settings.timeout_seconds, cancelled)
            self._stack.callback(engine.watchdog.release, self._watch)
            streamed = self._describe(request, engine.datasets)
            self._send(request, streamed)
            with self._watch.busy():
                self._reader = self._open()
            self.schema = self._reader.schema
        except BaseException:
            self.end()
            raise

    def _describe(self, request: dict[str, Any], datasets: DatasetForms) -> list[View]:
        """Put each view in ``request`` as the process taken receives it: a dataset by its key
        (and its pickled bytes, unless the process holds them), a stream by the index of its
        socket; the streamed views, in that order."""
        held = self._process.datasets
        streamed: list[View] = []
        for view in self.views:
            if isinstance(view.source, ds.Dataset):
                form = self._forms[view.name] = datasets.form(view.source)
                request["views"][view.name] = (channel.DATASET, held.sent(form))
            else:
                request["views"][view.name] = (channel.STREAM, len(streamed))
                streamed.append(view)
        request["drop"] = held.to_drop()
        return streamed

    def _send(self, request: dict[str, Any], streamed: list[View]) -> None:
        """Send ``request`` with a socket per streamed view, and start pumping each view's rows."""
        sent, pumps = [], []
        for view in streamed:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            sent.append(theirs)
            pumps.append(threading.Thread(
                target=_pump, args=(view.source, ours, self.views), name=f"hudi-sql-view-{view.name}"[:64], daemon=True,
            ))
        try:
            channel.send(self._process.channel, pickle.dumps(request), [s.fileno() for s in sent])
        finally:
            for end in sent:
                end.close()
        for pump in pumps:
            pump.start()

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
            failure = statement_error(self._status(), self._process.ended_by(), self._settings, self.views)
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
            self._process.datasets.stored(self._forms.values())
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
        failure = statement_error(status, self._process.ended_by(), self._settings, self.views)
        return failure or InvalidQueryError("SQL engine: the result stream ended early")


#: what a view's stream carries after its last batch when its source failed: not an Arrow IPC
#: message, so the engine fails reading it rather than take the rows so far for the whole view
_BROKEN = b"\xff\xff\xff\xff\x08\x00\x00\x00broken!!"


def _pump(reader: Source, sock: socket.socket, views: Views) -> None:
    """Write ``reader`` to the engine process as an Arrow IPC stream, until it ends or the engine
    stops reading (the statement ended or its process was killed). A source that fails is kept
    as the statement's views' failure (:meth:`.Views.failed`) and breaks the stream (no
    end-of-stream marker is written)."""
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
            except Exception as err:  # reading the table failed: the statement tells this error
                views.failed(err)
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
    "SCHEMA_CACHE_BYTES", "AdmissionListener", "EngineSettings", "NativeViewCounts", "ResultSchemas",
    "SandboxedEngine", "Source", "View", "Views", "ViewsToBuild", "result_schemas",
]
