"""hudi-flight's Arrow Flight side: the server, the clients and the ``hudi-flight`` command.

Rooms: ``server/`` (the Flight service, its wire format, tickets, registry, config),
``client/`` (the Python client, the Spark source, the SQL driver and SQLAlchemy dialect) and
``cli/``. Public entry points: :func:`flight_server.connect`, :class:`HudiFlightClient`,
``flight_server.spark.HudiFlightDataSource`` and the ``hudi-flight`` command.
"""

from __future__ import annotations

from flight_server.client.session import HudiFlightClient, connect

__all__ = ["HudiFlightClient", "connect"]
