"""Server configuration: defaults, a TOML or JSON config file, and command-line overrides.

Precedence: command line > config file > defaults. An example file is ``deploy/hudi-flight.toml``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.ipc

from catalog.plan.dataset import FRAGMENT_CACHE_BYTES
from catalog.plan.splits import DEFAULT_TARGET_SPLIT_BYTES, SplitOptions
from flight_server.protocol.wire import DEFAULT_HOST, DEFAULT_PORT, TCP_SCHEME, TLS_SCHEME
from flight_server.server.cache.tables import DEFAULT_TABLE_CACHE_BYTES
from flight_server.server.config_sections import flattened
from flight_server.server.engine.sandbox import SCHEMA_CACHE_BYTES, EngineSettings
from flight_server.server.security.auth import AuthSettings
from flight_server.server.security.limits import Limits, RelayLimits
from flight_server.server.security.policy import DEFAULT_PROTOCOLS, DEFAULT_RESOLVED_CACHE_BYTES, StoragePolicy
from flight_server.server.security.state_files import private_dir
from flight_server.server.security.tls import TlsFiles
from flight_server.server.sql.analyses import CACHE_BYTES as ANALYSIS_CACHE_BYTES


def default_state_dir() -> Path:
    """Where the embedded catalog and the generated ticket secret live by default."""
    return Path(os.environ.get("HUDI_FLIGHT_HOME", Path.home() / ".hudi-flight"))


def _toml() -> Any:
    try:
        import tomllib
    except ModuleNotFoundError as err:  # Python 3.10
        raise ValueError("TOML config files need Python 3.11+; use a .json config file") from err
    return tomllib


@dataclass
class ServerConfig:
    """Everything ``hudi-flight serve`` can be told."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    warehouses: list[str] = field(default_factory=list)
    storage_options: dict[str, Any] = field(default_factory=dict)  # for warehouse tables
    catalog_url: str | None = None  # default: sqlite in state_dir
    state_dir: str | None = None
    secret: str | None = None  # hex; default: generated once into state_dir/ticket-secret
    secret_file: str | None = None
    ticket_ttl_seconds: float = 3600.0
    # authentication and authorization (docs/flight.md; flight_server.server.security.access)
    tokens: dict[str, str] = field(default_factory=dict)  # static bearer token -> user name
    token_ttl_seconds: float = 3600.0  # lifetime of the handshake's bearer tokens
    auth_cache_seconds: float = 1.0  # how long a user's rights are reused between calls
    insecure: bool = False  # serve a non-loopback address with no users and no tokens (anonymous read)
    target_split_bytes: int = DEFAULT_TARGET_SPLIT_BYTES
    initial_split_bytes: int | None = None
    initial_split_count: int = 0
    split_workers: int = 4
    refresh_interval_seconds: float = 60.0  # warehouse re-scan timer; 0 disables it
    anonymous_read: str = "auto"  # auto | on | off (security.access.Access)
    locations: list[str] = field(default_factory=list)  # data servers named in endpoints
    processes: int = 1  # serving processes sharing the port (flight_server.server.runtime.supervisor)
    # true (opt-in): endpoints of processes > 1 name the serving process that streams them, on its
    # own port (which lacks the relay's bounds), for clients that can reach it (a loopback or named
    # host, or advertise); false: every byte goes through the relay
    process_endpoints: bool = False
    process_ports: list[int] = field(default_factory=list)  # own ports of the processes (default: any free)
    max_connections: int = 1024  # connections relayed at once to the processes (processes > 1)
    max_connections_per_peer: int = 256  # ... from one peer host (0: no bound of its own)
    relay_handshake_seconds: float = 10.0  # a relayed connection its process has not answered by then is closed
    relay_idle_seconds: float = 600.0  # ... one without a byte either way for this long
    relay_half_open_seconds: float = 30.0  # ... one closed in one direction for this long
    # request messages in progress (begun, not yet received whole), checked in front of gRPC in
    # every mode (runtime.relay): on one connection, and on all together (0: unbounded)
    max_body_bytes_per_connection: int = 16 << 20
    max_body_bytes_per_peer: int = 64 << 20  # ... on the connections of one peer host
    body_memory_bytes: int = 256 << 20
    # scale-out (docs/flight.md, "Scaling out" and "Caches"; flight_server.server.cluster.membership / worker)
    role: str | None = None  # "coordinator" or "worker"; None: a server on its own
    coordinator: str | None = None  # a worker's coordinator, grpc[+tls]://host:port
    advertise: str | None = None  # the URI others reach this server at (default: host and port)
    heartbeat_interval_seconds: float = 2.0  # how often a worker tells its coordinator it is alive
    heartbeat_timeout_seconds: float = 6.0  # a worker silent this long leaves the coordinator's plans
    coordinator_tls_root_certs: str | None = None  # PEM file: CA a worker trusts for a grpc+tls coordinator
    # storage confinement of register-table (docs/flight.md, "Authorization")
    allowed_roots: list[str] = field(default_factory=list)  # besides every warehouse
    namespace_roots: dict[str, list[str]] = field(default_factory=dict)  # namespace -> its own roots (walls)
    allowed_protocols: list[str] = field(default_factory=lambda: list(DEFAULT_PROTOCOLS))
    client_storage_option_keys: list[str] = field(default_factory=list)  # none: clients send no options
    root_storage_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # root URI -> options
    # bounded work per call (see flight_server.server.security.limits.Limits for the defaults)
    max_body_bytes: int = Limits.max_body_bytes
    max_json_depth: int = Limits.max_json_depth
    max_filters: int = Limits.max_filters
    max_in_values: int = Limits.max_in_values
    max_sql_tokens: int = Limits.max_sql_tokens
    max_sql_depth: int = Limits.max_sql_depth
    max_sql_generated_values: int = Limits.max_sql_generated_values
    max_properties_bytes: int = Limits.max_properties_bytes
    planning_seconds: float = Limits.planning_seconds
    max_streams_per_connection: int = Limits.max_streams_per_connection
    max_streams_per_user: int = Limits.max_streams_per_user
    max_streams_total: int = Limits.max_streams_total
    stream_queue_seconds: float = Limits.stream_queue_seconds
    max_plans_per_connection: int = Limits.max_plans_per_connection
    max_plans_per_user: int = Limits.max_plans_per_user
    max_plans_total: int = Limits.max_plans_total
    stream_memory_bytes: int = Limits.stream_memory_bytes
    footer_cache_bytes: int = Limits.footer_cache_bytes
    # server-side SQL engine (Flight SQL; flight_server.server.engine.settings.EngineSettings): DuckDB memory
    # limit per query (spills to state_dir/sql-spill, at most sql_max_temp_size), threads, a deadline,
    # a bound on the result, and the memory budget of all running queries together (admission)
    sql_memory_limit: str = EngineSettings.memory_limit
    sql_threads: int = EngineSettings.threads
    sql_max_temp_size: str = EngineSettings.max_temp_size
    sql_timeout_seconds: float = EngineSettings.timeout_seconds
    sql_max_result_bytes: int = EngineSettings.max_result_bytes
    sql_memory_budget: str = EngineSettings.memory_budget
    sql_admission_wait_seconds: float = EngineSettings.admission_wait_seconds
    # the fair queue of SQL work (docs/sql.md, "Fair shares"): running at once per user (0: half the
    # budget's slots) and per connection (0: as per user), and waiting at once behind each
    sql_queries_per_user: int = EngineSettings.queries_per_user
    sql_queries_per_connection: int = EngineSettings.queries_per_connection
    sql_queue_per_user: int = EngineSettings.queue_per_user
    sql_queue_per_connection: int = EngineSettings.queue_per_connection
    sql_queue_total: int = EngineSettings.queue_total
    sql_native_scan: bool = EngineSettings.native_scan  # False: every view is fed through Python
    sql_native_reader: bool = EngineSettings.native_reader  # False: local base files scanned through Arrow
    # how far each SQL engine process's address space may grow ("": twice sql_memory_limit + 1 GiB)
    sql_process_memory: str = EngineSettings.process_memory
    # the SQL room's caches, bounded in bytes and reported in metrics (docs/sql.md, "Caches")
    sql_analysis_cache_bytes: int = ANALYSIS_CACHE_BYTES  # each: templates, analyses, generic ones, parameters
    sql_result_schema_cache_bytes: int = SCHEMA_CACHE_BYTES  # result schemas the engine told
    sql_flight_info_cache_bytes: int = 4 << 20  # result schemas' wire forms (~0.7 KB per column)
    sql_fragment_cache_bytes: int = FRAGMENT_CACHE_BYTES  # base files' fragments and footers (native scans)
    sql_table_facts_cache_bytes: int = 8 << 20  # each: scans' schemas and pins, metadata counts
    # transport security (flight_server.server.security.tls): PEM files; tls_client_ca turns on mutual TLS
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    # Arrow IPC buffer compression of do_get streams ("lz4" or "zstd"; None: uncompressed). Fewer
    # bytes to encrypt with TLS; clients decompress by themselves. See bench/secure_scan.py.
    stream_compression: str | None = None
    # caches and operations (docs/flight.md, "Caches" and "Operations")
    table_cache_bytes: int = DEFAULT_TABLE_CACHE_BYTES  # planned table states, versioned by instant
    # a cached table state is reused without listing its timeline for this long (0: every plan checks)
    max_staleness_ms: float = 0.0
    catalog_cache_seconds: float = 1.0  # how long a registry row is reused between calls
    split_cache_bytes: int = 0  # Arrow results of splits; 0: off
    split_cache_entry_bytes: int = 8 << 20  # larger split results are not cached
    point_read_cache_bytes: int = 64 << 20  # decoded columns and footers of filtered reads; 0: off
    log_block_cache_bytes: int = 64 << 20  # log block indexes and decoded blocks of MOR filtered reads; 0: off
    issued_ticket_cache_bytes: int = 4 << 20  # tickets this process issued, redeemed unparsed; 0: off
    disk_cache_bytes: int = 1 << 30  # local copy of remote file bytes under state_dir/disk-cache; 0: off
    resolved_path_cache_bytes: int = DEFAULT_RESOLVED_CACHE_BYTES  # symbolic links of local table paths
    metrics_port: int | None = None  # Prometheus text at http(s)://metrics_host:port/metrics
    health_port: int | None = None  # grpc.health.v1.Health
    metrics_host: str | None = None  # default: host
    health_host: str | None = None  # default: host
    # TLS of the metrics and health ports: None follows the Flight port (TLS with tls_cert/tls_key);
    # false serves them in plaintext (e.g. health for Kubernetes gRPC probes, which cannot speak TLS)
    metrics_tls: bool | None = None
    health_tls: bool | None = None
    log_format: str = "text"  # or "json": one object per line
    # the web console (docs/console.md): pages over HTTP, HTTPS when the Flight port has TLS, with
    # its users, tokens and rights; off unless a port is given
    console_port: int | None = None
    console_host: str | None = None  # default: host
    console_threads: int = 4  # pages built at once; more requests wait for one
    console_timeout_seconds: float = 10.0  # a connection silent this long is closed
    console_page_seconds: float = 30.0  # a table page still being built after this long is refused

    # -- derived ---------------------------------------------------------------------------
    @property
    def state_path(self) -> Path:
        return Path(self.state_dir) if self.state_dir else default_state_dir()

    @property
    def resolved_catalog_url(self) -> str:
        if self.catalog_url:
            return self.catalog_url
        return f"sqlite:///{self.state_path / 'catalog.db'}"

    @property
    def resolved_secret_file(self) -> Path:
        return Path(self.secret_file) if self.secret_file else self.state_path / "ticket-secret"

    @property
    def location(self) -> str:
        scheme = TLS_SCHEME if self.tls_cert else TCP_SCHEME
        return f"{scheme}://{self.host}:{self.port}"

    def operations_tls(self, kind: str) -> TlsFiles | None:
        """The TLS files of the ``metrics`` or ``health`` port (``None``: plaintext)."""
        wanted = getattr(self, f"{kind}_tls")
        files = self.tls()
        if wanted and files is None:
            raise ValueError(f"{kind}_tls needs tls_cert and tls_key")
        return files if wanted is not False else None

    def tls(self) -> TlsFiles | None:
        """The TLS files, ``None`` when TLS is off (raises ``ValueError`` when half configured)."""
        return TlsFiles.from_settings(self.tls_cert, self.tls_key, self.tls_client_ca)

    def storage_policy(self) -> StoragePolicy:
        """The confinement of ``register-table``: warehouses and ``allowed_roots``."""
        root_options = {w: dict(self.storage_options) for w in self.warehouses if self.storage_options}
        root_options.update(self.root_storage_options)
        return StoragePolicy(
            roots=[*self.warehouses, *self.allowed_roots],
            protocols=self.allowed_protocols,
            client_option_keys=self.client_storage_option_keys,
            root_storage_options=root_options,
            namespace_roots=self.namespace_roots,
            resolved_cache_bytes=self.resolved_path_cache_bytes,
        )

    def relay_limits(self) -> RelayLimits:
        """The bounds of the relay in front of the serving process(es) (``runtime.relay``)."""
        return RelayLimits(
            max_connections=self.max_connections,
            max_connections_per_peer=self.max_connections_per_peer,
            handshake_seconds=self.relay_handshake_seconds,
            idle_seconds=self.relay_idle_seconds,
            half_open_seconds=self.relay_half_open_seconds,
            # tickets may be twice max_body_bytes; the rest is protobuf framing
            max_message_bytes=2 * self.max_body_bytes + (64 << 10),
            max_body_bytes_per_connection=self.max_body_bytes_per_connection,
            max_body_bytes_per_peer=self.max_body_bytes_per_peer,
            body_memory_bytes=self.body_memory_bytes,
        )

    def auth_settings(self) -> AuthSettings:
        return AuthSettings(
            self.host, dict(self.tokens), self.insecure, self.auth_cache_seconds, self.token_ttl_seconds,
            self.tls_cert is not None, self.anonymous_read,
        )

    def limits(self) -> Limits:
        """The bounds on each call, from the ``max_*``/``*_seconds``/``*_bytes`` settings."""
        return Limits(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Limits)})

    def sql_engine_settings(self) -> EngineSettings:
        """The embedded SQL engine's bounds; it spills only into a private folder of state_dir."""
        spill = private_dir(self.state_path / "sql-spill")
        keys = [f.name for f in dataclasses.fields(EngineSettings) if f.name != "temp_dir"]
        return EngineSettings(temp_dir=str(spill), **{key: getattr(self, f"sql_{key}") for key in keys})

    def ipc_options(self) -> pa.ipc.IpcWriteOptions:
        """How do_get writes record batches (``stream_compression``)."""
        try:
            return pa.ipc.IpcWriteOptions(compression=self.stream_compression)
        except (ValueError, pa.ArrowException) as err:
            raise ValueError(f"stream_compression must be lz4, zstd or unset, got {self.stream_compression!r}") from err

    def split_options(self) -> SplitOptions:
        return SplitOptions(
            target_split_bytes=self.target_split_bytes,
            initial_split_bytes=self.initial_split_bytes,
            initial_split_count=self.initial_split_count,
            max_workers=self.split_workers,
        )

    def without_operation_ports(self) -> "ServerConfig":
        """This config for a child process of the server: the parent alone answers metrics
        scrapes (summed over every process), health checks and the web console."""
        return dataclasses.replace(self, metrics_port=None, health_port=None, console_port=None)

    # -- loading ---------------------------------------------------------------------------
    def updated(self, overrides: Mapping[str, Any]) -> "ServerConfig":
        """A copy with the non-``None`` entries of ``overrides`` applied."""
        if "auth_tokens" in overrides:
            raise ValueError(
                "auth_tokens was replaced by tokens: a table of token = user name ([server.tokens]); "
                "give the users rights with hudi-flight grant"
            )
        if "max_streams_per_caller" in overrides:
            raise ValueError(
                "max_streams_per_caller was replaced by max_streams_per_connection and max_streams_per_user "
                "(a caller was a peer host: every local client shared one budget)"
            )
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown configuration keys: {', '.join(unknown)}")
        return dataclasses.replace(self, **{k: v for k, v in overrides.items() if v is not None})

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, **overrides: Any) -> "ServerConfig":
        """Defaults, then the file at ``path`` (``.toml`` or ``.json``; its sections:
        ``config_sections``), then ``overrides``.

        Raises:
            ValueError: unreadable file or unknown keys.
        """
        config = cls()
        if path is not None:
            p = Path(path)
            try:
                text = p.read_text()
                doc = json.loads(text) if p.suffix == ".json" else _toml().loads(text)
            except (OSError, ValueError) as err:
                raise ValueError(f"cannot read config file {p}: {err}") from err
            config = config.updated(flattened(doc.get("server", doc), (f.name for f in dataclasses.fields(cls))))
        return config.updated(overrides)


__all__ = ["ServerConfig", "default_state_dir"]
