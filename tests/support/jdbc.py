"""The Arrow Flight SQL JDBC driver for tests: fetched once by ``make jdbc-driver`` (Maven, into
the ignored ``.cache/``), and :func:`run_steps`, one JVM running ``java/JdbcChecks.java`` over a
list of steps and handing back its JSON results. Java 17 and Maven are required: without them the
tests fail saying so (CI has both)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.make import run_make

REPO = Path(__file__).resolve().parents[2]
CHECKS = Path(__file__).resolve().parent / "java" / "JdbcChecks.java"
#: Arrow's memory module needs this on Java 17 (the driver fails at its first query without it)
JVM_FLAGS = ["--add-opens=java.base/java.nio=ALL-UNNAMED"]


def _made(target: str, pattern: str, tools: tuple[str, ...]) -> Path:
    """The newest ``.cache/jdbc`` file matching ``pattern`` after ``make target``.

    Raises:
        RuntimeError: a tool is missing, or make failed or made nothing.
    """
    for tool in (*tools, "make"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is not on the PATH (make {target} needs Java 17: {', '.join(tools)})")
    done = run_make(target)
    if done.returncode != 0:
        raise RuntimeError(f"make {target} failed: {(done.stderr or done.stdout)[-2000:]}")
    made = sorted((REPO / ".cache" / "jdbc").glob(pattern))
    if not made:
        raise RuntimeError(f"make {target} made no {pattern} under .cache/jdbc")
    return made[-1]


def fetch_driver() -> Path:
    """The driver jar, fetched on first use (``make jdbc-driver``; Java and Maven).

    Raises:
        RuntimeError: Java, Maven or make is missing, or the fetch failed.
    """
    return _made("jdbc-driver", "flight-sql-jdbc-driver-*.jar", ("java", "mvn"))


def driver_jar() -> Path:
    """:func:`fetch_driver` for tests: a missing tool fails the test, saying which."""
    try:
        return fetch_driver()
    except RuntimeError as err:
        pytest.fail(f"the JDBC tests need the Arrow JDBC driver: {err}")


def dialect_jar() -> Path:
    """The project's Spark JDBC dialect, compiled on first use (``make spark-dialect``)."""
    try:
        return _made("spark-dialect", "hudi-flight-spark-dialect.jar", ("javac", "jar"))
    except RuntimeError as err:
        pytest.fail(f"the Spark JDBC tests need the project's dialect: {err}")


def url(port: int, tls: bool = False, **params: str) -> str:
    """A JDBC URL of a local server (parameters the driver does not know travel as headers)."""
    query = {"useEncryption": "true" if tls else "false", **params}
    return f"jdbc:arrow-flight-sql://127.0.0.1:{port}/?" + "&".join(f"{k}={v}" for k, v in query.items())


def run_steps(steps: list[tuple[str, ...]], folder: Path) -> dict[str, dict]:
    """Run ``(id, url, kind, text, parameters...)`` steps in one JVM; results by step id."""
    path = folder / "steps.tsv"
    path.write_text("".join("\t".join(step) + "\n" for step in steps))
    command = ["java", *JVM_FLAGS, "-cp", str(driver_jar()), str(CHECKS), str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    results = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            result = json.loads(line)
            results[result["id"]] = result
    if done.returncode != 0 or len(results) != len(steps):
        pytest.fail(f"JdbcChecks exited {done.returncode} after {len(results)} of {len(steps)} steps: "
                    f"{done.stderr[-3000:]}")
    return results
