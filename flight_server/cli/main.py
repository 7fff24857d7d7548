"""``hudi-flight``: serve Hudi tables over Arrow Flight, and talk to a running server.

Every command prints a one-line message (no traceback) and exits 1 on error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
from collections import Counter
from datetime import timedelta
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Generator, Iterator, Sequence

import pyarrow as pa

from catalog.meta.units import human_age
from catalog.plan.filter_text import format_filters, parse_filter_texts
from catalog.plan.options import QUERY_TYPES, ReadOptions
from flight_server.cli.admin import add_parsers as add_admin_parsers
from flight_server.cli.admin import read_password
from flight_server.cli.output import CliError, OutputFile, Progress, format_table, one_line, output_format
from flight_server.client.session import HudiFlightClient, QueryPlan
from flight_server.client.sql.flightsql import metadata_table
from flight_server.protocol import wire
from flight_server.protocol.wire import DEFAULT_PORT, DEFAULT_URI

DEFAULT_SERVER = DEFAULT_URI
#: rows ``read`` prints (and fetches) without ``--limit``
DEFAULT_DISPLAY_ROWS = 50
_IDENTIFIER = re.compile(r"[^.\s]+\.[^.\s]+")  # as the command schema's identifier


# -- argument helpers ------------------------------------------------------------------------


def _literal(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _columns(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


def _table_name(text: str) -> str:
    """A ``NS.TABLE`` argument, checked before anything is sent."""
    if not _IDENTIFIER.fullmatch(text):
        raise CliError(f"table {text!r}: expected NAMESPACE.TABLE, e.g. demo.trips (one dot, no spaces)")
    return text


def _storage_options(pairs: list[str] | None) -> dict[str, Any]:
    out = {}
    for pair in pairs or []:
        key, eq, value = pair.partition("=")
        if not eq:
            raise CliError(f"storage option {pair!r} is not KEY=VALUE")
        out[key] = _literal(value)
    return out


def _on_off(value: str | None) -> bool | None:
    return None if value is None else value == "on"


def _namespace_roots(pairs: list[str] | None) -> dict[str, list[str]] | None:
    if not pairs:
        return None
    out: dict[str, list[str]] = {}
    for pair in pairs:
        namespace, eq, uri = pair.partition("=")
        if not eq or not namespace or not uri:
            raise CliError(f"namespace root {pair!r} is not NAMESPACE=URI")
        out.setdefault(namespace, []).append(uri)
    return out


# -- commands --------------------------------------------------------------------------------


#: Arrow's bundled mimalloc may back its large allocations with transparent huge pages; where the
#: kernel compacts memory to fault one in, every freshly decoded row group of a point read then
#: costs milliseconds of system time (twice its decoding). The allocator reads this when Arrow
#: loads, which in this process has happened already: set here, it reaches the serving processes
#: ``serve`` starts (``--processes N``, spawned); the container image sets it for the first one.
#: (gRPC's own C log is off by default for every process that imports ``flight_server.protocol``.)
_SERVER_ENVIRONMENT = {"MIMALLOC_ALLOW_LARGE_OS_PAGES": "0"}


def _check_local_warehouses(warehouses: Sequence[str]) -> None:
    """Refuse a local warehouse that is not a folder (the scan would say only ``[Errno 2]``)."""
    for warehouse in warehouses:
        scheme, sep, rest = warehouse.partition("://")
        if sep and scheme != "file":
            continue  # remote storage: checked by its scan, with the server's credentials
        path = rest if sep else warehouse
        if not os.path.exists(path):
            raise CliError(f"warehouse folder {warehouse} does not exist")
        if not os.path.isdir(path):
            raise CliError(f"warehouse {warehouse} is not a folder")


def cmd_serve(args: argparse.Namespace) -> int:
    for name, value in _SERVER_ENVIRONMENT.items():
        os.environ.setdefault(name, value)  # also seen by the processes it starts
    from flight_server.server.config import ServerConfig
    from flight_server.server.runtime.serve import serve

    config = ServerConfig.load(
        args.config,
        host=args.host,
        port=args.port,
        warehouses=args.warehouse,
        allowed_roots=args.allow_root,
        namespace_roots=_namespace_roots(args.namespace_root),
        catalog_url=args.catalog_url,
        state_dir=args.state_dir,
        secret_file=args.secret_file,
        processes=args.processes,
        process_endpoints=True if args.process_endpoints else None,
        insecure=True if args.insecure else None,
        anonymous_read=args.anonymous_read,
        refresh_interval_seconds=args.refresh_interval,
        role=args.role,
        coordinator=args.coordinator,
        advertise=args.advertise,
        coordinator_tls_root_certs=args.coordinator_tls_root_certs,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_client_ca=args.tls_client_ca,
        metrics_port=args.metrics_port,
        health_port=args.health_port,
        metrics_host=args.metrics_host,
        health_host=args.health_host,
        metrics_tls=_on_off(args.metrics_tls),
        health_tls=_on_off(args.health_tls),
        console_port=args.console_port,
        console_host=args.console_host,
        log_format=args.log_format,
        table_cache_bytes=args.table_cache_bytes,
        footer_cache_bytes=args.footer_cache_bytes,
        split_cache_bytes=args.split_cache_bytes,
        disk_cache_bytes=args.disk_cache_bytes,
    )

    _check_local_warehouses(config.warehouses)

    def ready(server: Any) -> None:
        tables = len(server.registry.list_tables())
        where = wire.uri(config.host, server.port, bool(config.tls.cert))
        print(f"hudi-flight serving {tables} table(s) on {where}", flush=True)
        if config.ops.console_port is not None:
            console = getattr(getattr(server, "app", None), "console", None)  # one process: its bound port
            port = console.port if console is not None else config.ops.console_port
            host = config.ops.console_host or config.host
            print(f"web console on {'https' if config.tls.cert else 'http'}://{host}:{port}/", flush=True)
        if tables == 0 and config.warehouses:
            print("no Hudi table found under the warehouse(s): a table is a folder holding .hoodie/hoodie.properties, "
                  "served as <parent folder>.<folder>; point --warehouse at the folder above the tables' "
                  "namespace folders (or at one table)", flush=True)

    def stop(signum: int, frame: Any) -> None:  # SIGTERM: shut down like Ctrl-C (stops the workers too)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        serve(config, ready=ready)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def _password(args: argparse.Namespace) -> str:
    """The password of ``--user``: one line of stdin with ``--password-stdin``, else $HUDI_FLIGHT_PASSWORD."""
    if args.password_stdin:
        return read_password()
    password = os.environ.get("HUDI_FLIGHT_PASSWORD")
    if not password:
        raise CliError(f"--user {args.user}: give the password with --password-stdin or $HUDI_FLIGHT_PASSWORD")
    return password


def _client(args: argparse.Namespace) -> HudiFlightClient:
    """The client of a command that talks to a server: the one place its connection flags are read."""
    if args.password_stdin and not args.user:
        raise CliError("--password-stdin needs --user")
    token = args.token or os.environ.get("HUDI_FLIGHT_TOKEN")
    if args.user and args.token:
        raise CliError("give either --token or --user, not both")
    return HudiFlightClient(
        args.server,
        token=None if args.user else token,
        user=args.user,
        password=_password(args) if args.user else None,
        tls_root_certs=args.tls_root_cert,
        cert_chain=args.tls_cert,
        private_key=args.tls_key,
    )


@contextlib.contextmanager
def _explained_missing(client: HudiFlightClient, table: str) -> Iterator[None]:
    """A table the server does not know, said in words: a missing namespace, or a missing table
    of an existing one (with the names the caller may see)."""
    try:
        yield
    except LookupError:
        namespace = table.partition(".")[0]
        namespaces = client.namespaces()
        if namespace not in namespaces:
            raise CliError(f"namespace {namespace} does not exist (namespaces: {_names(namespaces)})") from None
        tables = [t["table"].partition(".")[2] for t in client.tables(namespace)]
        raise CliError(f"table {table} does not exist (tables of {namespace}: {_names(tables)})") from None


def _names(names: list[str], shown: int = 10) -> str:
    if not names:
        return "none"
    more = f", … {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def cmd_register(args: argparse.Namespace) -> int:
    table = _table_name(args.table)
    with _client(args) as client:
        entry = client.register(table, args.uri, _storage_options(args.storage_option), replace=args.replace)
    print(f"registered {entry['table']} ({entry['table_type']}, version {entry['table_version']}) at {entry['uri']}")
    return 0


def cmd_tables(args: argparse.Namespace) -> int:
    with _client(args) as client:
        tables = client.tables(args.namespace)
        if args.namespace and not tables and args.namespace not in (namespaces := client.namespaces()):
            raise CliError(f"namespace {args.namespace} does not exist (namespaces: {_names(namespaces)})")
    if args.json:
        print(json.dumps(tables, indent=2))
    else:
        for t in tables:
            print(f"{t['table']}\t{t['uri']}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    """The table's description and its health (the ``health`` metadata table: each check against
    the threshold it names)."""
    table = _table_name(args.table)
    with _client(args) as client, _explained_missing(client, table):
        info = client.table_info(table)
        health = metadata_table(client, table, "health").to_pylist()
    info.pop("arrow_schema", None)
    if args.json:
        print(json.dumps({**info, "health": health}, indent=2))
        return 0
    print(_described(info))
    counts = Counter(check["status"] for check in health)
    print(f"health: {', '.join(f'{counts[s]} {s}' for s in ('WARN', 'INFO', 'OK') if counts[s])}")
    for check in health:
        print(f"  {check['status']:<4} {check['check']}{_shown_value(check)}: {check['detail']}")
        print(f"       threshold: {check['threshold']}")
        if check.get("remedy"):
            print(f"       fix: {check['remedy']}")
    return 0


def _shown_value(check: dict[str, Any]) -> str:
    """`` = value`` of a health check (``last_commit``'s is an age in seconds, told as one)."""
    value = check["value"]
    if value is None:
        return ""
    return f" = {human_age(timedelta(seconds=value)) if check['check'] == 'last_commit' else value}"


def _described(info: dict[str, Any]) -> str:
    """The first lines of ``info``: what the table is and where its timeline stands."""
    timeline = info.get("timeline") or []
    latest = timeline[-1]["requested_time"] if timeline else "none"
    lines = [
        f"{info['table']}: {info['table_type']}, table version {info['table_version']}, at {info['uri']}",
        f"record key: {', '.join(info['record_key_fields']) or 'none'}; "
        f"partitioned by: {', '.join(info['partition_fields']) or 'nothing'}",
        f"timeline: {len(timeline)} completed instants, latest {latest}",
    ]
    return "\n".join(lines)


def cmd_refresh(args: argparse.Namespace) -> int:
    """Re-read a table's timeline on the server (or, without a table, re-scan its warehouses)."""
    table = _table_name(args.table) if args.table else None
    with _client(args) as client, contextlib.ExitStack() as stack:
        if table:
            stack.enter_context(_explained_missing(client, table))
        result = client.refresh(table)
    if table:
        print(f"refreshed {table}: latest instant {result.get('latest_instant') or 'none (no commits)'}")
    else:
        print(f"re-scanned the warehouses: {result.get('tables', 0)} table(s) found")
    return 0


def read_options_from(args: argparse.Namespace) -> ReadOptions:
    """The read options given on the command line (flags named like the fields), checked
    before anything is sent: filter texts and instants in the grammar of docs/filters.md."""
    given = {
        "columns": _columns(args.columns),
        "filters": parse_filter_texts(args.filter),
        "query_type": args.query_type,
        "as_of": args.as_of,
        "start": args.start,
        "end": args.end,
        "limit": args.limit,
    }
    return ReadOptions(**{k: v for k, v in given.items() if v is not None})


def _fetch(
    client: HudiFlightClient, plan: QueryPlan, progress: Progress | None
) -> Generator[pa.RecordBatch, None, None]:
    """The plan's batches, counted by ``progress`` (endpoints done, rows)."""
    if progress is not None:
        progress.planned(len(plan.endpoints), plan.total_records)
    done = None if progress is None else (lambda _endpoint: progress.endpoint_done())
    for batch in client.fetch_all(plan.endpoints, done):
        if progress is not None:
            progress.add_rows(batch.num_rows)
        yield batch


def _sql_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def count_rows(client: HudiFlightClient, table: str, options: ReadOptions) -> int | None:
    """The exact row count of a snapshot or read-optimized query, counted on the server (Flight
    SQL ``count(*)``: from metadata where exact, else without sending rows); ``None`` when it
    cannot be asked (an incremental query, no SQL support on either side)."""
    if options.incremental:
        return None
    try:
        from flight_server.client.sql.flightsql import statement_plan
    except ImportError:  # the SQL client's protobuf is an extra
        return None
    namespace, name = table.split(".")
    name += "_ro" if options.read_optimized else ""
    sql = f"SELECT count(*) FROM {_sql_name(namespace)}.{_sql_name(name)}"
    if options.as_of is not None:
        sql += f" TIMESTAMP AS OF '{options.as_of}'"
    if options.filters:
        sql += f" WHERE {format_filters(options.filters)}"
    try:
        counted = client.stream(statement_plan(client, sql)).read_all()
    except (ValueError, LookupError, NotImplementedError, PermissionError):
        return None
    return int(counted.column(0)[0].as_py()) if counted.num_rows else None


def _read_to_screen(args: argparse.Namespace, client: HudiFlightClient, options: ReadOptions,
                    progress: Progress | None) -> str:
    """The grid ``read`` prints: only the rows shown are fetched (the limit is sent with the query)."""
    shown = args.limit if args.limit is not None else args.max_rows
    fetched = shown if args.limit is not None else shown + 1  # one more: are there more rows?
    plan = client.plan(args.table, options.replace(limit=fetched))
    batches, rows = [], 0
    with contextlib.closing(_fetch(client, plan, progress)) as stream:  # closing stops the other streams
        for batch in stream:
            batches.append(batch)
            rows += batch.num_rows
            if rows >= fetched:
                break
    result = pa.Table.from_batches(batches, schema=plan.schema).slice(0, fetched)
    more = ""
    if result.num_rows > shown:
        total = count_rows(client, args.table, options)
        more = f"{total - shown:,} more" if total is not None else "more not fetched"
        more += ": --limit N shows N rows, --output FILE writes them all"
    return format_table(result, shown, more=more, vertical=True if args.vertical else None)


def _read_to_file(args: argparse.Namespace, client: HudiFlightClient, options: ReadOptions,
                  progress: Progress | None) -> str:
    plan = client.plan(args.table, options)
    with OutputFile(args.output, plan.schema) as out:  # refuses what the format cannot hold, before reading
        for batch in _fetch(client, plan, progress):
            out.write(batch)
    return f"wrote {out.rows} rows to {args.output}"


def cmd_read(args: argparse.Namespace) -> int:
    _table_name(args.table)
    options = read_options_from(args)
    if args.output:
        output_format(args.output)
    show_progress = not args.no_progress and sys.stderr.isatty()
    progress = Progress(args.table) if show_progress else None
    with _client(args) as client, _explained_missing(client, args.table):
        try:
            if args.output:
                message = _read_to_file(args, client, options, progress)
            else:
                message = _read_to_screen(args, client, options, progress)
        finally:
            if progress is not None:
                progress.close()
    print(message)
    return 0


def run_generate(argv: Sequence[str]) -> int:
    """``hudi-flight generate ...``: the table generator's own command line."""
    try:
        from hudi_generator.generator import main as generator_main
    except ModuleNotFoundError as err:
        raise CliError("the table generator (package hudi_generator) is not installed") from err
    return int(generator_main(list(argv)) or 0)


def cmd_demo(args: argparse.Namespace) -> int:
    from flight_server.cli.demo import run_demo

    return run_demo(args.warehouse, keep=args.keep)


# -- parser and entry point ------------------------------------------------------------------


def package_version() -> str:
    try:
        return version("hudi-flight")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _add_server(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", default=DEFAULT_SERVER, help=f"server URI (default {DEFAULT_SERVER})")
    p.add_argument("--token", help="bearer token (default: $HUDI_FLIGHT_TOKEN)")
    p.add_argument("--user", help="log in as this user (password: --password-stdin or $HUDI_FLIGHT_PASSWORD)")
    p.add_argument("--password-stdin", action="store_true", help="read the password of --user from stdin")
    p.add_argument("--tls-root-cert", metavar="FILE", help="PEM CA certificate(s) trusted for a grpc+tls:// server")
    p.add_argument("--tls-cert", metavar="FILE", help="PEM client certificate, for mutual TLS (needs --tls-key)")
    p.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hudi-flight", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"hudi-flight {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="serve the catalog over Arrow Flight")
    p.add_argument("--host", help="bind address (default 127.0.0.1: loopback only)")
    p.add_argument("--port", type=int, help=f"port (default {DEFAULT_PORT}; 0 = any free port)")
    p.add_argument("--warehouse", action="append", help="register every Hudi table under this URI (repeatable)")
    p.add_argument("--allow-root", action="append", metavar="URI",
                   help="register-table may also register tables under this URI (repeatable)")
    p.add_argument("--namespace-root", action="append", metavar="NS=URI",
                   help="a root of namespace NS (repeatable): its tables lie under its roots, and an admin of NS "
                        "registers only there")
    p.add_argument("--catalog-url", help="SQLAlchemy URL of the catalog (default: SQLite in the state dir)")
    p.add_argument("--config", help="TOML or JSON config file")
    p.add_argument("--state-dir", help="where the embedded catalog and the ticket secret live")
    p.add_argument("--secret-file", help="ticket signing secret (hex); generated when missing")
    p.add_argument("--processes", type=int, help="serving processes sharing the port (default 1)")
    p.add_argument("--process-endpoints", action="store_true",
                   help="with --processes N: endpoints name each process's own port, so scans skip the relay "
                        "(those ports have a single process's bounds, not the relay's; see docs/flight.md)")
    p.add_argument("--insecure", action="store_true",
                   help="serve a non-loopback address with no users or tokens (anonymous read-only)")
    p.add_argument("--anonymous-read", choices=("auto", "on", "off"),
                   help="callers without credentials: auto (read only while the server has no users or tokens, "
                        "the default), on (keep reading when users exist), off; loopback or --insecure only. "
                        "On a loopback address with no users or tokens they may also `hudi-flight refresh` and "
                        "`register` (under the warehouses and --allow-root); never on other addresses")
    p.add_argument("--refresh-interval", type=float, metavar="SECONDS",
                   help="re-scan the warehouses this often for new or removed tables (default 60; 0: never; "
                        "`hudi-flight refresh` sees a new commit at once)")
    p.add_argument("--role", choices=("coordinator", "worker"),
                   help="cluster role: a coordinator plans onto its workers; a worker streams endpoints")
    p.add_argument("--coordinator", metavar="URI", help="a worker's coordinator, e.g. grpc://coord:8815")
    p.add_argument("--advertise", metavar="URI", help="the URI clients reach this server at (workers)")
    p.add_argument("--coordinator-tls-root-certs", metavar="FILE",
                   help="PEM CA a worker trusts for a grpc+tls:// coordinator")
    p.add_argument("--tls-cert", metavar="FILE", help="serve TLS with this PEM certificate chain (needs --tls-key)")
    p.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert (unencrypted)")
    p.add_argument("--tls-client-ca", metavar="FILE",
                   help="mutual TLS: refuse clients without a certificate signed by this PEM CA")
    p.add_argument("--console-port", type=int,
                   help="serve the web console at http://HOST:PORT/ (https with --tls-cert; the Flight "
                        "port's users, tokens and rights)")
    p.add_argument("--console-host", help="bind address of --console-port (default: --host)")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics at http://HOST:PORT/metrics")
    p.add_argument("--health-port", type=int, help="serve gRPC health checking (grpc.health.v1) on this port")
    p.add_argument("--metrics-host", help="bind address of --metrics-port (default: --host)")
    p.add_argument("--health-host", help="bind address of --health-port (default: --host)")
    p.add_argument("--metrics-tls", choices=("on", "off"),
                   help="HTTPS for --metrics-port (default: on when the server has TLS)")
    p.add_argument("--health-tls", choices=("on", "off"),
                   help="TLS for --health-port (default: on when the server has TLS; off e.g. for Kubernetes "
                        "gRPC probes, which cannot speak TLS)")
    p.add_argument("--log-format", choices=("text", "json"), help="log lines as text (default) or JSON objects")
    for cache, what in (("table-cache", "planned table states"), ("footer-cache", "Parquet footers"),
                        ("split-cache", "split results (0: off)"),
                        ("disk-cache", "local copy of remote bytes (default 1 GiB; 0: off)")):
        p.add_argument(f"--{cache}-bytes", type=int, metavar="N", help=f"bound of the cache of {what}")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("register", help="register a table with a running server")
    p.add_argument("table", help="NS.TABLE")
    p.add_argument("uri", help="table base URI")
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE")
    p.add_argument("--replace", action="store_true", help="replace an existing registration")
    _add_server(p)
    p.set_defaults(func=cmd_register)

    p = sub.add_parser("tables", help="list the tables of a running server")
    p.add_argument("--namespace")
    p.add_argument("--json", action="store_true")
    _add_server(p)
    p.set_defaults(func=cmd_tables)

    p = sub.add_parser("info", help="describe a table and its health (small files, log backlog, pending "
                       "compaction and clustering, metadata-table lag), each against a named threshold")
    p.add_argument("table", help="NS.TABLE")
    p.add_argument("--json", action="store_true", help="print the description, schema, timeline and health as JSON")
    _add_server(p)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("read", help="read a table through a running server",
                       description="Read a table; prints the first rows like a SQL shell, or writes all of them "
                                   "with --output. Filters: docs/filters.md.")
    p.add_argument("table", help="NS.TABLE")
    p.add_argument("--columns", nargs="+", action="extend", metavar="COLUMN",
                   help="columns to return: names separated by spaces or commas (repeatable)")
    p.add_argument("--filter", action="append", default=[], metavar="TEXT",
                   help="e.g. \"region in ('us', 'eu') and fare >= 10\" (repeatable; all ANDed)")
    p.add_argument("--query-type", choices=QUERY_TYPES)
    instant = "yyyyMMddHHmmss[SSS] or ISO-8601 (2024-01-31, 2024-01-31T12:00:00Z)"
    p.add_argument("--as-of", metavar="INSTANT", help=f"time travel to this instant: {instant}")
    p.add_argument("--start", metavar="INSTANT", help="incremental start (exclusive)")
    p.add_argument("--end", metavar="INSTANT", help="incremental end (inclusive)")
    p.add_argument("--limit", type=int, help="at most this many rows (sent with the query)")
    p.add_argument("--output", metavar="FILE", help="write every row to a .parquet or .csv file")
    p.add_argument("--max-rows", type=int, default=DEFAULT_DISPLAY_ROWS,
                   help=f"rows printed without --limit (default {DEFAULT_DISPLAY_ROWS}); only those are fetched")
    p.add_argument("--no-progress", action="store_true", help="no progress line")
    p.add_argument("--vertical", action="store_true",
                   help="print each row as one 'column | value' line per field (the default when the grid "
                        "would cut column names)")
    _add_server(p)
    p.set_defaults(func=cmd_read)

    p = sub.add_parser("refresh", help="re-read a table's timeline on the server (no table: re-scan warehouses)")
    p.add_argument("table", nargs="?", help="NS.TABLE")
    _add_server(p)
    p.set_defaults(func=cmd_refresh)

    add_admin_parsers(sub)

    p = sub.add_parser("demo", help="write a demo warehouse, serve it and show what hudi-flight does, in one screenful")
    p.add_argument("--warehouse", help="where to write the demo warehouse, which stays there "
                                       "(default: a temporary folder, removed at the end)")
    p.add_argument("--keep", action="store_true", help="keep the temporary warehouse")
    p.set_defaults(func=cmd_demo)

    # "generate" is dispatched before parsing (its options belong to the generator); listed for --help.
    sub.add_parser("generate", help="generate synthetic Hudi tables (see hudi-flight generate --help)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["generate"]:
            return run_generate(argv[1:])
        args = build_parser().parse_args(argv)
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        print(f"hudi-flight: error: {one_line(err)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
