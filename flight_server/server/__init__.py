"""The Flight server, in rooms (docs/architecture.md): ``service`` (the RPCs), ``app`` (the
composition root), the front ends ``flightsql`` and ``actions``, the shared query path ``query``
(queries, tickets, wire), and below it ``sql``, ``cache``, ``security``, ``cluster``, ``ops``,
``config``, ``registry`` and ``errors``; ``runtime`` runs the processes."""
