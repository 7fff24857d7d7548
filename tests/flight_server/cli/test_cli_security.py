"""``hudi-flight users``, ``grant`` and ``revoke`` on a SQLite catalog (with a server running on
it and without), the client commands' credentials, and the refusals: one-line errors, exit 1,
no password ever printed."""

from __future__ import annotations

import io
import stat

import pytest

from flight_server.cli.main import main
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.security.users import Grant, UserStore
from tests.support.servers import free_port, running_server

SIMPLE = "sample_table/cow/v6_nonpartitioned"
PASSWORD = "a-long-enough-password"


def _run(capsys, monkeypatch, *argv, stdin: str | None = None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert PASSWORD not in out + err
    return code, out, err


def _users(state) -> UserStore:
    return UserStore(Registry(f"sqlite:///{state / 'catalog.db'}").engine)


def test_users_grant_revoke_without_a_server(tmp_path, capsys, monkeypatch):
    state = tmp_path / "state"
    s = ("--state-dir", str(state))
    assert _run(capsys, monkeypatch, "users", "add", "alice", "--password-stdin", *s, stdin=PASSWORD + "\n") == (
        0, "added user alice\n", "")
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "catalog.db").stat().st_mode) == 0o600
    code, out, _ = _run(capsys, monkeypatch, "users", "add", "root", "--admin", "--password-stdin", *s,
                        stdin=PASSWORD + "\r\n")
    assert code == 0 and out == "added user root (admin)\n"
    assert _run(capsys, monkeypatch, "grant", "read", "sales", "--to", "alice", *s)[1] == \
        "granted read on sales to alice\n"
    assert _run(capsys, monkeypatch, "grant", "admin", "sales.orders", "--to", "alice", *s)[1] == \
        "granted admin on sales.orders to alice\n"
    assert _run(capsys, monkeypatch, "grant", "read", "sales", "--to", "alice", *s)[1] == \
        "granted read on sales to alice (held already)\n"
    users = _users(state)
    assert users.grants_of("alice") == {Grant("read", "sales"), Grant("admin", "sales", "orders")}
    assert users.check_password("alice", PASSWORD) and users.check_password("root", PASSWORD).admin
    assert _run(capsys, monkeypatch, "revoke", "read", "sales", "--from", "alice", *s)[1] == \
        "revoked read on sales from alice\n"
    assert _run(capsys, monkeypatch, "users", "remove", "alice", *s)[1] == "removed user alice and its grants\n"
    assert users.user("alice") is None and users.grants_of("alice") == frozenset()
    assert PASSWORD.encode() not in (state / "catalog.db").read_bytes()


@pytest.mark.parametrize("argv, stdin, message", [
    (["users", "add", "bob"], None, "pass --password-stdin"),
    (["users", "add", "bob", "--password-stdin"], "", "no password on stdin"),
    (["users", "add", "bob", "--password-stdin"], "short\n", "shorter than 8 characters"),
    (["users", "add", "anonymous", "--password-stdin"], PASSWORD, "user name 'anonymous' is not allowed"),
    (["users", "add", "bad name", "--password-stdin"], PASSWORD, "is not allowed"),
    (["users", "add", "bob\n", "--password-stdin"], PASSWORD, "is not allowed"),  # no line break after a name
    (["users", "add", "dup", "--password-stdin"], PASSWORD, "user dup exists already"),
    (["users", "remove", "nobody"], None, "user nobody does not exist"),
    (["grant", "read", "sales", "--to", "nobody"], None, "user nobody does not exist"),
    (["grant", "read", "a.b.c", "--to", "dup"], None, "is not of the form 'namespace.table'"),
    (["revoke", "read", "sales", "--from", "dup"], None, "dup holds no read grant on sales"),
])
def test_refusals_are_one_line_exit_1(tmp_path, capsys, monkeypatch, argv, stdin, message):
    s = ("--state-dir", str(tmp_path))
    _run(capsys, monkeypatch, "users", "add", "dup", "--password-stdin", *s, stdin=PASSWORD)
    code, out, err = _run(capsys, monkeypatch, *argv, *s, stdin=stdin)
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("hudi-flight: error: ") and message in err, err


def test_changes_reach_a_running_server(tmp_path, capsys, monkeypatch, fixture_table):
    """The CLI changes the catalog a server is serving; the client commands log in."""
    state = tmp_path / "state"
    s = ("--state-dir", str(state))
    config = ServerConfig(port=0, state_dir=str(state), allowed_roots=[fixture_table(SIMPLE)])
    with running_server(config) as srv:
        uri = ("--server", f"grpc://127.0.0.1:{srv.port}")
        _run(capsys, monkeypatch, "users", "add", "ops", "--admin", "--password-stdin", *s, stdin=PASSWORD)
        _run(capsys, monkeypatch, "users", "add", "reader", "--password-stdin", *s, stdin=PASSWORD)
        code, out, err = _run(capsys, monkeypatch, "register", "sales.t", fixture_table(SIMPLE), *uri,
                              "--user", "ops", "--password-stdin", stdin=PASSWORD + "\n")
        assert code == 0 and out.startswith("registered sales.t"), err
        monkeypatch.setenv("HUDI_FLIGHT_PASSWORD", PASSWORD)
        code, out, err = _run(capsys, monkeypatch, "read", "sales.t", *uri, "--user", "reader")
        assert code == 1 and err.startswith("hudi-flight: error: planning sales.t refused by") and \
            "reader has no read right on sales.t" in err
        assert _run(capsys, monkeypatch, "grant", "read", "sales.t", "--to", "reader", *s)[0] == 0
        srv.app.access.forget()  # instead of waiting auth_cache_seconds
        code, out, _ = _run(capsys, monkeypatch, "tables", *uri, "--user", "reader")
        assert code == 0 and out.split("\t")[0] == "sales.t"
        code, out, _ = _run(capsys, monkeypatch, "read", "sales.t", *uri, "--user", "reader", "--max-rows", "1")
        assert code == 0 and out.splitlines()[-1].startswith("(")
        code, _, err = _run(capsys, monkeypatch, "tables", *uri, "--user", "reader", "--password-stdin",
                            stdin="not-the-password\n")
        assert code == 1 and len(err.splitlines()) == 1 and "wrong user name or password" in err
        assert "not-the-password" not in err
        monkeypatch.delenv("HUDI_FLIGHT_PASSWORD")
        code, _, err = _run(capsys, monkeypatch, "tables", *uri, "--user", "reader")
        assert code == 1 and "--password-stdin" in err and "HUDI_FLIGHT_PASSWORD" in err
        code, _, err = _run(capsys, monkeypatch, "tables", *uri)
        assert code == 1 and "credentials required" in err


def test_static_token_from_the_config_file(tmp_path, capsys, monkeypatch, fixture_table):
    token = "static-token-0123456789abcdef"
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[server]\nstate_dir = "{tmp_path / "state"}"\n[server.tokens]\n"{token}" = "ci-bot"\n')
    assert _run(capsys, monkeypatch, "grant", "read", "sales", "--to", "ci-bot", "--config", str(cfg))[0] == 0
    Registry(f"sqlite:///{tmp_path / 'state' / 'catalog.db'}").register_table("sales.t", fixture_table(SIMPLE))
    with running_server(ServerConfig.load(cfg, port=0)) as srv:
        uri = ("--server", f"grpc://127.0.0.1:{srv.port}")
        code, out, _ = _run(capsys, monkeypatch, "tables", *uri, "--token", token)
        assert code == 0 and out.startswith("sales.t\t")
        assert token not in out
        code, _, err = _run(capsys, monkeypatch, "tables", *uri, "--token", token + "x")
        assert code == 1 and "token not accepted" in err and token not in err


def test_serve_refuses_an_exposed_address_without_credentials(tmp_path, capsys, monkeypatch):
    code, _, err = _run(capsys, monkeypatch, "serve", "--host", "0.0.0.0", "--port", str(free_port()),
                        "--state-dir", str(tmp_path))
    assert code == 1 and len(err.splitlines()) == 1
    assert "refusing to listen on 0.0.0.0 with no users and no tokens" in err and "--insecure" in err


def test_old_auth_tokens_key_says_what_replaced_it(tmp_path, capsys, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[server]\nauth_tokens = ["x"]\n')
    code, _, err = _run(capsys, monkeypatch, "users", "remove", "x", "--config", str(cfg))
    assert code == 1 and "auth_tokens was replaced by tokens" in err
