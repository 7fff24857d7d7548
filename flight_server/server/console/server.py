"""The console's HTTP server: cheroot (CherryPy's WSGI server) on its own port and threads.

It listens where ``console_host`` (default: the Flight host) and ``console_port`` say, under the
Flight port's rule (``security.access.check_exposure``: a non-loopback address needs users or
tokens, and TLS, unless ``--insecure``), speaks HTTPS with the Flight port's certificate (and
asks for client certificates when the Flight port does), and is bounded: ``console_threads``
requests are answered at once (more wait in the accept queue), a connection silent for
``console_timeout_seconds`` is closed, request headers are at most 16 KiB and no request may
carry a body. Its errors go to the server's log, never a traceback to stderr.
"""

from __future__ import annotations

import logging
import ssl
import threading
from typing import Any

from cheroot import wsgi
from cheroot.ssl.builtin import BuiltinSSLAdapter

from flight_server.server.console.pages import Pages
from flight_server.server.console.web import create_app
from flight_server.server.security.access import check_exposure, is_loopback
from flight_server.server.security.auth import AuthMiddlewareFactory
from flight_server.server.security.budgets import Budget
from flight_server.server.security.tls import TlsFiles

log = logging.getLogger("flight_server.console")

MAX_HEADER_BYTES = 16 << 10
#: the names a loopback console answers to (``Host`` header), besides the address it listens on
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class _Server(wsgi.Server):
    """cheroot's server, its error log routed to logging without tracebacks."""

    def error_log(self, msg: str = "", level: int = 20, traceback: bool = False) -> None:
        log.log(max(level, logging.INFO), "console server: %s", msg.strip().splitlines()[0] if msg.strip() else "")


def _tls_context(files: TlsFiles) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(files.cert, files.key)
    if files.client_ca:  # mutual TLS, as on the Flight port
        context.load_verify_locations(files.client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def trusted_hosts(host: str) -> list[str] | None:
    """The ``Host`` names a console listening on ``host`` answers: its loopback names when it
    listens on loopback (DNS rebinding cannot reach it), any otherwise."""
    if not is_loopback(host):
        return None
    return sorted({host.strip("[]"), *LOOPBACK_NAMES})


class ConsoleServer:
    """The web console of one serving process (:meth:`start`, :meth:`stop`).

    Args:
        pages: what it shows.
        auth: the Flight port's authentication.
        plans: the budget table pages are built under.
        host, port: where to listen (``port`` 0: any free port).
        tls: the Flight port's TLS files (``None``: plain HTTP).
        insecure: ``--insecure`` (serve a non-loopback address without credentials or TLS).
        threads: requests answered at once.
        timeout_seconds: a silent connection is closed after this long.
        page_seconds: a table page still being built after this long is refused.

    Raises:
        ValueError: a non-loopback address without credentials or TLS (and not ``insecure``).
    """

    def __init__(self, pages: Pages, auth: AuthMiddlewareFactory, plans: Budget, host: str, port: int,
                 tls: TlsFiles | None, insecure: bool, threads: int, timeout_seconds: float,
                 page_seconds: float = 30.0):
        has_credentials = bool(auth.access.token_users) or auth.users.has_users()
        try:
            check_exposure(host, has_credentials, insecure, tls is not None)
        except ValueError as err:
            raise ValueError(f"web console: {err}") from None
        app = create_app(pages, auth, plans, trusted_hosts(host), tls is not None, page_seconds)
        self._server = _Server((host.strip("[]"), port), app, numthreads=max(1, threads),
                               timeout=max(1, int(timeout_seconds)), server_name="hudi-flight console")
        self._server.max_request_header_size = MAX_HEADER_BYTES
        self._server.max_request_body_size = 1  # GET only: a body is refused (413) before it is read
        if tls is not None:
            tls.server_kwargs()  # checks the files, with errors naming the options
            adapter = BuiltinSSLAdapter(tls.cert, tls.key)
            adapter.context = _tls_context(tls)
            self._server.ssl_adapter = adapter
        self.scheme = "https" if tls is not None else "http"
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Listen now (the port is bound when this returns) and answer on a daemon thread."""
        try:
            self._server.prepare()
        except OSError as err:
            raise OSError(f"cannot listen on {self._server.bind_addr} for the web console (address in use?)") from err
        self._thread = threading.Thread(target=self._server.serve, name="hudi-console", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        address: Any = self._server.bind_addr
        return int(address[1])

    def stop(self) -> None:
        """Stop answering (waits for running requests a few seconds at most); again: nothing."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._server.stop()
            thread.join(5)


__all__ = ["ConsoleServer", "trusted_hosts"]
