"""The Flight server, in rooms (docs/architecture.md): ``service`` (the RPCs), ``app`` (the
composition root), the front ends ``flightsql`` and ``actions``, the shared query path ``query``
(queries, tickets, wire), and below it ``sql`` (the language), ``engine`` (the SQL engine
behind its process wall), ``cache``, ``security``, ``cluster``, ``ops``,
``config``, ``registry`` and ``errors``; ``runtime`` runs the processes."""

from catalog.optional import check_installed

# Every server module needs these: a missing one is reported once, here, naming the extra.
check_installed(
    "server", "the hudi-flight server",
    "duckdb", "google.protobuf", "grpc", "grpc_health", "jsonschema", "prometheus_client", "sqlalchemy", "sqlglot",
)
