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

REPO = Path(__file__).resolve().parents[2]
CHECKS = Path(__file__).resolve().parent / "java" / "JdbcChecks.java"
#: Arrow's memory module needs this on Java 17 (the driver fails at its first query without it)
JVM_FLAGS = ["--add-opens=java.base/java.nio=ALL-UNNAMED"]
DRIVER_CLASS = "org.apache.arrow.driver.jdbc.ArrowFlightJdbcDriver"


def fetch_driver() -> Path:
    """The driver jar, fetched on first use (``make jdbc-driver``).

    Raises:
        RuntimeError: Java, Maven or make is missing, or the fetch failed.
    """
    for tool in ("java", "mvn", "make"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is not on the PATH (Java 17 and Maven fetch and run the Arrow JDBC driver)")
    done = subprocess.run(["make", "-s", "-C", str(REPO), "jdbc-driver"], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"make jdbc-driver failed: {(done.stderr or done.stdout)[-2000:]}")
    jars = sorted((REPO / ".cache" / "jdbc").glob("flight-sql-jdbc-driver-*.jar"))
    if not jars:
        raise RuntimeError("make jdbc-driver made no driver jar under .cache/jdbc")
    return jars[-1]


def driver_jar() -> Path:
    """:func:`fetch_driver` for tests: a missing tool fails the test, saying which."""
    try:
        return fetch_driver()
    except RuntimeError as err:
        pytest.fail(f"the JDBC tests need the Arrow JDBC driver: {err}")


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
