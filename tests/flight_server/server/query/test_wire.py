"""The hand-written check of query commands is never looser than the JSON Schema: whatever it
accepts, the schema accepts too (it only spares the schema walk)."""

from __future__ import annotations

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

import schemas
from flight_server.server.query.wire import _COMMAND_SHAPE

VALIDATOR = jsonschema.Draft202012Validator(schemas.load("command.schema.json"))
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5))
anything = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                              max_size=2), max_leaves=6)
ops = st.sampled_from(["=", "in", "is null", "<=", "like", "", "not in"])
filters = st.lists(st.one_of(
    st.tuples(st.text(max_size=3), ops).map(list),
    st.tuples(st.text(max_size=3), ops, st.one_of(scalars, st.lists(scalars, max_size=3), anything)).map(list),
    anything,
), max_size=3)
commands = st.fixed_dictionaries(
    {"table": st.one_of(st.sampled_from(["ns.t", "a.b\n", "ns.t.x", ".t", "n s.t"]), anything)},
    optional={
        "columns": st.one_of(st.lists(st.sampled_from(["a", "b", ""]), max_size=3), anything),
        "filters": st.one_of(filters, anything),
        "query_type": st.one_of(st.sampled_from(["snapshot", "incremental", "other"]), anything),
        "as_of": st.one_of(st.text(max_size=45), anything),
        "start": st.text(max_size=3),
        "limit": st.one_of(st.integers(-2, 5), st.floats(0, 3), st.booleans()),
        "extra": anything,
    },
)


@settings(max_examples=400, deadline=None)
@given(commands)
def test_the_hand_check_accepts_only_what_the_schema_accepts(doc):
    if _COMMAND_SHAPE.accepts(doc):
        assert VALIDATOR.is_valid(doc), doc


def test_the_hand_check_takes_the_common_commands():
    for doc in (
        {"table": "ns.t"},
        {"table": "ns.t", "filters": [["uuid", "=", "trip-1"]], "columns": ["a", "b"], "limit": 3},
        {"table": "ns.t", "filters": [["x", "in", [1, 2.5, None]], ["y", "is null"]], "as_of": "20240101000000000"},
        {"table": "ns.t", "query_type": "incremental", "start": "1", "end": "2"},
    ):
        assert _COMMAND_SHAPE.accepts(doc) and VALIDATOR.is_valid(doc)
