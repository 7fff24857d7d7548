"""The deploy examples' cluster topology: the compose ``cluster`` profile and the Kubernetes
coordinator/worker documents are parsed and checked for consistency, and the same topology
(a coordinator, two workers, one catalog, one secret) is started without containers on
loopback and read through."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import tomllib
import yaml

from catalog import HudiTable
from flight_server.client.session import HudiFlightClient
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.runtime.serve import check_placeholders, check_topology
from hudi_generator.generator import GeneratorSpec
from tests.support.compare import assert_same_rows
from tests.support.processes import ServeProcess, poll

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CLUSTER = ("coordinator", "worker-1", "worker-2")


def _flags(args: list[str]) -> dict[str, str]:
    """``["--role=worker", ...]`` -> ``{"role": "worker", ...}`` (the ``--key=value`` form)."""
    out = {}
    for arg in args:
        assert arg.startswith("--") and "=" in arg, f"use --key=value in the examples: {arg}"
        key, _, value = arg[2:].partition("=")
        out[key] = value
    return out


def _config(flags: dict[str, str]) -> ServerConfig:
    """The ServerConfig the flags give (only the keys the topology checks need)."""
    keys = {"role", "coordinator", "advertise", "processes"}
    given = {k: (int(v) if k == "processes" else v) for k, v in flags.items() if k in keys}
    return ServerConfig().updated(given)


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def manifests() -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()) if d]


def test_compose_cluster_is_consistent(compose):
    services = compose["services"]
    assert {"cluster-postgres", "minio", *CLUSTER} <= set(services)
    flags = {name: _flags(services[name]["command"]) for name in CLUSTER}
    coordinator = flags["coordinator"]
    assert coordinator["role"] == "coordinator"
    host, port = re.fullmatch(r"grpc\+tls://([^:]+):(\d+)", coordinator["advertise"]).groups()
    assert host == "coordinator" and port == coordinator["port"]
    for name in ("worker-1", "worker-2"):
        worker = flags[name]
        check_topology(_config(worker))
        assert worker["role"] == "worker"
        assert worker["coordinator"] == coordinator["advertise"]  # every worker points at the coordinator
        assert worker["advertise"] == f"grpc+tls://{name}:{worker['port']}"  # reachable by its service name
        assert "coordinator" in str(services[name]["depends_on"])
    for name in CLUSTER:
        service, f = services[name], flags[name]
        check_topology(_config(f))
        assert f["catalog-url"] == coordinator["catalog-url"]  # one shared catalog
        assert "@cluster-postgres:" in f["catalog-url"] and "${" in f["catalog-url"]  # password from the env
        assert f["secret-file"] == "/run/secrets/cluster_ticket_secret"  # one shared secret
        assert {"cluster_ticket_secret", "cluster_tls_cert", "cluster_tls_key"} <= set(service["secrets"])
        assert f["tls-cert"].endswith("cluster_tls_cert") and f["tls-key"].endswith("cluster_tls_key")
        assert f["health-port"] != f["port"]
        assert any(p.endswith(f":{f['port']}") for p in service["ports"])
        assert service["profiles"] == ["cluster"]
    # placeholders fail loudly: compose refuses unset variables, secrets are files you provide
    for secret in ("cluster_ticket_secret", "cluster_tls_cert", "cluster_tls_key", "cluster_config"):
        assert not (DEPLOY / compose["secrets"][secret]["file"]).exists()
    assert ":?" in services["minio"]["environment"]["MINIO_ROOT_PASSWORD"]


def test_kubernetes_cluster_is_consistent(manifests):
    by = {(d["kind"], d["metadata"]["name"]): d for d in manifests}
    assert ("Secret", "hudi-flight-cluster") not in by  # created with kubectl: no value is committed
    coordinator = by[("Deployment", "hudi-flight-coordinator")]
    workers = by[("StatefulSet", "hudi-flight-worker")]
    service = by[("Service", "hudi-flight-coordinator")]
    headless = by[("Service", "hudi-flight-worker")]
    assert headless["spec"]["clusterIP"] == "None" and workers["spec"]["serviceName"] == "hudi-flight-worker"
    assert workers["spec"]["replicas"] >= 2
    assert [t["metadata"]["name"] for t in workers["spec"]["volumeClaimTemplates"]] == ["cache"]
    pods = {"coordinator": coordinator, "worker": workers}
    flags = {}
    for role, owner in pods.items():
        spec = owner["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        f = flags[role] = _flags(container["args"])
        assert f["role"] == role
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["flight"] == int(f["port"]) and ports["health"] == int(f["health-port"])
        for probe in ("readinessProbe", "livenessProbe"):  # gRPC health checking on the health port
            assert container[probe]["grpc"]["port"] == int(f["health-port"])
        # the shared ticket secret and catalog URL come from the Secret, everywhere
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["secret"]["secret"]["secretName"] == "hudi-flight-cluster"
        assert any(m["name"] == "secret" for m in container["volumeMounts"])
        env = {e["name"]: e for e in container["env"]}
        assert env["CATALOG_URL"]["valueFrom"]["secretKeyRef"] == {"name": "hudi-flight-cluster", "key": "catalog-url"}
        assert f["catalog-url"] == "$(CATALOG_URL)"
        labels = owner["spec"]["template"]["metadata"]["labels"]
        assert labels["role"] == role
    assert service["spec"]["selector"]["role"] == "coordinator"
    assert headless["spec"]["selector"]["role"] == "worker"
    assert any(m["name"] == "cache" for m in workers["spec"]["template"]["spec"]["containers"][0]["volumeMounts"])
    # every worker points at the coordinator's Service, on its port, and advertises its pod name
    port = service["spec"]["ports"][0]["port"]
    assert flags["worker"]["coordinator"] == f"grpc+tls://hudi-flight-coordinator:{port}"
    assert flags["worker"]["advertise"].startswith("grpc+tls://$(POD_NAME).hudi-flight-worker.")
    assert flags["coordinator"]["advertise"] == f"grpc+tls://hudi-flight-coordinator:{port}"
    # the example config's placeholders stop a server until replaced
    toml = (DEPLOY / "hudi-flight.cluster.example.toml").read_text()
    with pytest.raises(ValueError, match="tokens still holds a REPLACE"):
        check_placeholders(ServerConfig(tokens=tomllib.loads(toml)["server"]["tokens"]))


def test_the_same_topology_runs_on_loopback(compose, generated_table, tmp_path):
    """The compose cluster's wiring, as processes: a coordinator (here with two serving
    processes) and two workers sharing a catalog database and a ticket secret (local files stand
    in for MinIO); a client reads through the coordinator, endpoints name both workers, rows
    equal HudiTable.read."""
    flags = {name: _flags(compose["services"][name]["command"]) for name in CLUSTER}
    path = generated_table(GeneratorSpec(rows=3_000, partitions=4, files_per_partition=6, commits=2))
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    registry = Registry(catalog)
    registry.register_table("ns.trips", path)
    registry.close()
    secret = tmp_path / "ticket-secret.hex"
    secret.write_text("5a" * 32)
    secret.chmod(0o600)
    config = tmp_path / "cluster.json"
    config.write_text(json.dumps({"heartbeat_interval_seconds": 0.3, "heartbeat_timeout_seconds": 2.0}))

    def start(name: str, *extra: str) -> ServeProcess:
        return ServeProcess("--port", "0", "--role", flags[name]["role"], "--catalog-url", catalog, "--secret-file",
                            str(secret), "--state-dir", str(tmp_path / name), "--config", str(config), *extra,
                            log=tmp_path / f"{name}.log", wait=False)

    processes: list[ServeProcess] = []
    try:
        coordinator = start("coordinator", "--processes", "2").ready()  # heartbeats reach either process
        processes.append(coordinator)
        processes.extend(start(name, "--coordinator", coordinator.uri) for name in ("worker-1", "worker-2"))
        for p in processes[1:]:
            p.ready()
        workers = {f"grpc+tcp://127.0.0.1:{p.port}" for p in processes[1:]}

        def every_process_sees_both() -> bool:
            # four connections open at once: the relay spreads them over both coordinator processes
            probes = [HudiFlightClient(coordinator.uri, timeout=60) for _ in range(4)]
            try:
                seen = {h["pid"]: set(h["workers"]) for h in (c.health() for c in probes)}
            finally:
                for c in probes:
                    c.close()
            return len(seen) == 2 and all(w == workers for w in seen.values())

        poll(every_process_sees_both, 30, "both workers registered with both coordinator processes")
        with HudiFlightClient(coordinator.uri, timeout=60) as client:
            plan = client.plan("ns.trips")
            assert {loc for ep in plan.endpoints for loc in ep.locations} == workers
            # both get work: each file group's first worker is a hash of it and the worker's URI
            # (random ports), so with n endpoints all go to one worker with chance 2^(1-n)
            assert len(plan.endpoints) >= 20
            assert {ep.locations[0] for ep in plan.endpoints} == workers
            assert_same_rows(client.read("ns.trips"), HudiTable.open(path).read())
    finally:
        for p in processes:
            p.stop()
