"""The filter text grammar (docs/filters.md): parsing, refusals by token and position, round trips."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from catalog.plan.filter_text import FilterSyntaxError, format_filters, parse_filter_texts, parse_filters
from catalog.plan.filters import bind_filters, to_expression
from catalog.plan.options import ReadOptions


@pytest.mark.parametrize(
    "text, expected",
    [
        ("merchant_name = 'Grab'", [("merchant_name", "=", "Grab")]),
        ('merchant_name = "Grab"', [("merchant_name", "=", "Grab")]),
        ("city = sao_paulo", [("city", "=", "sao_paulo")]),
        ("city=sf", [("city", "=", "sf")]),
        ("region in (us, eu)", [("region", "in", ("us", "eu"))]),
        ("region IN ('us','eu')", [("region", "in", ("us", "eu"))]),
        ("region not in ('us')", [("region", "not in", ("us",))]),
        ("n >= 3 and x <> -2.5", [("n", ">=", 3), ("x", "!=", -2.5)]),
        ("n == 1e3", [("n", "=", 1000.0)]),
        ("flag = TRUE", [("flag", "=", True)]),
        ("flag is not null AND other IS NULL", [("flag", "is not null", None), ("other", "is null", None)]),
        ("name = 'O''Hare'", [("name", "=", "O'Hare")]),
        ("`my col` < 'a b'", [("my col", "<", "a b")]),
        ('"my col" < "a b"', [("my col", "<", "a b")]),
        ("s = '3'", [("s", "=", "3")]),
        ("d >= 2024-01-01", [("d", ">=", "2024-01-01")]),
        ("s = 'and'", [("s", "=", "and")]),
    ],
)
def test_parses(text, expected):
    assert parse_filters(text) == expected


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("a = 1 or b = 2", "OR at position 7"),
        ("a in (1, 2", "unexpected end of filter at position 11"),
        ("a in 1", "unexpected '1' at position 6; expected '('"),
        ("a = ", "unexpected end of filter at position 5; expected a value"),
        ("a = 'x", "unmatched quote ' at position 5"),
        ("= 3", "unexpected '=' at position 1; expected a column name"),
        ("a = null", "null at position 5 is not a value; use IS NULL"),
        ("a ! 3", "'!' without '=' (not equal is !=) at position 3"),
        ("a 3", "unexpected '3' at position 3; expected an operator"),
        ("a = 1 b = 2", "unexpected 'b' at position 7; expected AND"),
        ("a is not 3", "unexpected '3' at position 10; expected NULL"),
        ("a = and", "unexpected 'and' at position 5; expected a value (quote it"),
        ("a not like 'x'", "unexpected 'like' at position 7; expected IN after NOT"),
        ("", "the filter text is empty"),
    ],
)
def test_refused_with_token_and_position(text, fragment):
    with pytest.raises(FilterSyntaxError) as err:
        parse_filters(text)
    assert fragment in str(err.value)
    assert isinstance(err.value, ValueError)


def test_several_texts_are_anded():
    assert parse_filter_texts(["a = 1 and b = 2", "c is null"]) == [("a", "=", 1), ("b", "=", 2), ("c", "is null", None)]


def test_read_options_take_filter_text():
    assert ReadOptions(filters="region in (us, eu) and fare > 3").filters == (
        ("region", "in", ("us", "eu")), ("fare", ">", 3))


def test_parsed_filters_bind_and_filter_rows():
    table = pa.table({"region": ["us", "eu", "asia", None], "fare": [1.0, 5.0, 9.0, 2.0]})
    bound = bind_filters(parse_filters("region in ('us', eu) and fare >= 2"), table.schema)
    assert table.filter(to_expression(bound)).to_pylist() == [{"region": "eu", "fare": 5.0}]


_columns = st.one_of(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True),
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8),
)
_values = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
_filters = st.one_of(
    st.tuples(_columns, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), _values),
    st.tuples(_columns, st.sampled_from(["in", "not in"]), st.lists(_values, min_size=1, max_size=4).map(tuple)),
    st.tuples(_columns, st.sampled_from(["is null", "is not null"]), st.none()),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_filters, min_size=1, max_size=4))
@example([("A", "=", ""), ("A\n", "=", "")])  # a name ending in a line break is quoted
def test_round_trip(filters):
    parsed = parse_filters(format_filters(filters))
    assert len(parsed) == len(filters)
    for (col, op, value), (pcol, pop, pvalue) in zip(filters, parsed):
        assert (pcol, pop) == (col, op)
        if isinstance(value, float):
            assert isinstance(pvalue, float) and math.isclose(pvalue, value, rel_tol=0, abs_tol=0)
        else:
            assert pvalue == value and type(pvalue) is type(value)
