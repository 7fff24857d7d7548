"""The SQL driver (PEP 249) and the SQLAlchemy dialect over a hudi-flight server."""
