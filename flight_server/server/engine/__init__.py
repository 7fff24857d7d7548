"""The SQL engine: a locked-down DuckDB that runs in engine processes, and the sandbox
(:mod:`.sandbox`) through which the serving process reaches it."""
