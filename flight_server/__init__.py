"""hudi-flight's Arrow Flight side: the service, its signed tickets, the Python client, the CLI.

Public entry points: :func:`flight_server.client.connect` (also exported here),
:class:`flight_server.service.HudiFlightServer`, and the ``hudi-flight`` command
(:mod:`flight_server.cli`).
"""

from __future__ import annotations

from .client import HudiFlightClient, connect

__all__ = ["HudiFlightClient", "connect"]
