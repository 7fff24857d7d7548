"""The service's actions (``do_action``): catalog browsing and changes, table info, health.

Each handler takes the validated JSON body (``flight_server.server.wire.parse_action``) and
returns a JSON-serialisable result.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Protocol

from catalog.state import TableState
from catalog.storage import open_table_storage
from flight_server.server.config import ServerConfig
from flight_server.server.limits import Limits
from flight_server.server.policy import StoragePolicy
from flight_server.server.registry import Registry, TableEntry
from flight_server.server.tables import TableCache


class ActionContext(Protocol):
    """What the actions need from the server."""

    registry: Registry
    tables: TableCache
    config: ServerConfig
    policy: StoragePolicy
    limits: Limits
    started: float

    def scan_warehouses(self) -> int: ...

    def open_table(self, identifier: str) -> tuple[TableEntry, TableState]: ...


Handler = Callable[[ActionContext, dict], Any]


def list_namespaces(server: ActionContext, body: dict) -> list[str]:
    return server.registry.list_namespaces()


def list_tables(server: ActionContext, body: dict) -> list[dict]:
    return [e.to_json() for e in server.registry.list_tables(body.get("namespace"))]


def register_table(server: ActionContext, body: dict) -> dict:
    properties = body.get("properties") or {}
    server.limits.check_properties(properties, len(json.dumps(properties)))
    uri, client_options = server.policy.check(body["uri"], body.get("storage_options"))
    state = TableState.load(open_table_storage(uri, server.policy.options_for(uri, client_options) or None))
    entry = server.registry.register_table(
        body["table"], uri, client_options, body.get("properties"), body.get("replace", False)
    )
    server.tables.drop(entry.identifier)
    return {**entry.to_json(), "table_type": state.config.table_type, "table_version": state.config.table_version}


def unregister_table(server: ActionContext, body: dict) -> dict:
    server.registry.unregister_table(body["table"])
    server.tables.drop(body["table"])
    return {"table": body["table"], "unregistered": True}


def refresh_table(server: ActionContext, body: dict) -> dict:
    if "table" not in body:
        return {"tables": server.scan_warehouses()}
    server.tables.drop(body["table"])
    _, state = server.open_table(body["table"])
    timeline = state.timeline
    return {"table": body["table"], "latest_instant": timeline[-1].requested_time if timeline else None}


def table_info(server: ActionContext, body: dict) -> dict:
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


def health(server: ActionContext, body: dict) -> dict:
    return {
        "status": "ok",
        "tables": len(server.registry.list_tables()),
        "uptime_seconds": round(time.time() - server.started, 3),
        "location": server.config.location,
    }


#: action type -> handler (the bodies' schemas and descriptions are in ``wire.ACTIONS``)
HANDLERS: dict[str, Handler] = {
    "list-namespaces": list_namespaces,
    "list-tables": list_tables,
    "register-table": register_table,
    "unregister-table": unregister_table,
    "refresh-table": refresh_table,
    "table-info": table_info,
    "health": health,
}

__all__ = ["HANDLERS"]
