"""The code layout keeps its promises: rooms import downward only, no import cycles (imports
inside functions count), the reader loads no server/SQL/Spark dependency, and the generator is
not part of the reader."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from setuptools import find_namespace_packages

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("catalog", "flight_server", "hudi_generator", "schemas")
#: catalog rooms, lowest first: a room may import only rooms at its rank or below
CATALOG_RANKS = {
    "errors": 0, "storage": 0, "s3_listing": 0, "lru": 0, "parallel": 0, "optional": 0, "format": 1, "table": 2, "timeline": 3, "fs_view": 4, "listing": 5,
    "state": 6, "read": 7, "plan": 8, "meta": 9, "hudi_table": 10, "__init__": 11,
}
#: rooms of flight_server/server/, lowest first: the process (runtime) serves the RPCs (service),
#: which the composition root (app) wires to the front ends (flightsql, actions, console); they share the
#: query path (query), which uses the caches, rights and SQL engine; everything reads the config
SERVER_RANKS = {
    "errors": 0, "registry": 0, "sql": 1, "security": 1, "cache": 2, "engine": 2, "config": 3, "config_sections": 3, "cluster": 4, "ops": 4,
    "query": 5, "flightsql": 6, "actions": 6, "console": 6, "app": 7, "service": 8, "runtime": 9, "__init__": 10,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every first-party module ``path`` imports, at any depth of the file (functions too)."""
    tree = ast.parse(path.read_text(), str(path))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m.split(".")[0] in PACKAGES}


def _graph() -> dict[str, set[str]]:
    modules = {
        _module_name(p): p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")
    }
    graph = {}
    for name, path in modules.items():
        graph[name] = {m for m in _imports(path) if m in modules and m != name}
    return graph


def test_no_import_cycles():
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_catalog_rooms_import_downward_only():
    wrong = []
    for module, deps in _graph().items():
        top = module.split(".")[0]
        if top == "catalog":
            for dep in deps:
                if dep.split(".")[0] != "catalog":
                    wrong.append(f"{module} imports {dep} (the reader imports nothing of the server or generator)")
                elif CATALOG_RANKS[_room(dep)] > CATALOG_RANKS[_room(module)]:
                    wrong.append(f"{module} imports {dep}, a room above it")
        elif top == "hudi_generator":
            wrong += [f"{module} imports {dep}" for dep in deps if dep.split(".")[0] != "hudi_generator"]
    assert not wrong, "\n".join(sorted(wrong))


def test_server_rooms_import_downward_only():
    wrong = []
    for module, deps in _graph().items():
        parts = module.split(".")
        if parts[:2] != ["flight_server", "server"]:
            continue
        room = parts[2] if len(parts) > 2 else "__init__"
        for dep in deps:
            dparts = dep.split(".")
            if dparts[:2] != ["flight_server", "server"]:
                continue
            droom = dparts[2] if len(dparts) > 2 else "__init__"
            if SERVER_RANKS[droom] > SERVER_RANKS[room]:
                wrong.append(f"{module} imports {dep}, a room above it")
    assert not wrong, "\n".join(sorted(wrong))


def test_the_sql_rooms_translate_and_run_but_do_not_read():
    """``sql/`` and ``flightsql/`` plan and run statements; reading a table is the query path's
    (its split cache) and the reader's features (``ScanPlan.count``, ``ScanPlan.to_dataset``),
    never ``catalog.read`` called from there."""
    wrong = []
    for module, deps in _graph().items():
        parts = module.split(".")
        if parts[:2] == ["flight_server", "server"] and len(parts) > 2 and parts[2] in ("sql", "flightsql"):
            wrong += [f"{module} imports {dep}" for dep in deps if dep == "catalog.read" or dep.startswith("catalog.read.")]
    assert not wrong, "\n".join(sorted(wrong))


ENGINE = "flight_server.server.engine"
#: the engine process's entry: everything it imports runs behind the process wall
ENGINE_ENTRY = f"{ENGINE}.entry"
#: the engine room's one door: the only module of it that the rest of the server imports
ENGINE_DOOR = f"{ENGINE}.sandbox"


def test_the_engine_process_imports_nothing_of_the_server():
    """What runs in an engine process (its entry and every module that imports, at any depth)
    is the engine room and the reader library: no server room (security, config, query, ...),
    so no server state, bound or secret can reach the process that runs client SQL."""
    graph = _graph()
    seen, todo = {ENGINE_ENTRY}, [ENGINE_ENTRY]
    while todo:
        for dep in graph[todo.pop()]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    assert f"{ENGINE}.engine_process" in seen and f"{ENGINE}.duckdb_engine" in seen
    wrong = sorted(m for m in seen if not (m == ENGINE or m.startswith(ENGINE + ".") or m.split(".")[0] == "catalog"))
    assert not wrong, "the engine process imports " + ", ".join(wrong)
    assert ENGINE_DOOR not in seen


def test_the_engine_room_has_one_door():
    """Outside the engine room, only its door (the sandbox) is imported: sql/ (the language),
    the query path and the front ends never reach the engine's internals."""
    wrong = []
    for module, deps in _graph().items():
        if module == ENGINE or module.startswith(ENGINE + "."):
            continue
        wrong += [f"{module} imports {dep}" for dep in deps
                  if (dep == ENGINE or dep.startswith(ENGINE + ".")) and dep != ENGINE_DOOR]
    assert not wrong, "\n".join(sorted(wrong))


def test_the_wire_is_spelled_once():
    """``protocol/`` (shared by client and server) imports neither; the client reaches the wire
    through it, never through the server."""
    wrong = []
    for module, deps in _graph().items():
        if module.startswith("flight_server.protocol"):
            wrong += [f"{module} imports {dep}" for dep in deps if dep.startswith("flight_server.")
                      and not dep.startswith("flight_server.protocol")]
    assert not wrong, "\n".join(sorted(wrong))


def test_flight_server_rooms_do_not_import_each_other_upward():
    """client/ never imports server/; cli/ may import both; server/ never imports client/ or cli/."""
    wrong = []
    for module, deps in _graph().items():
        parts = module.split(".")
        if parts[0] != "flight_server" or len(parts) < 2:
            continue
        for dep in deps:
            dparts = dep.split(".")
            if dparts[0] != "flight_server" or len(dparts) < 2:
                continue
            if parts[1] == "server" and dparts[1] in ("client", "cli"):
                wrong.append(f"{module} imports {dep}")
            if parts[1] == "client" and dparts[1] in ("server", "cli"):
                wrong.append(f"{module} imports {dep}")
    assert not wrong, "\n".join(sorted(wrong))


def test_import_catalog_loads_no_server_sql_or_spark_dependency():
    heavy = ("sqlalchemy", "duckdb", "sqlglot", "grpc", "pyspark", "pyarrow.flight", "jsonschema")
    code = (
        "import sys, catalog; from catalog import HudiTable, ReadOptions; "
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


def test_the_reader_package_ships_no_test_code_or_generator():
    packages = find_namespace_packages(str(REPO), include=["catalog*"])
    assert packages and all(p == "catalog" or p.startswith("catalog.") for p in packages)
    assert not [p for p in packages if "test" in p or "generat" in p]
    assert not list((REPO / "catalog").rglob("test_*.py"))
