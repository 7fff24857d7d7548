"""The service's actions (``do_action``): catalog browsing and changes, table info, health.

Each handler takes the validated JSON body (``flight_server.server.query.wire.parse_action``) and the
call context, checks the caller's right through the server's ``authorize``/``readable`` (catalog
changes need ``admin``, table info ``read``, listings show only what the caller may read), and
returns a JSON-serialisable result.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Protocol

import pyarrow.flight as flight

from catalog.state import TableState
from catalog.storage import open_table_storage
from flight_server.server.cache.tables import TableCache
from flight_server.server.cluster.membership import Membership
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry, TableEntry, parse_identifier
from flight_server.server.security.access import Access
from flight_server.server.security.limits import Limits
from flight_server.server.security.policy import StoragePolicy


class ActionContext(Protocol):
    """What the actions need from the server."""

    registry: Registry
    tables: TableCache
    config: ServerConfig
    policy: StoragePolicy
    access: Access
    limits: Limits
    started: float
    cluster: Membership | None

    def scan_warehouses(self) -> int: ...

    def open_table(self, identifier: str) -> tuple[TableEntry, TableState]: ...

    def authorize(self, context: flight.ServerCallContext, right: str, table: str | None = None) -> str: ...

    def readable(self, context: flight.ServerCallContext, tables: list[str]) -> list[str]: ...

    def visible_namespaces(self, context: flight.ServerCallContext, namespaces: list[str]) -> list[str]: ...


Handler = Callable[[ActionContext, dict, flight.ServerCallContext], Any]


def list_namespaces(server: ActionContext, body: dict, context: flight.ServerCallContext) -> list[str]:
    return server.visible_namespaces(context, server.registry.list_namespaces())


def list_tables(server: ActionContext, body: dict, context: flight.ServerCallContext) -> list[dict]:
    entries = server.registry.list_tables(body.get("namespace"))
    readable = set(server.readable(context, [e.identifier for e in entries]))
    return [e.to_json() for e in entries if e.identifier in readable]


def register_table(server: ActionContext, body: dict, context: flight.ServerCallContext) -> dict:
    user = server.authorize(context, "admin", body["table"])
    properties = body.get("properties") or {}
    server.limits.check_properties(properties, len(json.dumps(properties)))
    namespace = parse_identifier(body["table"])[0]
    catalog_admin = server.access.allowed(user, "admin")
    uri, client_options = server.policy.check_in_namespace(
        namespace, body["uri"], body.get("storage_options"), catalog_admin)
    state = TableState.load(open_table_storage(uri, server.policy.options_for(uri, client_options) or None))
    entry = server.registry.register_table(
        body["table"], uri, client_options, body.get("properties"), body.get("replace", False)
    )
    server.tables.drop(entry.identifier)
    return {**entry.to_json(), "table_type": state.config.table_type, "table_version": state.config.table_version}


def unregister_table(server: ActionContext, body: dict, context: flight.ServerCallContext) -> dict:
    server.authorize(context, "admin", body["table"])
    server.registry.unregister_table(body["table"])
    server.tables.drop(body["table"])
    return {"table": body["table"], "unregistered": True}


def refresh_table(server: ActionContext, body: dict, context: flight.ServerCallContext) -> dict:
    server.authorize(context, "admin", body.get("table"))
    if "table" not in body:
        return {"tables": server.scan_warehouses()}
    server.tables.drop(body["table"])
    _, state = server.open_table(body["table"])
    timeline = state.timeline
    return {"table": body["table"], "latest_instant": timeline[-1].requested_time if timeline else None}


def table_info(server: ActionContext, body: dict, context: flight.ServerCallContext) -> dict:
    server.authorize(context, "read", body["table"])
    entry, state = server.open_table(body["table"])  # the current timeline: one listing when cached
    config = state.config
    return {
        **entry.to_json(),
        "table_type": config.table_type,
        "table_version": config.table_version,
        "record_key_fields": list(config.record_key_fields),
        "partition_fields": list(config.partition_fields),
        "schema": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in state.schema],
        "arrow_schema": state.schema.serialize().to_pybytes().hex(),
        "timeline": [
            {"requested_time": i.requested_time, "completion_time": i.completion_time, "action": i.action}
            for i in state.timeline
        ],
    }


def health(server: ActionContext, body: dict, context: flight.ServerCallContext) -> dict:
    server.authorize(context, "read")
    doc = {
        "status": "ok",
        "tables": len(server.registry.list_tables()),
        "uptime_seconds": round(time.time() - server.started, 3),
        "location": server.config.location,
        "pid": os.getpid(),  # which serving process answered (serve --processes N)
        "role": server.config.role or "server",
    }
    if server.cluster is not None:
        doc["workers"] = server.cluster.live()
    return doc


def cluster_heartbeat(server: ActionContext, body: dict, context: flight.ServerCallContext) -> dict:
    """A worker's signed heartbeat (flight_server.server.cluster.worker); only a coordinator takes them."""
    if server.cluster is None:
        raise NotImplementedError("this server is not a cluster coordinator (--role coordinator)")
    return server.cluster.accept(body["token"])


#: action type -> handler (the bodies' schemas and descriptions are in ``wire.ACTIONS``)
HANDLERS: dict[str, Handler] = {
    "list-namespaces": list_namespaces,
    "list-tables": list_tables,
    "register-table": register_table,
    "unregister-table": unregister_table,
    "refresh-table": refresh_table,
    "table-info": table_info,
    "health": health,
    "cluster-heartbeat": cluster_heartbeat,
}

__all__ = ["HANDLERS"]
