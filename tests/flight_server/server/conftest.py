"""Fixtures of the server tests: a plain pyarrow.flight client of the module's ``server``,
authenticated as the admin user (``tests.support.auth``)."""

from __future__ import annotations

import pytest

from tests.support.auth import admin_client


@pytest.fixture(scope="module")
def client(server):
    """A stock ``pyarrow.flight`` client of the module's ``server`` fixture, logged in as admin."""
    c = admin_client(server)
    yield c
    c.close()
