"""The example deployment is secure as shipped (docs/flight.md, "TLS and mutual TLS"): deploy/hudi-flight.toml,
deploy/compose.yaml, deploy/kubernetes.yaml and deploy/Dockerfile, parsed (tomllib, PyYAML):
every server serves TLS, nothing listens beyond loopback without credentials (users created by
an init step from a secret, or static tokens), no secret is committed (values come from secret
files or ``${VAR:?...}`` references that fail loudly), and every config key is a ServerConfig key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib
import yaml

from flight_server.server.config import ServerConfig

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
#: ``${VAR:?message}``: compose refuses to start while VAR is unset.
REQUIRED_VAR = re.compile(r"^\$\{[A-Z0-9_]+:\?[^}]+\}$")
SECRET_NAME = re.compile(r"password|secret|token|key", re.IGNORECASE)
USERS_ADD = re.compile(r"hudi-flight\s.*users add \S+ .*--password-stdin.*<\s*\S+", re.DOTALL)


def _loopback(host: str) -> bool:
    return host in ("127.0.0.1", "::1", "localhost")


def _config_from(tmp_path: Path, text: str, name: str = "hudi-flight.toml", **overrides) -> ServerConfig:
    path = tmp_path / name
    path.write_text(text)
    return ServerConfig.load(path, **overrides)  # raises ValueError on an unknown key


def _flags(args: list[str]) -> dict[str, str]:
    """``["--a", "x", "--b=y"]`` -> ``{"a": "x", "b": "y"}``."""
    out, i = {}, 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and "=" in arg:
            key, _, value = arg[2:].partition("=")
            out[key] = value
        elif arg.startswith("--"):
            out[arg[2:]] = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else ""
            i += 1
        i += 1
    return out


def _server_config(flags: dict[str, str], toml_text: str, tmp_path: Path) -> ServerConfig:
    """The effective config of ``hudi-flight serve`` with these flags over this config file."""
    return _config_from(tmp_path, toml_text, host=flags.get("host"), tls_cert=flags.get("tls-cert"),
                        tls_key=flags.get("tls-key"), tls_client_ca=flags.get("tls-client-ca"))


def _assert_no_committed_secret(text: str, where: str) -> None:
    assert "PRIVATE KEY-----" not in text, where
    assert not re.search(r"\b[0-9a-f]{64}\b", text), f"{where}: a hex secret is committed"
    for url in re.findall(r"[a-z0-9+]+://[^\s\"'@/]+:([^\s\"'@/]+)@", text):
        assert REQUIRED_VAR.match(url) or url in ("PASSWORD", "<password>"), f"{where}: password {url!r} in a URL"


# -- the config file (the Dockerfile's default) -------------------------------------------------


def test_toml_keys_are_known_and_tls_is_on():
    config = ServerConfig.load(DEPLOY / "hudi-flight.toml")
    assert config.tls.cert and config.tls.key
    assert config.location.startswith("grpc+tls://")
    assert config.allowed_roots, "register-table must be confined to allowed roots"
    assert not config.client_storage_option_keys
    assert all(loc.startswith("grpc+tls://") for loc in config.locations)
    toml = tomllib.loads((DEPLOY / "hudi-flight.toml").read_text())
    assert not toml["server"].get("auth_tokens"), "static tokens belong in a secret, not in the committed file"


def test_toml_documents_how_credentials_are_created():
    text = (DEPLOY / "hudi-flight.toml").read_text()
    if not _loopback(ServerConfig.load(DEPLOY / "hudi-flight.toml").host):
        assert USERS_ADD.search(text), "a non-loopback config must say how its users are created"


def test_dockerfile_serves_the_secure_config_and_packages_everything():
    text = (DEPLOY / "Dockerfile").read_text()
    entrypoint = [line for line in text.splitlines() if line.startswith("ENTRYPOINT")]
    assert entrypoint and "--config" in entrypoint[0] and "/etc/hudi-flight/hudi-flight.toml" in entrypoint[0]
    assert "COPY deploy/hudi-flight.toml /etc/hudi-flight/hudi-flight.toml" in text
    assert "--insecure" not in text
    assert "USER hudi" in text
    assert '".[server,s3]"' in text, "the image installs the server extra (pip install hudi-flight is the reader alone)"
    assert USERS_ADD.search(text), "the image must say how its users are created (it listens on 0.0.0.0)"
    packaged = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    for pattern in packaged:
        package = pattern.rstrip("*")
        assert f"COPY {package} ./{package}" in text, f"the image build needs {package} (pyproject packages it)"
    _assert_no_committed_secret(text, "Dockerfile")


# -- compose -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def _hudi_services(compose: dict) -> dict[str, dict]:
    return {name: svc for name, svc in compose["services"].items() if "build" in svc}


def test_compose_servers_serve_tls_and_depend_on_the_users_init_step(compose, tmp_path):
    services = _hudi_services(compose)
    init = {name for name, svc in services.items() if svc.get("entrypoint") and USERS_ADD.search(" ".join(svc["command"]))}
    assert init, "an init step must create the users (hudi-flight users add ... --password-stdin)"
    servers = {name: svc for name, svc in services.items() if name not in init}
    assert servers
    toml = (DEPLOY / "hudi-flight.toml").read_text()  # the image's --config
    cluster_toml = (DEPLOY / "hudi-flight.cluster.example.toml").read_text()  # the cluster profile's
    for name, svc in servers.items():
        flags = _flags(svc.get("command", []))
        assert "insecure" not in flags, name
        text = cluster_toml if flags.get("config", "").endswith("/cluster_config") else toml
        config = _server_config(flags, text, tmp_path)
        assert config.tls.files() is not None, f"{name} serves without TLS"
        for option in ("tls-cert", "tls-key"):
            assert flags[option].startswith("/run/secrets/"), f"{name}: {option} must come from a secret"
        if not _loopback(config.host) and not config.tokens:  # credentials: static tokens, or users
            deps = svc.get("depends_on", {})
            assert any(deps.get(i, {}).get("condition") == "service_completed_successfully" for i in init), (
                f"{name} listens on {config.host} before the users exist")


def test_compose_commits_no_secret(compose):
    for name, svc in compose["services"].items():
        for key, value in (svc.get("environment") or {}).items():
            if SECRET_NAME.search(key):
                assert REQUIRED_VAR.match(str(value)), f"{name}: {key} must be a ${{VAR:?...}} reference"
    for name, secret in compose["secrets"].items():
        path = (DEPLOY / secret["file"]).resolve()
        assert path.is_relative_to(DEPLOY / "secrets"), f"secret {name} must live in deploy/secrets/"
    ignored = (REPO / ".gitignore").read_text().splitlines()
    assert "deploy/secrets/" in ignored
    _assert_no_committed_secret((DEPLOY / "compose.yaml").read_text(), "compose.yaml")


# -- kubernetes --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kube() -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()) if d]


def _kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def test_kubernetes_commits_no_secret(kube):
    for secret in _kind(kube, "Secret"):
        values = {**secret.get("data", {}), **secret.get("stringData", {})}
        assert not values, f"Secret {secret['metadata']['name']} carries values; create it with kubectl instead"
    for doc in kube:
        for container in doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            for env in container.get("env", []):
                assert "valueFrom" in env or not SECRET_NAME.search(env["name"]), env["name"]
    _assert_no_committed_secret((DEPLOY / "kubernetes.yaml").read_text(), "kubernetes.yaml")


def test_kubernetes_servers_serve_tls_from_a_secret_with_users_from_an_init_job(kube, tmp_path):
    (config_map,) = [c for c in _kind(kube, "ConfigMap") if c["metadata"]["name"] == "hudi-flight"]
    (deployment,) = [d for d in _kind(kube, "Deployment") if d["metadata"]["name"] == "hudi-flight"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    flags = _flags(container["args"])
    assert "insecure" not in flags
    mounted = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    name = Path(flags["config"]).name
    config = _server_config(flags, config_map["data"][name], tmp_path)
    tls = config.tls.files()
    assert tls is not None, "the server must serve TLS"
    volumes = {v["name"]: v for v in pod["volumes"]}
    for path in (tls.cert, tls.key):
        volume = volumes[mounted[str(Path(path).parent)]]
        assert "secret" in volume, f"{path} must come from a Secret"
    assert config.allowed_roots
    if not _loopback(config.host):
        jobs = [job for job in _kind(kube, "Job")
                for c in job["spec"]["template"]["spec"]["containers"]
                if USERS_ADD.search(" ".join(c.get("args", [])))]
        assert jobs, "a server beyond loopback needs its users created (hudi-flight users add ... --password-stdin)"
    assert pod["securityContext"]["runAsNonRoot"] is True
