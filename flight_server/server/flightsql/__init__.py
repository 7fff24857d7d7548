"""Arrow Flight SQL on the service's port (docs/sql.md, "Server-side SQL"): dispatch, catalog metadata,
statements, prepared statements and SQL info. The SQL itself is in :mod:`flight_server.server.sql`."""
