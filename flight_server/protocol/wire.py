"""The hudi-flight wire shared by the server and its clients, spelled once: the default address,
the URI schemes, the action names and the keys of a query command (its full shape is
``schemas/command.schema.json``)."""

from __future__ import annotations

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8815
PLAIN_SCHEME = "grpc"
TCP_SCHEME = "grpc+tcp"  # what pyarrow calls a plain location
TLS_SCHEME = "grpc+tls"
PLAIN_SCHEMES = (PLAIN_SCHEME, TCP_SCHEME)
SCHEMES = (*PLAIN_SCHEMES, TLS_SCHEME)
DEFAULT_URI = f"{PLAIN_SCHEME}://{DEFAULT_HOST}:{DEFAULT_PORT}"
#: the SQL name of a merge-on-read table's read-optimized view: ``<table>_ro`` (as Hive sync names it)
RO_SUFFIX = "_ro"

# -- DoAction types ----------------------------------------------------------------------------
LIST_NAMESPACES = "list-namespaces"
LIST_TABLES = "list-tables"
REGISTER_TABLE = "register-table"
UNREGISTER_TABLE = "unregister-table"
REFRESH_TABLE = "refresh-table"
TABLE_INFO = "table-info"
HEALTH = "health"
CLUSTER_HEARTBEAT = "cluster-heartbeat"

# -- query command (FlightDescriptor.for_command) ----------------------------------------------
#: the key naming the table; the others are the fields of ``catalog.ReadOptions``, and
#: ``aggregates`` (answered from the table's metadata: ``catalog.plan.aggregates``)
TABLE_KEY = "table"
AGGREGATES_KEY = "aggregates"


def uri(host: str, port: int, tls: bool = False) -> str:
    """The URI of a server at ``host:port``."""
    return f"{TLS_SCHEME if tls else PLAIN_SCHEME}://{host}:{port}"


__all__ = [
    "AGGREGATES_KEY",
    "CLUSTER_HEARTBEAT",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_URI",
    "HEALTH",
    "LIST_NAMESPACES",
    "LIST_TABLES",
    "PLAIN_SCHEME",
    "PLAIN_SCHEMES",
    "REFRESH_TABLE",
    "REGISTER_TABLE",
    "SCHEMES",
    "TABLE_INFO",
    "TABLE_KEY",
    "TCP_SCHEME",
    "TLS_SCHEME",
    "UNREGISTER_TABLE",
    "uri",
]
