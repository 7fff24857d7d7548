"""The SQL client pieces that need no server: URL options, parameter rows, LIKE escaping, the
PEP 249 surface and its errors."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest
import sqlalchemy as sa

from flight_server.client.sql import dbapi, flightsql
from flight_server.client.sql.dialect import HudiFlightDialect


def _connect_args(url: str) -> dict:
    args, kwargs = HudiFlightDialect().create_connect_args(sa.engine.make_url(url))
    assert args == []
    return kwargs


def test_url_options_become_client_arguments():
    assert _connect_args("hudi+flight://db.example:9000") == {
        "uri": "grpc://db.example:9000", "namespace": None, "timeout": 60.0
    }
    assert _connect_args("hudi+flight://alice:pw@h:1/trips?tls=true&timeout=5") == {
        "uri": "grpc+tls://h:1", "namespace": "trips", "timeout": 5.0, "user": "alice", "password": "pw"
    }
    assert _connect_args("hudi+flight://h?token=t0k&tls_root_certs=/etc/ca.pem")["token"] == "t0k"
    kwargs = _connect_args("hudi+flight://h?tls_root_certs=/etc/ca.pem&cert_chain=/c.pem&private_key=/k.pem")
    assert kwargs["uri"] == "grpc+tls://h:8815"
    assert (kwargs["tls_root_certs"], kwargs["cert_chain"], kwargs["private_key"]) == ("/etc/ca.pem", "/c.pem", "/k.pem")
    assert _connect_args("hudi+flight://:s3cret@h")["token"] == "s3cret"  # password without user: a token
    with pytest.raises(ValueError, match="unknown hudi\\+flight URL options: bogus"):
        _connect_args("hudi+flight://h?bogus=1")


def test_parameter_row_keeps_python_types():
    when = datetime.datetime(2024, 1, 2, 3, 4, 5)
    batch = flightsql.parameter_batch(["eu", 3, 1.5, True, None, decimal.Decimal("1.25"), when])
    assert batch.num_rows == 1 and batch.schema.names == ["0", "1", "2", "3", "4", "5", "6"]
    assert [c[0].as_py() for c in batch.columns] == ["eu", 3, 1.5, True, None, decimal.Decimal("1.25"), when]
    server_schema = pa.schema([("region", pa.string()), ("n", pa.int32())]).serialize().to_pybytes()
    cast = flightsql.parameter_batch(["eu", 3], server_schema)
    assert cast.schema.names == ["region", "n"] and cast.column(1).type == pa.int32()
    with pytest.raises(TypeError, match="parameter 1"):
        flightsql.parameter_batch([object()])


def test_like_literal_matches_only_itself():
    assert flightsql.like_literal("my_ns%") == "my\\_ns\\%"
    assert flightsql.like_literal("a\\b") == "a\\\\b"


def test_pep249_module_surface():
    assert (dbapi.apilevel, dbapi.paramstyle, dbapi.threadsafety) == ("2.0", "qmark", 1)
    assert issubclass(dbapi.ProgrammingError, dbapi.DatabaseError) and issubclass(dbapi.DatabaseError, dbapi.Error)
    assert dbapi.NUMBER == "decimal128(15, 2)" and dbapi.NUMBER == "int64" and dbapi.NUMBER != "string"
    assert dbapi.DATETIME == "timestamp[us, tz=UTC]" and dbapi.STRING == "large_string"
    assert HudiFlightDialect.default_paramstyle == "qmark"


def test_server_down_names_the_uri():
    with pytest.raises(dbapi.OperationalError, match="127.0.0.1:1"):
        dbapi.connect("grpc://127.0.0.1:1", timeout=5)
