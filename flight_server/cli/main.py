"""``hudi-flight``: serve Hudi tables over Arrow Flight, and talk to a running server.

Every command prints a one-line message (no traceback) and exits 1 on error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
from typing import Any, Sequence

import pyarrow as pa

from catalog.plan.options import QUERY_TYPES, ReadOptions
from flight_server.cli.admin import add_parsers as add_admin_parsers
from flight_server.cli.admin import read_password
from flight_server.cli.output import CliError, format_table, one_line, write_output
from flight_server.client.session import HudiFlightClient, QueryPlan
from flight_server.protocol import wire
from flight_server.protocol.wire import DEFAULT_HOST, DEFAULT_PORT
from flight_server.server.config import ServerConfig

DEFAULT_SERVER = wire.DEFAULT_URI
_FILTER = re.compile(r"^\s*(\S+)\s+(is not null|is null|not in|in|!=|<=|>=|==|=|<|>)\s*(.*?)\s*$", re.IGNORECASE)


# -- argument helpers ------------------------------------------------------------------------


def _literal(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_filter(text: str) -> tuple:
    """``"city = sf"`` -> ``("city", "=", "sf")``; values are JSON when they parse as JSON.

    ``in`` / ``not in`` take a JSON list or comma-separated values.
    """
    m = _FILTER.match(text)
    if not m:
        raise CliError(f"cannot parse filter {text!r}; expected 'column op value', e.g. 'city = sf'")
    col, op, raw = m.group(1), m.group(2).lower(), m.group(3)
    if op in ("is null", "is not null"):
        if raw:
            raise CliError(f"filter {text!r}: {op!r} takes no value")
        return (col, op, None)
    if not raw:
        raise CliError(f"filter {text!r}: {op!r} needs a value")
    if op in ("in", "not in"):
        value = _literal(raw)
        if not isinstance(value, list):
            value = [_literal(v.strip()) for v in raw.split(",")]
        return (col, op, value)
    return (col, op, _literal(raw))


def _columns(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


def _storage_options(pairs: list[str] | None) -> dict[str, Any]:
    out = {}
    for pair in pairs or []:
        key, eq, value = pair.partition("=")
        if not eq:
            raise CliError(f"storage option {pair!r} is not KEY=VALUE")
        out[key] = _literal(value)
    return out


# -- commands --------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    from flight_server.server.runtime.serve import serve

    config = ServerConfig.load(
        args.config,
        host=args.host,
        port=args.port,
        warehouses=args.warehouse,
        allowed_roots=args.allow_root,
        catalog_url=args.catalog_url,
        state_dir=args.state_dir,
        secret_file=args.secret_file,
        processes=args.processes,
        insecure=True if args.insecure else None,
        role=args.role,
        coordinator=args.coordinator,
        advertise=args.advertise,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_client_ca=args.tls_client_ca,
        metrics_port=args.metrics_port,
        health_port=args.health_port,
        log_format=args.log_format,
        table_cache_bytes=args.table_cache_bytes,
        footer_cache_bytes=args.footer_cache_bytes,
        split_cache_bytes=args.split_cache_bytes,
        disk_cache_bytes=args.disk_cache_bytes,
    )

    def ready(server: Any) -> None:
        tables = len(server.registry.list_tables())
        where = wire.uri(config.host, server.port, bool(config.tls_cert))
        print(f"hudi-flight serving {tables} table(s) on {where}", flush=True)

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


def cmd_register(args: argparse.Namespace) -> int:
    with _client(args) as client:
        entry = client.register(args.table, args.uri, _storage_options(args.storage_option), replace=args.replace)
    print(f"registered {entry['table']} ({entry['table_type']}, version {entry['table_version']}) at {entry['uri']}")
    return 0


def cmd_tables(args: argparse.Namespace) -> int:
    with _client(args) as client:
        tables = client.tables(args.namespace)
    if args.json:
        print(json.dumps(tables, indent=2))
    else:
        for t in tables:
            print(f"{t['table']}\t{t['uri']}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    with _client(args) as client:
        info = client.table_info(args.table)
    info.pop("arrow_schema", None)
    print(json.dumps(info, indent=2))
    return 0


def read_options_from(args: argparse.Namespace) -> ReadOptions:
    """The read options given on the command line (flags named like the fields)."""
    given = {
        "columns": _columns(args.columns),
        "filters": [parse_filter(f) for f in args.filter],
        "query_type": args.query_type,
        "as_of": args.as_of,
        "start": args.start,
        "end": args.end,
        "limit": args.limit,
    }
    return ReadOptions(**{k: v for k, v in given.items() if v is not None})


def _read(args: argparse.Namespace, client: HudiFlightClient, progress: bool) -> pa.Table:
    """Run the query; with ``progress``, a tqdm bar over the planned row estimate."""
    schema: list[pa.Schema] = []
    bar: list[Any] = []

    def on_plan(plan: QueryPlan) -> None:
        schema.append(plan.schema)
        if progress:
            from tqdm import tqdm

            bar.append(tqdm(total=max(plan.total_records, 0), unit="rows", file=sys.stderr, leave=False))

    batches = []
    try:
        for batch in client.read_batches(args.table, read_options_from(args), on_plan=on_plan):
            batches.append(batch)
            if bar:
                bar[0].update(batch.num_rows)
    finally:
        if bar:
            bar[0].close()
    return pa.Table.from_batches(batches, schema=schema[0])


def cmd_read(args: argparse.Namespace) -> int:
    with _client(args) as client:
        table = _read(args, client, progress=not args.no_progress and sys.stderr.isatty())
    if args.output:
        write_output(table, args.output)
        print(f"wrote {table.num_rows} rows to {args.output}")
    else:
        print(format_table(table, args.max_rows))
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
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="serve the catalog over Arrow Flight")
    p.add_argument("--host", help=f"bind address (default {DEFAULT_HOST})")
    p.add_argument("--port", type=int, help=f"port (default {DEFAULT_PORT}; 0 = any free port)")
    p.add_argument("--warehouse", action="append", help="register every Hudi table under this URI (repeatable)")
    p.add_argument("--allow-root", action="append", metavar="URI",
                   help="register-table may also register tables under this URI (repeatable)")
    p.add_argument("--catalog-url", help="SQLAlchemy URL of the catalog (default: SQLite in the state dir)")
    p.add_argument("--config", help="TOML or JSON config file")
    p.add_argument("--state-dir", help="where the embedded catalog and the ticket secret live")
    p.add_argument("--secret-file", help="ticket signing secret (hex); generated when missing")
    p.add_argument("--processes", type=int, help="serving processes sharing the port (default 1)")
    p.add_argument("--insecure", action="store_true",
                   help="serve a non-loopback address with no users or tokens (anonymous read-only)")
    p.add_argument("--role", choices=("coordinator", "worker"),
                   help="cluster role: a coordinator plans onto its workers; a worker streams endpoints")
    p.add_argument("--coordinator", metavar="URI", help="a worker's coordinator, e.g. grpc://coord:8815")
    p.add_argument("--advertise", metavar="URI", help="the URI clients reach this server at (workers)")
    p.add_argument("--tls-cert", metavar="FILE", help="serve TLS with this PEM certificate chain (needs --tls-key)")
    p.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert (unencrypted)")
    p.add_argument("--tls-client-ca", metavar="FILE",
                   help="mutual TLS: refuse clients without a certificate signed by this PEM CA")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics at http://HOST:PORT/metrics")
    p.add_argument("--health-port", type=int, help="serve gRPC health checking (grpc.health.v1) on this port")
    p.add_argument("--log-format", choices=("text", "json"), help="log lines as text (default) or JSON objects")
    for cache, what in (("table-cache", "planned table states"), ("footer-cache", "Parquet footers"),
                        ("split-cache", "split results (0: off)"),
                        ("disk-cache", "local copy of remote bytes (0: off)")):
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

    p = sub.add_parser("info", help="describe a table (type, version, keys, schema, timeline)")
    p.add_argument("table", help="NS.TABLE")
    _add_server(p)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("read", help="read a table through a running server")
    p.add_argument("table", help="NS.TABLE")
    p.add_argument("--columns", action="append", help="comma-separated column names (repeatable)")
    p.add_argument("--filter", action="append", default=[], help="'column op value', e.g. 'city = sf' (repeatable)")
    p.add_argument("--query-type", choices=QUERY_TYPES)
    p.add_argument("--as-of")
    p.add_argument("--start")
    p.add_argument("--end")
    p.add_argument("--limit", type=int)
    p.add_argument("--output", help="write the result to a .parquet or .csv file")
    p.add_argument("--max-rows", type=int, default=50, help="rows printed (default 50)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_server(p)
    p.set_defaults(func=cmd_read)

    add_admin_parsers(sub)

    p = sub.add_parser("demo", help="write a demo warehouse, serve it, run a query, stop")
    p.add_argument("--warehouse", help="where to write the demo warehouse (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the demo warehouse")
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
