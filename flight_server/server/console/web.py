"""The console's web application (Flask): routes, who is asking, what every response carries.

Requests are read-only ``GET``/``HEAD`` (anything else is refused), authenticated like Flight
calls (``security.auth``: basic credentials on every request, or a bearer or static token;
anonymous where the server allows it) and answered with pages built by :class:`~.pages.Pages`,
rendered by Jinja with autoescaping (table names, partition values, properties are untrusted).
Every response forbids scripts, frames and foreign resources (a strict Content-Security-Policy:
the pages have no script, the charts are server-side SVG) and is not cached. Table pages are
built under the user's share of concurrent plans (``max_plans_per_user``), as Flight planning is.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from typing import Any, Callable

import pyarrow.flight as flight
from flask import Flask, Response, abort, g, render_template, request
from werkzeug.exceptions import HTTPException, SecurityError

from catalog.meta.units import human_age, human_bytes
from flight_server.server.console.pages import NoSuchTable, Pages
from flight_server.server.errors import reason, translated
from flight_server.server.query.queries import OpenTable
from flight_server.server.security.auth import AuthMiddlewareFactory
from flight_server.server.security.budgets import Budget, CallKeys, ServerBusyError
from flight_server.server.security.limits import Deadline, LimitExceededError
from flight_server.server.security.users import ANONYMOUS

log = logging.getLogger("flight_server.console")

#: sent with every response (the pages have no script and load only the console's stylesheet)
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}
REALM = 'Basic realm="hudi-flight", charset="UTF-8"'
#: how often the live queries page reloads itself (a meta refresh: no script)
LIVE_REFRESH_SECONDS = 5


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if moment is not None else ""


def _status_of(err: Exception) -> int:
    """The HTTP status of an error the project maps to a Flight status (``errors.translated``)."""
    for kind, status in ((flight.FlightUnauthenticatedError, 401), (flight.FlightUnauthorizedError, 403),
                         (flight.FlightTimedOutError, 504), (flight.FlightUnavailableError, 503),
                         (KeyError, 404), (ValueError, 400), (NotImplementedError, 501)):
        if isinstance(err, kind):
            return status
    return 500


def create_app(pages: Pages, auth: AuthMiddlewareFactory, plans: Budget, trusted_hosts: list[str] | None,
               tls: bool, page_seconds: float = 30.0) -> Flask:
    """The console's Flask application.

    Args:
        pages: what the pages show.
        auth: the Flight server's authentication (users, tokens, anonymous rule).
        plans: the concurrent-plans budget table pages are built under.
        trusted_hosts: the ``Host`` names answered (``None``: any); a loopback console answers
            only its loopback names, so a page of another site cannot reach it by DNS rebinding.
        tls: served over HTTPS (then browsers are told to keep to it).
        page_seconds: a table page still being built after this long is refused
            (``console_page_seconds``; its steps check the deadline as they go).
    """
    app = Flask(__name__)
    app.config.update(TRUSTED_HOSTS=trusted_hosts, MAX_CONTENT_LENGTH=0, TEMPLATES_AUTO_RELOAD=False)
    app.jinja_env.filters.update(bytes=human_bytes, when=_when,
                                 age=lambda seconds: human_age(timedelta(seconds=seconds)))
    headers = dict(SECURITY_HEADERS)
    if tls:
        headers["Strict-Transport-Security"] = "max-age=31536000"

    @app.before_request
    def who_asks() -> None:
        g.started = time.perf_counter()
        g.user = None
        if request.method not in ("GET", "HEAD"):
            abort(405)
        if request.endpoint not in ("static", "favicon"):  # public: the stylesheet; every page needs a caller
            g.user = auth.http_user(request.headers.get("Authorization"))

    @app.after_request
    def secured(response: Response) -> Response:
        response.headers.update(headers)
        if response.status_code == 401:
            response.headers["WWW-Authenticate"] = REALM
        log.info("console %s %s %s", request.method, request.path, response.status_code, extra={"call": {
            "method": f"console {request.method}", "path": request.path[:200], "status": response.status_code,
            "user": g.get("user"), "duration_ms": round((time.perf_counter() - g.get("started", 0)) * 1000, 3),
        }})
        return response

    @app.errorhandler(Exception)
    def failed(err: Exception) -> tuple[str, int, dict[str, str]] | HTTPException:
        if isinstance(err, SecurityError):  # a Host this console does not answer: before routing, no page
            return "untrusted Host header\n", 400, {"Content-Type": "text/plain; charset=utf-8"}
        if isinstance(err, HTTPException):
            if err.code and err.code < 500:
                return _error_page(err.code, err.description or err.name)
            return err
        if isinstance(err, NoSuchTable):
            return _error_page(404, str(err))
        public = translated(err)  # logs what is unexpected; no traceback or path in the message
        extra = {"Retry-After": f"{max(1, round(err.retry_after))}"} if isinstance(err, ServerBusyError) else {}
        status = 503 if isinstance(err, LimitExceededError) else _status_of(public)  # a bound of the server's
        return _error_page(status, reason(public), extra)

    def _error_page(status: int, message: str, extra: dict[str, str] | None = None) -> tuple[str, int, dict[str, str]]:
        return render_template("error.html", status=status, message=message, user=g.get("user")), status, extra or {}

    def _table_page(build: Callable[[OpenTable, Deadline], Any], template: str, namespace: str, name: str) -> str:
        identifier = f"{namespace}.{name}"
        user = g.user
        keys = CallKeys(None if user == ANONYMOUS else user, f"console {request.remote_addr}")
        deadline = Deadline("console_page_seconds", page_seconds, "the page took longer to build")
        with plans.held(keys):
            table = pages.open(user, identifier)
            with table.paths_hidden():
                page = build(table, deadline)
        return render_template(template, user=user, entry=table.entry, page=page, tab=template.split(".")[0])

    @app.get("/favicon.ico")
    def favicon() -> tuple[str, int]:
        return "", 204  # browsers ask for one; there is none

    @app.get("/")
    def index() -> str:
        return render_template("index.html", user=g.user, namespaces=pages.namespaces(g.user),
                               admin=pages.is_admin(g.user))

    @app.get("/namespaces/<namespace>")
    def namespace(namespace: str) -> str:
        tables = pages.tables(g.user, namespace)
        if not tables:
            abort(404, f"no namespace {namespace[:200]!r} here, or no table in it you may read")
        return render_template("namespace.html", user=g.user, namespace=namespace, tables=tables)

    @app.get("/tables/<namespace>/<name>")
    def table(namespace: str, name: str) -> str:
        return _table_page(pages.overview, "table.html", namespace, name)

    @app.get("/tables/<namespace>/<name>/timeline")
    def timeline(namespace: str, name: str) -> str:
        return _table_page(pages.timeline, "timeline.html", namespace, name)

    @app.get("/tables/<namespace>/<name>/files")
    def files(namespace: str, name: str) -> str:
        return _table_page(pages.files, "files.html", namespace, name)

    @app.get("/tables/<namespace>/<name>/health")
    def health(namespace: str, name: str) -> str:
        return _table_page(pages.health, "health.html", namespace, name)

    @app.get("/queries")
    def queries() -> str:
        return render_template("queries.html", user=g.user, calls=pages.live_calls(g.user),
                               admin=pages.is_admin(g.user), refresh=LIVE_REFRESH_SECONDS)

    return app


__all__ = ["SECURITY_HEADERS", "create_app"]
