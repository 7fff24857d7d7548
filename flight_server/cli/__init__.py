"""The ``hudi-flight`` command: serve, talk to a running server, generate tables, demo."""

from flight_server.cli.main import main

__all__ = ["main"]
