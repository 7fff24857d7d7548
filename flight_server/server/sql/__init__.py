"""Server-side SQL: parsing and planning (sqlglot) and the locked-down embedded engine (DuckDB)."""
