"""The sections of a config file: ``[server.limits]``, ``[server.sql]``, ``[server.cache]``,
``[server.relay]``, ``[server.cluster]``, ``[server.tls]`` and ``[server.ops]`` group
``ServerConfig``'s settings by what they are about (docs/flight.md, "Configuration file").

A setting's section and its key there follow from its name (:func:`placement`): ``sql_*``,
``tls_*`` and ``relay_*`` settings lose the prefix in their section (``[server.sql]
memory_limit`` is ``sql_memory_limit``), the others keep their names. Settings of no section
(address, warehouses, catalog, secrets, tokens, rights and their cache, splits) stay ``[server]``
keys. A
sectioned setting still read as a flat ``[server]`` key (the layout before sections) works, with a
deprecation note in the log naming where it belongs now.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Iterable, Mapping

from flight_server.server.security.limits import Limits

log = logging.getLogger("flight_server")

SECTIONS = ("limits", "sql", "cache", "relay", "cluster", "tls", "ops")
#: sections whose settings share a prefix their keys drop
_PREFIXED = {"sql_": "sql", "tls_": "tls", "relay_": "relay"}
_RELAY = frozenset({"max_connections", "max_connections_per_peer", "max_body_bytes_per_connection",
                    "max_body_bytes_per_peer", "body_memory_bytes"})
_CLUSTER = frozenset({"processes", "process_endpoints", "process_ports", "role", "coordinator", "advertise",
                      "heartbeat_interval_seconds", "heartbeat_timeout_seconds", "coordinator_tls_root_certs"})
_OPS_PREFIXES = ("metrics_", "health_", "console_")
_CACHE_SUFFIXES = ("_cache_bytes", "_cache_seconds", "_cache_entry_bytes")
_LIMITS = frozenset(f.name for f in dataclasses.fields(Limits))


def placement(name: str) -> tuple[str, str] | None:
    """The section of the setting ``name`` and its key there (``None``: a ``[server]`` key)."""
    for prefix, section in _PREFIXED.items():
        if name.startswith(prefix):
            return section, name[len(prefix):]
    if name in _RELAY:
        return "relay", name
    if name in _CLUSTER:
        return "cluster", name
    if name.startswith(_OPS_PREFIXES) or name == "log_format":
        return "ops", name
    if (name.endswith(_CACHE_SUFFIXES) or name == "max_staleness_ms") and name != "auth_cache_seconds":
        return "cache", name
    if name in _LIMITS:
        return "limits", name
    return None


def flattened(doc: Mapping[str, Any], settings: Iterable[str]) -> dict[str, Any]:
    """The ``[server]`` table ``doc`` as setting name -> value: sections opened, flat keys of
    sectioned settings taken as they are (with a deprecation note).

    Raises:
        ValueError: a key of a section that names no setting there.
    """
    known = set(settings)
    keys = {placed: name for name in known if (placed := placement(name)) is not None}
    flat: dict[str, Any] = {}
    for key, value in doc.items():
        if key in SECTIONS and isinstance(value, Mapping):
            unknown = sorted(k for k in value if (key, k) not in keys)
            if unknown:
                raise ValueError(f"unknown configuration keys in [server.{key}]: {', '.join(unknown)}")
            flat.update({keys[key, k]: v for k, v in value.items()})
            continue
        placed = placement(key) if key in known else None
        if placed is not None:
            log.warning("configuration key %s is deprecated at the top of [server]: write it as %s in "
                        "[server.%s] (read as given for now)", key, placed[1], placed[0])
        flat[key] = value
    return flat


__all__ = ["SECTIONS", "flattened", "placement"]
