"""The composition root: every part of one serving process, built once from its configuration.

:func:`compose` builds the catalog (registry and its cached rows), the ticket signer and codec,
the users and the rights, the caches (the SQL room's too: :func:`sql_statements`), the query
path (:class:`~.query.queries.Queries`) and the front ends (Flight SQL, the actions);
``service.HudiFlightServer`` only answers RPCs with them.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow.flight as flight

from catalog.format.log_cache import DecodedLogBlocks
from catalog.format.row_groups import DecodedRowGroups
from catalog.lru import CacheListener
from catalog.plan.dataset import Fragments
from catalog.plan.splits import FooterCache
from flight_server.server.actions import ActionServices
from flight_server.server.cache.disk_cache import DiskCache
from flight_server.server.cache.entries import RegistryCache
from flight_server.server.cache.split_cache import SplitResultCache
from flight_server.server.cache.tables import TableCache
from flight_server.server.cluster.membership import HEARTBEAT_PURPOSE, Membership
from flight_server.server.config import ServerConfig
from flight_server.server.engine.sandbox import AdmissionListener, SandboxedEngine, result_schemas
from flight_server.server.flightsql.dispatch import FlightSqlService
from flight_server.server.flightsql.flight_infos import FlightInfos
from flight_server.server.flightsql.single_endpoint import SINGLE_ENDPOINT_KEY, SingleEndpointMiddlewareFactory
from flight_server.server.flightsql.statements import Statements
from flight_server.server.flightsql.table_facts import TableFacts
from flight_server.server.ops.operations import Operations
from flight_server.server.query.placement import Placement
from flight_server.server.query.queries import Queries
from flight_server.server.query.streams import COMPRESSION_KEY, CompressionMiddlewareFactory
from flight_server.server.query.tickets import TicketCodec
from flight_server.server.registry import Registry
from flight_server.server.security.access import Access
from flight_server.server.security.auth import MIDDLEWARE_KEY as AUTH_KEY
from flight_server.server.security.auth import AuthMiddlewareFactory, authentication
from flight_server.server.security.budgets import Budget, MemoryBudget
from flight_server.server.security.limits import Limits
from flight_server.server.security.policy import StoragePolicy
from flight_server.server.security.state_files import private_dir, private_sqlite
from flight_server.server.security.tickets import TicketSigner, configured_signer
from flight_server.server.security.users import UserStore
from flight_server.server.sql.analyses import Analyses

if TYPE_CHECKING:
    from flight_server.server.console.server import ConsoleServer

log = logging.getLogger(__name__)


@dataclass
class App:
    """The parts of one serving process (see :func:`compose`)."""

    config: ServerConfig
    ops: Operations
    registry: Registry
    signer: TicketSigner
    users: UserStore
    auth: AuthMiddlewareFactory
    access: Access
    limits: Limits
    policy: StoragePolicy
    tables: TableCache
    split_results: SplitResultCache
    streams: Budget  # concurrent do_get streams per user, connection and process
    plans: Budget  # concurrent plannings likewise
    stream_memory: MemoryBudget  # record batches in flight
    cluster: Membership | None
    queries: Queries
    flight_sql: FlightSqlService
    actions: ActionServices
    discover: bool
    stop: threading.Event
    console: ConsoleServer | None = None  # the web console (console_port), started with the rest

    def middleware(self) -> dict[str, flight.ServerMiddlewareFactory]:
        """The Flight middleware of every call: authentication, compression, call log."""
        return {
            AUTH_KEY: self.auth,
            COMPRESSION_KEY: CompressionMiddlewareFactory(),
            SINGLE_ENDPOINT_KEY: SingleEndpointMiddlewareFactory(),
            **self.ops.middleware(),
        }

    def server_kwargs(self, tls_in_front: bool = False) -> dict[str, Any]:
        """``FlightServerBase`` keyword arguments: middleware and TLS (none when the relay in
        front of the process ends TLS: ``tls_in_front``)."""
        kwargs: dict[str, Any] = {"middleware": self.middleware()}
        tls = self.config.tls.files()
        if tls is not None and not tls_in_front:
            kwargs.update(tls.server_kwargs())
        return kwargs

    def scan_warehouses(self) -> int:
        """Register the tables of every configured warehouse; returns how many there are."""
        return self.actions.rescan()

    def load(self) -> None:
        """The first scan of the warehouses (when discovering). The Flight port listens only after
        it (``service.HudiFlightServer``), so no call right after start sees a catalog still filling."""
        if self.config.warehouses and self.discover:
            self.scan_warehouses()

    def start(self) -> None:
        """Once the port listens: the warehouses' re-scan timer (when discovering), operations."""
        if self.config.warehouses and self.discover and self.config.refresh_interval_seconds > 0:
            threading.Thread(target=self._rescan_loop, name="hudi-warehouse-scan", daemon=True).start()
        self.ops.start()
        if self.console is not None:
            self.console.start()

    def close(self) -> None:
        """Stop what :meth:`start` started besides the RPCs: the web console, then operations."""
        if self.console is not None:
            self.console.stop()
        self.ops.close()

    def _rescan_loop(self) -> None:
        while not self.stop.wait(self.config.refresh_interval_seconds):
            try:
                self.scan_warehouses()
            except Exception:  # a transient storage error must not kill the timer
                log.exception("warehouse re-scan failed")


def _scan_warehouses(config: ServerConfig, policy: StoragePolicy, catalog: RegistryCache) -> int:
    found = 0
    for warehouse in config.warehouses:
        options = policy.options_for(warehouse, None)
        found += len(catalog.registry.discover(warehouse, options or None, store_options=False))
    # Cached table states stay: they are keyed by (table, URI) and checked on every plan.
    catalog.forget()
    return found


def sql_statements(
    config: ServerConfig, limits: Limits, listener: CacheListener | None, admission: AdmissionListener | None = None
) -> Statements:
    """The Flight SQL statements with the SQL room's caches, sized by the ``sql_*_cache_bytes``
    settings and reporting to ``listener``, and the fair queue of SQL work reporting to
    ``admission`` (both: the metrics)."""
    schemas = result_schemas(config.sql.result_schema_cache_bytes, listener)
    return Statements(
        SandboxedEngine(config.sql_engine_settings(), schemas, admission),
        Analyses(limits, config.sql.analysis_cache_bytes, listener),
        Fragments(config.sql.fragment_cache_bytes, listener),
        TableFacts(config.sql.table_facts_cache_bytes, listener),
        FlightInfos(config.sql.flight_info_cache_bytes, listener),
    )


def compose(
    config: ServerConfig | None = None,
    registry: Registry | None = None,
    signer: TicketSigner | None = None,
    discover: bool = True,
) -> App:
    """Build every part of a serving process.

    Args:
        config: server settings (defaults when omitted).
        registry: the catalog; built from ``config.resolved_catalog_url`` when omitted.
        signer: ticket signer; built from the configured or persisted secret when omitted.
        discover: scan the warehouses at :meth:`App.start` and on the timer (``False``: workers,
            and all but one process of ``serve --processes N``).

    Raises:
        ValueError: an exposed address without credentials, or an invalid setting.
    """
    config = config or ServerConfig()
    private_dir(config.state_path)
    ops = Operations(config)
    if registry is None:
        private_sqlite(config.resolved_catalog_url)
        registry = Registry(config.resolved_catalog_url)
    if signer is None:
        signer = configured_signer(config.secret, config.resolved_secret_file, config.ticket_ttl_seconds)
    users = UserStore(registry.engine)
    auth = authentication(config.auth_settings(), users, signer)  # refuses an exposed server without credentials
    limits = config.call_limits()
    policy = config.storage_policy()
    disk = config.cache.disk_cache_bytes
    tables = TableCache(
        config.cache.table_cache_bytes,
        policy.options_for,
        ops.cache_listener,
        DiskCache(config.state_path / "disk-cache", disk, ops.cache_listener) if disk else None,
        policy.check_registered,
        config.cache.max_staleness_ms / 1000.0,
        policy.forget,
    )
    split_results = SplitResultCache(config.cache.split_cache_bytes, config.cache.split_cache_entry_bytes,
                                     ops.cache_listener)
    cluster = None
    if config.cluster.role == "coordinator":
        cluster = Membership(
            signer.derived(HEARTBEAT_PURPOSE),
            config.cluster.heartbeat_timeout_seconds,
            config.state_path / "workers",  # shared by the coordinator's processes
        )
    catalog = RegistryCache(registry, config.cache.catalog_cache_seconds)
    queries = Queries(
        catalog,
        tables,
        auth.access,
        TicketCodec(signer, limits, config.cache.issued_ticket_cache_bytes, ops.cache_listener),
        limits,
        config.split_options(),
        FooterCache(limits.footer_cache_bytes, ops.cache_listener),
        Placement(list(config.locations), cluster),
        split_results,
        ops,
        DecodedRowGroups(config.cache.point_read_cache_bytes, ops.cache_listener),
        DecodedLogBlocks(config.cache.log_block_cache_bytes, ops.cache_listener),
    )
    rescan = functools.partial(_scan_warehouses, config, policy, catalog)
    plans = Budget("plans", limits.max_plans_per_user, limits.max_plans_per_connection, limits.max_plans_total)
    return App(
        config=config,
        ops=ops,
        registry=registry,
        signer=signer,
        users=users,
        auth=auth,
        access=auth.access,
        limits=limits,
        policy=policy,
        tables=tables,
        split_results=split_results,
        streams=Budget("streams", limits.max_streams_per_user, limits.max_streams_per_connection,
                       limits.max_streams_total, queue_seconds=limits.stream_queue_seconds),
        plans=plans,
        stream_memory=MemoryBudget(limits.stream_memory_bytes),
        cluster=cluster,
        queries=queries,
        flight_sql=FlightSqlService(sql_statements(config, limits, ops.cache_listener, ops.admission_listener)),
        actions=ActionServices(config, policy, time.time(), cluster, rescan),
        discover=discover,
        stop=threading.Event(),
        console=_console(config, queries, auth, plans, ops),
    )


def _console(config: ServerConfig, queries: Queries, auth: AuthMiddlewareFactory, plans: Budget,
             ops: Operations) -> ConsoleServer | None:
    """The web console when ``console_port`` is set (Flask and cheroot are loaded only then)."""
    if config.ops.console_port is None:
        return None
    from flight_server.server.console.pages import Pages
    from flight_server.server.console.server import ConsoleServer

    return ConsoleServer(Pages(queries, ops.live), auth, plans, config.ops.console_host or config.host,
                         config.ops.console_port, config.tls.files(), config.insecure, config.ops.console_threads,
                         config.ops.console_timeout_seconds, config.ops.console_page_seconds)


__all__ = ["App", "compose", "sql_statements"]
