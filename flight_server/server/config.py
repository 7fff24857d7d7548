"""Server configuration: defaults, a TOML or JSON config file, and command-line overrides.

Precedence: command line > config file > defaults. An example file is ``deploy/hudi-flight.toml``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import pyarrow as pa
import pyarrow.ipc

from catalog.plan.splits import DEFAULT_TARGET_SPLIT_BYTES, SplitOptions
from flight_server.protocol.wire import DEFAULT_HOST, DEFAULT_PORT, TCP_SCHEME, TLS_SCHEME
from flight_server.server.config_sections import (
    PLACEMENT,
    SECTION_TYPES,
    CacheSection,
    ClusterSection,
    LimitsSection,
    OpsSection,
    RelaySection,
    SqlSection,
    TlsSection,
    flattened,
)
from flight_server.server.engine.sandbox import EngineSettings
from flight_server.server.security.auth import AuthSettings
from flight_server.server.security.limits import Limits, RelayLimits
from flight_server.server.security.policy import DEFAULT_PROTOCOLS, StoragePolicy
from flight_server.server.security.state_files import private_dir
from flight_server.server.security.tls import TlsFiles


def default_state_dir() -> Path:
    """Where the embedded catalog and the generated ticket secret live by default."""
    return Path(os.environ.get("HUDI_FLIGHT_HOME", Path.home() / ".hudi-flight"))


def _toml() -> Any:
    try:
        import tomllib
    except ModuleNotFoundError as err:  # Python 3.10
        raise ValueError("TOML config files need Python 3.11+; use a .json config file") from err
    return tomllib


@dataclass(init=False)
class ServerConfig:
    """Everything ``hudi-flight serve`` can be told: ``[server]`` keys as fields, each section of
    the config file as a section object (``config.sql.timeout_seconds``; ``config_sections``).

    Built with any of its fields, or with the flat names of sectioned settings
    (``ServerConfig(port=..., sql_timeout_seconds=...)``), which go to their sections.
    """

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
    # storage confinement of register-table (docs/flight.md, "Authorization")
    allowed_roots: list[str] = field(default_factory=list)  # besides every warehouse
    namespace_roots: dict[str, list[str]] = field(default_factory=dict)  # namespace -> its own roots (walls)
    allowed_protocols: list[str] = field(default_factory=lambda: list(DEFAULT_PROTOCOLS))
    client_storage_option_keys: list[str] = field(default_factory=list)  # none: clients send no options
    root_storage_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # root URI -> options
    # Arrow IPC buffer compression of do_get streams ("lz4" or "zstd"; None: uncompressed). Fewer
    # bytes to encrypt with TLS; clients decompress by themselves. See bench/secure_scan.py.
    stream_compression: str | None = None
    # the sections ([server.limits], [server.sql], ...)
    limits: LimitsSection = field(default_factory=LimitsSection)
    sql: SqlSection = field(default_factory=SqlSection)
    cache: CacheSection = field(default_factory=CacheSection)
    relay: RelaySection = field(default_factory=RelaySection)
    cluster: ClusterSection = field(default_factory=ClusterSection)
    tls: TlsSection = field(default_factory=TlsSection)
    ops: OpsSection = field(default_factory=OpsSection)

    def __init__(self, **settings: Any) -> None:
        """Fields by name, sectioned settings by their flat names too (applied over a section
        object given with them); every section object is a copy of its own.

        Raises:
            TypeError: a name that is no setting, or a section that is not of its class.
        """
        unknown = sorted(set(settings) - _FIELD_NAMES - PLACEMENT.keys())
        if unknown:
            raise TypeError(f"ServerConfig got unknown settings: {', '.join(unknown)}")
        by_section: dict[str, dict[str, Any]] = {}
        for name, given in settings.items():
            if name in PLACEMENT:
                section, key = PLACEMENT[name]
                by_section.setdefault(section, {})[key] = given
        for f in dataclasses.fields(ServerConfig):
            value: Any = settings[f.name] if f.name in settings else f.default
            if f.name not in settings and callable(f.default_factory):
                value = f.default_factory()
            if f.name in SECTION_TYPES:
                if not isinstance(value, SECTION_TYPES[f.name]):
                    raise TypeError(f"ServerConfig section {f.name} must be a {SECTION_TYPES[f.name].__name__}")
                value = dataclasses.replace(value, **by_section.get(f.name, {}))
            setattr(self, f.name, value)

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
        scheme = TLS_SCHEME if self.tls.cert else TCP_SCHEME
        return f"{scheme}://{self.host}:{self.port}"

    def settings(self) -> Iterator[tuple[str, Any]]:
        """Every setting with its key in the config file: ``[server]`` keys as they are, sectioned
        ones as ``section.key`` (``sql.timeout_seconds``)."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in SECTION_TYPES:
                yield from ((f"{f.name}.{key}", item) for key, item in dataclasses.asdict(value).items())
            else:
                yield f.name, value

    def operations_tls(self, kind: str) -> TlsFiles | None:
        """The TLS files of the ``metrics`` or ``health`` port (``None``: plaintext)."""
        wanted = getattr(self.ops, f"{kind}_tls")
        files = self.tls.files()
        if wanted and files is None:
            raise ValueError(f"{kind}_tls needs tls_cert and tls_key")
        return files if wanted is not False else None

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
            resolved_cache_bytes=self.cache.resolved_path_cache_bytes,
        )

    def relay_limits(self) -> RelayLimits:
        """The bounds of the relay in front of the serving process(es) (``runtime.relay``)."""
        relay = self.relay
        return RelayLimits(
            max_connections=relay.max_connections,
            max_connections_per_peer=relay.max_connections_per_peer,
            handshake_seconds=relay.handshake_seconds,
            idle_seconds=relay.idle_seconds,
            half_open_seconds=relay.half_open_seconds,
            # tickets may be twice max_body_bytes; the rest is protobuf framing
            max_message_bytes=2 * self.limits.max_body_bytes + (64 << 10),
            max_body_bytes_per_connection=relay.max_body_bytes_per_connection,
            max_body_bytes_per_peer=relay.max_body_bytes_per_peer,
            body_memory_bytes=relay.body_memory_bytes,
        )

    def auth_settings(self) -> AuthSettings:
        return AuthSettings(
            self.host, dict(self.tokens), self.insecure, self.auth_cache_seconds, self.token_ttl_seconds,
            self.tls.cert is not None, self.anonymous_read,
        )

    def call_limits(self) -> Limits:
        """The bounds on each call: the ``limits`` section and the footer cache's size."""
        return Limits(footer_cache_bytes=self.cache.footer_cache_bytes, **dataclasses.asdict(self.limits))

    def sql_engine_settings(self) -> EngineSettings:
        """The embedded SQL engine's bounds; it spills only into a private folder of state_dir."""
        return self.sql.engine_settings(str(private_dir(self.state_path / "sql-spill")))

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
        return dataclasses.replace(
            self, ops=dataclasses.replace(self.ops, metrics_port=None, health_port=None, console_port=None))

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
        unknown = sorted(set(overrides) - _FIELD_NAMES - PLACEMENT.keys())
        if unknown:
            raise ValueError(f"unknown configuration keys: {', '.join(unknown)}")
        return dataclasses.replace(self, **{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]

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
            config = config.updated(flattened(doc.get("server", doc)))
        return config.updated(overrides)


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(ServerConfig))

__all__ = ["ServerConfig", "default_state_dir"]
