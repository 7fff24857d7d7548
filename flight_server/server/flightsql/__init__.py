"""Arrow Flight SQL on the service's port (interfaces.md section 7): dispatch, catalog metadata,
statements, prepared statements and SQL info. The SQL itself is in :mod:`flight_server.server.sql`."""
