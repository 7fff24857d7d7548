"""The CLI's connection flags: --tls-root-cert, --tls-cert/--tls-key (mutual TLS), --token, --user
with --password-stdin or $HUDI_FLIGHT_PASSWORD, against TLS servers on loopback."""

from __future__ import annotations

import io
import json

import pytest

from flight_server.cli.main import main
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from tests.support.credentials import add_login_users, allow_token_user, token_settings
from tests.support.servers import running_server

TABLE = "sample_table/cow/v9_txns_simple_meta"
IDENT = "sales.txns"
TOKEN = "cli-tls-token-0123456789abcdef"
USERS = {"ada": "ada-password-1"}


@pytest.fixture(scope="module")
def registry(fixture_table) -> Registry:
    reg = Registry("sqlite://")
    reg.register_table(IDENT, fixture_table(TABLE))
    return reg


def _tls_config(pki, tmp_path_factory, **extra) -> ServerConfig:
    ca, _ = pki
    return ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("state")), tls_cert=str(ca.server_cert),
                        tls_key=str(ca.server_key), **extra)


@pytest.fixture(scope="module")
def mtls_token_uri(registry, pki, tmp_path_factory):
    """Mutual TLS + a static token."""
    ca, _ = pki
    config = _tls_config(pki, tmp_path_factory, tls_client_ca=str(ca.ca_cert), **token_settings(TOKEN))
    with running_server(config, registry=registry) as server:
        allow_token_user(server)
        yield f"grpc+tls://127.0.0.1:{server.port}"


@pytest.fixture(scope="module")
def login_uri(registry, pki, tmp_path_factory):
    with running_server(_tls_config(pki, tmp_path_factory), registry=registry) as server:
        add_login_users(server, USERS)
        yield f"grpc+tls://127.0.0.1:{server.port}"


def _tls_flags(pki) -> list[str]:
    ca, _ = pki
    return ["--tls-root-cert", str(ca.ca_cert), "--tls-cert", str(ca.client_cert), "--tls-key", str(ca.client_key)]


def test_tables_and_read_over_mtls_with_token(mtls_token_uri, pki, capsys):
    assert main(["tables", "--json", "--server", mtls_token_uri, "--token", TOKEN, *_tls_flags(pki)]) == 0
    assert [t["table"] for t in json.loads(capsys.readouterr().out)] == [IDENT]
    assert main(["read", IDENT, "--columns", "txn_id", "--limit", "2", "--server", mtls_token_uri,
                 "--token", TOKEN, *_tls_flags(pki)]) == 0
    assert "txn_id" in capsys.readouterr().out


def test_token_from_environment(mtls_token_uri, pki, capsys, monkeypatch):
    monkeypatch.setenv("HUDI_FLIGHT_TOKEN", TOKEN)
    assert main(["info", IDENT, "--json", "--server", mtls_token_uri, *_tls_flags(pki)]) == 0
    assert json.loads(capsys.readouterr().out)["table"] == IDENT


def _refused(argv: list[str], capsys) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_wrong_token_is_refused(mtls_token_uri, pki, capsys):
    err = _refused(["tables", "--server", mtls_token_uri, "--token", "wrong-token", *_tls_flags(pki)], capsys)
    assert "refused by" in err and "wrong-token" not in err


def test_missing_client_certificate_is_refused(mtls_token_uri, pki, capsys):
    ca, _ = pki
    err = _refused(["tables", "--server", mtls_token_uri, "--token", TOKEN, "--tls-root-cert", str(ca.ca_cert)], capsys)
    assert "client certificate" in err and TOKEN not in err


def test_client_certificate_without_key_is_refused(mtls_token_uri, pki, capsys):
    ca, _ = pki
    err = _refused(["tables", "--server", mtls_token_uri, "--tls-root-cert", str(ca.ca_cert),
                    "--tls-cert", str(ca.client_cert)], capsys)
    assert "both cert_chain and private_key" in err


def test_user_with_password_stdin(login_uri, pki, capsys, monkeypatch):
    ca, _ = pki
    monkeypatch.setattr("sys.stdin", io.StringIO(USERS["ada"] + "\n"))
    assert main(["tables", "--server", login_uri, "--tls-root-cert", str(ca.ca_cert), "--user", "ada",
                 "--password-stdin"]) == 0
    assert IDENT in capsys.readouterr().out


def test_user_with_password_from_environment(login_uri, pki, capsys, monkeypatch):
    ca, _ = pki
    monkeypatch.setenv("HUDI_FLIGHT_PASSWORD", USERS["ada"])
    assert main(["tables", "--server", login_uri, "--tls-root-cert", str(ca.ca_cert), "--user", "ada"]) == 0
    assert IDENT in capsys.readouterr().out
    monkeypatch.setenv("HUDI_FLIGHT_PASSWORD", "wrong-pw")
    assert main(["tables", "--server", login_uri, "--tls-root-cert", str(ca.ca_cert), "--user", "ada"]) == 1
    err = capsys.readouterr().err
    assert "logging in as 'ada'" in err and "wrong-pw" not in err


def test_user_without_password_and_stdin_without_user(capsys, monkeypatch):
    monkeypatch.delenv("HUDI_FLIGHT_PASSWORD", raising=False)
    assert main(["tables", "--user", "ada"]) == 1
    assert "--password-stdin or $HUDI_FLIGHT_PASSWORD" in capsys.readouterr().err
    assert main(["tables", "--password-stdin"]) == 1
    assert "--password-stdin needs --user" in capsys.readouterr().err
