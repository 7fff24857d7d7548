"""The client tests' one SparkSession (tests.support.spark: the connector's jar on its classpath)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from tests.support.spark import local_spark

    session = local_spark()
    yield session
    session.stop()
