"""The service's actions (``do_action``): catalog browsing and changes, table info, health.

Each handler takes the validated JSON body (``flight_server.server.query.wire.parse_action``) and the
call (``query.queries.Call``), checks the caller's right through it (catalog changes need
``admin``, table info ``read``, listings show only what the caller may read), and returns a
JSON-serialisable result. Refresh and register need the local change of that name
(``security.access.LOCAL_CHANGES``: ``admin``, or anonymous on a loopback server). Catalog
changes forget the cached rows, rights and table states.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable

from catalog.state import TableState
from catalog.storage import open_table_storage
from flight_server.protocol import wire
from flight_server.server.cluster.membership import Membership
from flight_server.server.config import ServerConfig
from flight_server.server.query.queries import Call
from flight_server.server.registry import check_new_identifier
from flight_server.server.security.policy import StoragePolicy

Body = dict[str, Any]


@dataclass(frozen=True)
class ActionServices:
    """What the actions work with besides the call."""

    config: ServerConfig
    policy: StoragePolicy
    started: float  # epoch seconds
    cluster: Membership | None  # the live workers, on a coordinator
    rescan: Callable[[], int]  # registers every warehouse's tables; returns how many there are


Handler = Callable[[ActionServices, Body, Call], Any]


def list_namespaces(services: ActionServices, body: Body, call: Call) -> list[str]:
    return call.visible_namespaces(call.namespaces())


def list_tables(services: ActionServices, body: Body, call: Call) -> list[dict[str, Any]]:
    entries = call.entries(body.get("namespace"))
    readable = set(call.readable([e.identifier for e in entries]))
    return [e.to_json() for e in entries if e.identifier in readable]


def register_table(services: ActionServices, body: Body, call: Call) -> dict[str, Any]:
    # a local anonymous caller may add names; re-pointing a served name needs admin on it
    call.authorize("admin" if body.get("replace") else "register", body["table"])
    properties = body.get("properties") or {}
    call.check_properties(properties)
    policy = services.policy
    # registers in every namespace (still under the allowed roots), else as an admin of the namespace only
    catalog_admin = call.allowed("register")
    uri, client_options = policy.check_in_namespace(
        check_new_identifier(body["table"])[0], body["uri"], body.get("storage_options"), catalog_admin)
    state = TableState.load(open_table_storage(uri, policy.options_for(uri, client_options) or None))
    entry = call.register_table(body["table"], uri, client_options, body.get("properties"), body.get("replace", False))
    return {**entry.to_json(), "table_type": state.config.table_type, "table_version": state.config.table_version}


def unregister_table(services: ActionServices, body: Body, call: Call) -> dict[str, Any]:
    call.authorize("admin", body["table"])
    call.unregister_table(body["table"])
    return {"table": body["table"], "unregistered": True}


def refresh_table(services: ActionServices, body: Body, call: Call) -> dict[str, Any]:
    call.authorize("refresh", body.get("table"))
    if "table" not in body:
        return {"tables": _rescan(services, call)}
    call.forget(body["table"])
    if services.config.warehouses and call.allowed("refresh") \
            and body["table"] not in {e.identifier for e in call.entries()}:
        _rescan(services, call)  # a new table folder: served now, not after the next timed scan
    timeline = call.open(body["table"]).state.timeline
    return {"table": body["table"], "latest_instant": timeline[-1].requested_time if timeline else None}


def _rescan(services: ActionServices, call: Call) -> int:
    found = services.rescan()
    call.forget()
    return found


def table_info(services: ActionServices, body: Body, call: Call) -> dict[str, Any]:
    call.authorize("read", body["table"])
    table = call.open(body["table"])  # the current timeline: one listing when cached
    state, config = table.state, table.state.config
    return {
        **table.entry.to_json(),
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


def health(services: ActionServices, body: Body, call: Call) -> dict[str, Any]:
    call.authorize("read")
    doc: dict[str, Any] = {
        "status": "ok",
        "tables": len(call.entries()),
        "uptime_seconds": round(time.time() - services.started, 3),
        "location": services.config.location,
        "pid": os.getpid(),  # which serving process answered (serve --processes N)
        "role": services.config.cluster.role or "server",
    }
    if services.cluster is not None:
        doc["workers"] = services.cluster.live()
    return doc


def cluster_heartbeat(services: ActionServices, body: Body, call: Call) -> dict[str, Any]:
    """A worker's signed heartbeat (flight_server.server.cluster.worker); only a coordinator takes them."""
    if services.cluster is None:
        raise NotImplementedError("this server is not a cluster coordinator (--role coordinator)")
    return services.cluster.accept(body["token"])


#: action type -> handler (the bodies' schemas and descriptions are in ``wire.ACTIONS``)
HANDLERS: dict[str, Handler] = {
    wire.LIST_NAMESPACES: list_namespaces,
    wire.LIST_TABLES: list_tables,
    wire.REGISTER_TABLE: register_table,
    wire.UNREGISTER_TABLE: unregister_table,
    wire.REFRESH_TABLE: refresh_table,
    wire.TABLE_INFO: table_info,
    wire.HEALTH: health,
    wire.CLUSTER_HEARTBEAT: cluster_heartbeat,
}

__all__ = ["HANDLERS", "ActionServices", "Handler"]
