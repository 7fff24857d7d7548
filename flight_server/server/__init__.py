"""The Flight server: service (RPCs), actions, wire format, tickets, registry, config, errors, serve."""

from catalog.optional import check_installed

# Every server module needs these: a missing one is reported once, here, naming the extra.
check_installed(
    "server", "the hudi-flight server",
    "duckdb", "google.protobuf", "grpc", "grpc_health", "jsonschema", "prometheus_client", "sqlalchemy", "sqlglot",
)
