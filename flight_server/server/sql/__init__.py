"""Server-side SQL, the language: tokens and bounds, parsing, refusals, analyses and pushdown
(sqlglot). The engine that runs it is :mod:`flight_server.server.engine`."""
