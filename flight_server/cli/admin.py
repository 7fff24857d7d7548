"""``hudi-flight users add|remove``, ``grant`` and ``revoke``: users and rights in the catalog
database, changed directly (a running server sees them within ``auth_cache_seconds``).

Passwords are read from stdin only (``--password-stdin``), never from the command line, and
never printed.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO

from flight_server.cli.output import CliError

if TYPE_CHECKING:  # the server modules are imported by the commands: they need the server extra
    from flight_server.server.config import ServerConfig
    from flight_server.server.security.users import UserStore


def read_password(stream: TextIO | None = None) -> str:
    """The first line of ``stream`` (stdin), without its line break."""
    line = (stream or sys.stdin).readline()
    password = line.rstrip("\r\n")
    if not password:
        raise CliError("no password on stdin (--password-stdin reads one line)")
    return password


def open_users(args: argparse.Namespace) -> tuple["UserStore", "ServerConfig"]:
    """The user store of the catalog the options name (the same options as ``serve``)."""
    from flight_server.server.config import ServerConfig
    from flight_server.server.registry import Registry
    from flight_server.server.security.state_files import private_dir, private_sqlite
    from flight_server.server.security.users import UserStore

    config = ServerConfig.load(args.config, catalog_url=args.catalog_url, state_dir=args.state_dir)
    if not config.catalog_url:
        private_dir(config.state_path)
    private_sqlite(config.resolved_catalog_url)
    return UserStore(Registry(config.resolved_catalog_url).engine), config


def cmd_users_add(args: argparse.Namespace) -> int:
    if not args.password_stdin:
        raise CliError("users add reads the password from stdin: pass --password-stdin")
    password = read_password()
    users, _ = open_users(args)
    users.add_user(args.name, password, admin=args.admin)
    print(f"added user {args.name}" + (" (admin)" if args.admin else ""))
    return 0


def cmd_users_remove(args: argparse.Namespace) -> int:
    users, _ = open_users(args)
    users.remove_user(args.name)
    print(f"removed user {args.name} and its grants")
    return 0


def cmd_grant(args: argparse.Namespace) -> int:
    from flight_server.server.security.users import Grant

    grant = Grant.parse(args.right, args.target)
    users, config = open_users(args)
    if users.user(args.to) is None and args.to not in config.tokens.values():
        raise CliError(f"user {args.to} does not exist (hudi-flight users add, or a token of [server.tokens])")
    added = users.grant(args.to, grant)
    print(f"granted {grant.right} on {grant.target} to {args.to}" + ("" if added else " (held already)"))
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    from flight_server.server.security.users import Grant

    grant = Grant.parse(args.right, args.target)
    users, _ = open_users(args)
    users.revoke(args.from_, grant)
    print(f"revoked {grant.right} on {grant.target} from {args.from_}")
    return 0


def catalog_options(p: argparse.ArgumentParser) -> None:
    """The options naming the catalog database, shared with ``serve``."""
    p.add_argument("--catalog-url", help="SQLAlchemy URL of the catalog (default: SQLite in the state dir)")
    p.add_argument("--config", help="TOML or JSON config file")
    p.add_argument("--state-dir", help="where the embedded catalog and the ticket secret live")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``users``, ``grant`` and ``revoke``."""
    users = sub.add_parser("users", help="add or remove users of the catalog database")
    users_sub = users.add_subparsers(dest="users_command", required=True)
    p = users_sub.add_parser("add", help="add a user (password read from stdin)")
    p.add_argument("name")
    p.add_argument("--admin", action="store_true", help="the user may do everything")
    p.add_argument("--password-stdin", action="store_true", help="read the password from the first line of stdin")
    catalog_options(p)
    p.set_defaults(func=cmd_users_add)
    p = users_sub.add_parser("remove", help="remove a user and its grants")
    p.add_argument("name")
    catalog_options(p)
    p.set_defaults(func=cmd_users_remove)

    targets = "NAMESPACE, NAMESPACE.TABLE or '*' (every namespace)"
    p = sub.add_parser("grant", help="give a user read or admin on a namespace or table")
    p.add_argument("right", metavar="RIGHT", help="read or admin")
    p.add_argument("target", help=targets)
    p.add_argument("--to", required=True, metavar="NAME")
    catalog_options(p)
    p.set_defaults(func=cmd_grant)
    p = sub.add_parser("revoke", help="take a grant back")
    p.add_argument("right", metavar="RIGHT", help="read or admin")
    p.add_argument("target", help=targets)
    p.add_argument("--from", dest="from_", required=True, metavar="NAME")
    catalog_options(p)
    p.set_defaults(func=cmd_revoke)


__all__ = ["add_parsers", "catalog_options", "open_users", "read_password"]
