"""Fixtures of the server tests: a plain pyarrow.flight client of the module's ``server``."""

from __future__ import annotations

import pyarrow.flight as flight
import pytest


@pytest.fixture(scope="module")
def client(server):
    """A stock ``pyarrow.flight`` client connected to the module's ``server`` fixture."""
    c = flight.connect(f"grpc://127.0.0.1:{server.port}")
    yield c
    c.close()
