"""A stopped server reaches every client surface as ConnectionError naming the server URI
(docs promise it): the session, the Polars source and the PySpark data source."""

from __future__ import annotations

import pytest

from flight_server.client.session import HudiFlightClient
from tests.support.servers import free_port


@pytest.fixture
def stopped_uri() -> str:
    return f"grpc://127.0.0.1:{free_port()}"


def _assert_names_server(err: pytest.ExceptionInfo, uri: str) -> None:
    assert isinstance(err.value, ConnectionError)
    assert str(err.value).startswith(f"hudi-flight server {uri} is unreachable")


@pytest.mark.parametrize("call", ["schema", "plan", "tables"])
def test_session(stopped_uri, call):
    client = HudiFlightClient(stopped_uri, timeout=10)
    with pytest.raises(ConnectionError) as err:
        getattr(client, call)(*(["ns.t"] if call != "tables" else []))
    _assert_names_server(err, stopped_uri)


def test_polars_source(stopped_uri):
    from flight_server.client.polars import scan_hudi

    with pytest.raises(ConnectionError) as err:
        scan_hudi(stopped_uri, "ns.t", timeout=10).collect()
    _assert_names_server(err, stopped_uri)


def test_spark_data_source(stopped_uri):
    from flight_server.spark import HudiFlightDataSource

    with pytest.raises(ConnectionError) as err:
        HudiFlightDataSource({"uri": stopped_uri, "path": "ns.t"}).schema()
    _assert_names_server(err, stopped_uri)
