"""The sections of ``ServerConfig`` and of its config file: ``limits``, ``sql``, ``cache``,
``relay``, ``cluster``, ``tls`` and ``ops`` group the settings by what they are about
(docs/flight.md, "Configuration file"). ``config.sql.timeout_seconds`` is ``timeout_seconds`` in
``[server.sql]``: the class mirrors the file.

Each setting also has a flat name, the one it had before sections (:data:`PLACEMENT`, derived
from the section classes below, is the one table of them): ``sql`` and ``tls`` keys and the relay's
timeouts take their section's prefix back (``sql_timeout_seconds``), the others are the key itself.
Flat names still build a ``ServerConfig`` and still read as ``[server]`` keys of a file, the latter
with a deprecation note in the log naming where the setting belongs now. Settings of no section
(address, warehouses, catalog, secrets, tokens, rights and their cache, splits) are ``[server]`` keys.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

from catalog.plan.dataset import FRAGMENT_CACHE_BYTES
from flight_server.server.cache.tables import DEFAULT_TABLE_CACHE_BYTES
from flight_server.server.engine.sandbox import SCHEMA_CACHE_BYTES, EngineSettings
from flight_server.server.security.limits import Limits
from flight_server.server.security.policy import DEFAULT_RESOLVED_CACHE_BYTES
from flight_server.server.security.tls import TlsFiles
from flight_server.server.sql.analyses import CACHE_BYTES as ANALYSIS_CACHE_BYTES

log = logging.getLogger("flight_server")

#: a field's metadata key for a flat name its section's prefix does not give
_FLAT = "flat"


@dataclass
class LimitsSection:
    """Bounded work per call (``security.limits.Limits`` has the defaults and their meaning)."""

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


@dataclass
class SqlSection:
    """The server-side SQL engine (Flight SQL; ``engine.settings.EngineSettings`` has the meaning):
    DuckDB's memory limit per query (spilling to state_dir/sql-spill, at most ``max_temp_size``),
    threads, a deadline, a bound on the result, the memory budget of all running queries together,
    the fair queue of SQL work (docs/sql.md, "Fair shares") and the SQL room's caches (docs/sql.md,
    "Caches")."""

    memory_limit: str = EngineSettings.memory_limit
    threads: int = EngineSettings.threads
    max_temp_size: str = EngineSettings.max_temp_size
    timeout_seconds: float = EngineSettings.timeout_seconds
    max_result_bytes: int = EngineSettings.max_result_bytes
    memory_budget: str = EngineSettings.memory_budget
    admission_wait_seconds: float = EngineSettings.admission_wait_seconds
    # running at once per user (0: half the budget's slots) and per connection (0: as per user),
    # and waiting at once behind each
    queries_per_user: int = EngineSettings.queries_per_user
    queries_per_connection: int = EngineSettings.queries_per_connection
    queue_per_user: int = EngineSettings.queue_per_user
    queue_per_connection: int = EngineSettings.queue_per_connection
    queue_total: int = EngineSettings.queue_total
    native_scan: bool = EngineSettings.native_scan  # False: every view is fed through Python
    native_reader: bool = EngineSettings.native_reader  # False: local base files scanned through Arrow
    # how far each SQL engine process's address space may grow ("": twice memory_limit + 1 GiB)
    process_memory: str = EngineSettings.process_memory
    analysis_cache_bytes: int = ANALYSIS_CACHE_BYTES  # each: templates, analyses, generic ones, parameters
    result_schema_cache_bytes: int = SCHEMA_CACHE_BYTES  # result schemas the engine told
    flight_info_cache_bytes: int = 4 << 20  # result schemas' wire forms (~0.7 KB per column)
    fragment_cache_bytes: int = FRAGMENT_CACHE_BYTES  # base files' fragments and footers (native scans)
    table_facts_cache_bytes: int = 8 << 20  # each: scans' schemas and pins, metadata counts

    def engine_settings(self, temp_dir: str) -> EngineSettings:
        """The engine's bounds, spilling into ``temp_dir``."""
        keys = [f.name for f in dataclasses.fields(EngineSettings) if f.name != "temp_dir"]
        return EngineSettings(temp_dir=temp_dir, **{key: getattr(self, key) for key in keys})


@dataclass
class CacheSection:
    """Caches (docs/flight.md, "Caches"); a size of 0 turns a cache off."""

    footer_cache_bytes: int = Limits.footer_cache_bytes  # Parquet footers of base files
    table_cache_bytes: int = DEFAULT_TABLE_CACHE_BYTES  # planned table states, versioned by instant
    # a cached table state is reused without listing its timeline for this long (0: every plan checks)
    max_staleness_ms: float = 0.0
    catalog_cache_seconds: float = 1.0  # how long a registry row is reused between calls
    split_cache_bytes: int = 0  # Arrow results of splits
    split_cache_entry_bytes: int = 8 << 20  # larger split results are not cached
    point_read_cache_bytes: int = 64 << 20  # decoded columns and footers of filtered reads
    log_block_cache_bytes: int = 64 << 20  # log block indexes and decoded blocks of MOR filtered reads
    issued_ticket_cache_bytes: int = 4 << 20  # tickets this process issued, redeemed unparsed
    disk_cache_bytes: int = 1 << 30  # local copy of remote file bytes under state_dir/disk-cache
    resolved_path_cache_bytes: int = DEFAULT_RESOLVED_CACHE_BYTES  # symbolic links of local table paths


@dataclass
class RelaySection:
    """The relay in front of the serving process(es) (``runtime.relay``; ``RelayLimits``)."""

    max_connections: int = 1024  # connections relayed at once to the processes (processes > 1)
    max_connections_per_peer: int = 256  # ... from one peer host (0: no bound of its own)
    # a relayed connection its process has not answered by then is closed
    handshake_seconds: float = field(default=10.0, metadata={_FLAT: "relay_handshake_seconds"})
    # ... one without a byte either way for this long
    idle_seconds: float = field(default=600.0, metadata={_FLAT: "relay_idle_seconds"})
    # ... one closed in one direction for this long
    half_open_seconds: float = field(default=30.0, metadata={_FLAT: "relay_half_open_seconds"})
    # request messages in progress (begun, not yet received whole), checked in front of gRPC in
    # every mode: on one connection, and on all together (0: unbounded)
    max_body_bytes_per_connection: int = 16 << 20
    max_body_bytes_per_peer: int = 64 << 20  # ... on the connections of one peer host
    body_memory_bytes: int = 256 << 20


@dataclass
class ClusterSection:
    """Serving processes and scale-out (docs/flight.md, "Scaling out"; ``runtime.supervisor``,
    ``cluster.membership``, ``cluster.worker``)."""

    processes: int = 1  # serving processes sharing the port
    # true (opt-in): endpoints of processes > 1 name the serving process that streams them, on its
    # own port (which lacks the relay's bounds), for clients that can reach it (a loopback or named
    # host, or advertise); false: every byte goes through the relay
    process_endpoints: bool = False
    process_ports: list[int] = field(default_factory=list)  # own ports of the processes (default: any free)
    role: str | None = None  # "coordinator" or "worker"; None: a server on its own
    coordinator: str | None = None  # a worker's coordinator, grpc[+tls]://host:port
    advertise: str | None = None  # the URI others reach this server at (default: host and port)
    heartbeat_interval_seconds: float = 2.0  # how often a worker tells its coordinator it is alive
    heartbeat_timeout_seconds: float = 6.0  # a worker silent this long leaves the coordinator's plans
    coordinator_tls_root_certs: str | None = None  # PEM file: CA a worker trusts for a grpc+tls coordinator


@dataclass
class TlsSection:
    """Transport security (``security.tls``): PEM files; ``client_ca`` turns on mutual TLS."""

    cert: str | None = None
    key: str | None = None
    client_ca: str | None = None

    def files(self) -> TlsFiles | None:
        """The TLS files, ``None`` when TLS is off (raises ``ValueError`` when half configured)."""
        return TlsFiles.from_settings(self.cert, self.key, self.client_ca)


@dataclass
class OpsSection:
    """Operations (docs/flight.md, "Operations") and the web console (docs/console.md)."""

    metrics_port: int | None = None  # Prometheus text at http(s)://metrics_host:port/metrics
    health_port: int | None = None  # grpc.health.v1.Health
    metrics_host: str | None = None  # default: host
    health_host: str | None = None  # default: host
    # TLS of the metrics and health ports: None follows the Flight port (TLS with [server.tls]);
    # false serves them in plaintext (e.g. health for Kubernetes gRPC probes, which cannot speak TLS)
    metrics_tls: bool | None = None
    health_tls: bool | None = None
    log_format: str = "text"  # or "json": one object per line
    # the web console: pages over HTTP, HTTPS when the Flight port has TLS, with its users, tokens
    # and rights; off unless a port is given
    console_port: int | None = None
    console_host: str | None = None  # default: host
    console_threads: int = 4  # pages built at once; more requests wait for one
    console_timeout_seconds: float = 10.0  # a connection silent this long is closed
    console_page_seconds: float = 30.0  # a table page still being built after this long is refused


#: section name -> its class, in the order of the file and of ``ServerConfig``
SECTION_TYPES: dict[str, type[Any]] = {
    "limits": LimitsSection, "sql": SqlSection, "cache": CacheSection, "relay": RelaySection,
    "cluster": ClusterSection, "tls": TlsSection, "ops": OpsSection,
}
SECTIONS = tuple(SECTION_TYPES)
_PREFIXES = {"sql": "sql_", "tls": "tls_"}
#: flat setting name -> (section, key there): the one table of names
PLACEMENT: dict[str, tuple[str, str]] = {
    f.metadata.get(_FLAT, _PREFIXES.get(section, "") + f.name): (section, f.name)
    for section, kind in SECTION_TYPES.items() for f in dataclasses.fields(kind)
}


def placement(name: str) -> tuple[str, str] | None:
    """The section of the flat setting ``name`` and its key there (``None``: not sectioned)."""
    return PLACEMENT.get(name)


def flattened(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The ``[server]`` table ``doc`` as flat setting name -> value: sections opened, flat keys of
    sectioned settings taken as they are (with a deprecation note).

    Raises:
        ValueError: a section that is not a table, or a key of one that names no setting there.
    """
    keys = {placed: name for name, placed in PLACEMENT.items()}
    flat: dict[str, Any] = {}
    for key, value in doc.items():
        if key in SECTIONS:
            if not isinstance(value, Mapping):
                raise ValueError(f"configuration key {key} must be a table: [server.{key}]")
            unknown = sorted(k for k in value if (key, k) not in keys)
            if unknown:
                raise ValueError(f"unknown configuration keys in [server.{key}]: {', '.join(unknown)}")
            flat.update({keys[key, k]: v for k, v in value.items()})
            continue
        placed = placement(key)
        if placed is not None:
            log.warning("configuration key %s is deprecated at the top of [server]: write it as %s in "
                        "[server.%s] (read as given for now)", key, placed[1], placed[0])
        flat[key] = value
    return flat


__all__ = [
    "PLACEMENT", "SECTIONS", "SECTION_TYPES", "CacheSection", "ClusterSection", "LimitsSection", "OpsSection",
    "RelaySection", "SqlSection", "TlsSection", "flattened", "placement",
]
