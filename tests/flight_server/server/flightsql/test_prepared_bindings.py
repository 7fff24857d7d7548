"""One prepared statement executed through ADBC with binding after binding (the statement is
analysed once per kind of binding): every binding answers what a fresh statement with the value
written out answers, whatever the value (a key that hits or misses, NULL, a value of another
type, text that tries to break out of its literal), and a commit landing between two executions
is seen by the next one."""

from __future__ import annotations

import re

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pytest

from catalog.hudi_table import HudiTable
from flight_server.server.sql.query import bind
from hudi_generator.generator import GeneratorSpec
from tests.flight_server.server.cache.test_table_cache import SPEC, TABLE, land_commit, new_commit_files, serving_a_copy
from tests.support.compare import assert_same_rows

KEY = f"SELECT * FROM {TABLE} WHERE uuid = ?"
QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")  # a value an error quotes
RANGE = f"SELECT uuid, fare FROM {TABLE} WHERE fare > ? AND uuid <> ? ORDER BY uuid"


@pytest.fixture(scope="module")
def versions(generated_table):
    """(one-commit table, two-commit table) of one spec."""
    return generated_table(GeneratorSpec(commits=1, **SPEC)), generated_table(GeneratorSpec(commits=2, **SPEC))


@pytest.fixture
def served(versions, tmp_path):
    """(table path, ADBC connection) of a server of a private copy of the one-commit table."""
    with serving_a_copy(versions[0], tmp_path) as (server, client, path):
        conn = adbc.connect(f"grpc://127.0.0.1:{server.port}", autocommit=True)
        yield path, conn
        conn.close()


def _answer(cursor, sql: str, parameters=None) -> pa.Table | str:
    """The rows, or the error's first line without the value it quotes (a binding must fail as
    the written statement does; the engine quotes whichever row it met first)."""
    try:
        cursor.execute(sql, parameters)
        return cursor.fetch_arrow_table()
    except Exception as err:  # noqa: BLE001 - the error itself is the answer compared
        first = f"{type(err).__name__}: {str(err).splitlines()[0].split(' Detail:')[0]}"
        return QUOTED.sub("...", first)


def _same(ours: pa.Table | str, fresh: pa.Table | str) -> None:
    if isinstance(fresh, str) or isinstance(ours, str):
        assert ours == fresh
    else:
        assert_same_rows(ours, fresh, exact_types=True)


def test_every_binding_answers_as_a_fresh_statement(served):
    path, conn = served
    keys = HudiTable.open(path).read(columns=["uuid"]).column("uuid").to_pylist()
    values = [keys[0], keys[7], "trip-missing", None, 42, -1.5, True, "x' OR '1'='1", "'); SELECT 1; --",
              keys[3] + "' --", keys[5]]
    prepared, fresh = conn.cursor(), conn.cursor()
    try:
        for value in values:
            ours = _answer(prepared, KEY, (value,))
            _same(ours, _answer(fresh, bind(KEY, [value])))
            if value in keys:
                assert isinstance(ours, pa.Table) and ours.column("uuid").to_pylist() == [value]
            elif isinstance(value, str):
                assert isinstance(ours, pa.Table) and ours.num_rows == 0  # text is a value, never SQL
        for fare, key in ((10.0, keys[1]), (50, keys[2]), (-1.0, None), (None, keys[1]), (90.5, "it's")):
            _same(_answer(prepared, RANGE, (fare, key)), _answer(fresh, bind(RANGE, [fare, key])))
    finally:
        prepared.close()
        fresh.close()


def test_a_commit_is_seen_by_the_next_execution(served, versions):
    path, conn = served
    before = HudiTable.open(path).read(columns=["uuid", "fare"])
    fares = dict(zip(before.column("uuid").to_pylist(), before.column("fare").to_pylist()))
    later = HudiTable.open(versions[1]).read(columns=["uuid", "fare"])
    fares_later = dict(zip(later.column("uuid").to_pylist(), later.column("fare").to_pylist()))
    changed = sorted(k for k, fare in fares.items() if fares_later.get(k) != fare)
    assert changed  # the second commit deletes or updates rows
    key = changed[0]
    cursor = conn.cursor()
    try:
        first = _answer(cursor, f"SELECT uuid, fare FROM {TABLE} WHERE uuid = ?", (key,))
        land_commit(path, versions[1], new_commit_files(path, versions[1]))
        again = _answer(cursor, f"SELECT uuid, fare FROM {TABLE} WHERE uuid = ?", (key,))
    finally:
        cursor.close()
    assert first.to_pylist() == [{"uuid": key, "fare": fares[key]}]
    assert_same_rows(again, HudiTable.open(path).read(columns=["uuid", "fare"], filters=[("uuid", "=", key)]),
                     exact_types=True)
    assert again.to_pylist() != first.to_pylist()
