"""The one instant grammar (docs/reading.md "Instants"): forms, refusals, the timeline zone."""

from __future__ import annotations

import shutil
import time
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog import HudiTable, InvalidInstantError, ReadOptions
from catalog.plan.options import INSTANT_FORMS, instant_in_zone, parse_instant, resolve
from tests.support.compare import assert_same_rows

V9 = "sample_table/cow/v9_txns_simple_meta"


@pytest.mark.parametrize(
    "text, canonical",
    [
        ("20240131120000123", "20240131120000123"),
        ("20240131120000", "20240131120000"),
        ("00000000000000000", "00000000000000000"),  # Hudi's initial instant: before every commit
        ("00000000000000", "00000000000000"),
        ("2024-01-31", "20240131000000000"),
        ("2024-01-31T12:00", "20240131120000000"),
        ("2024-01-31 12:00:05", "20240131120005000"),
        ("2024-01-31T12:00:05.5", "20240131120005500"),
        ("2024-01-31T12:00:05.123456", "20240131120005123"),
        (" 2024-01-31T12:00:05.123 ", "20240131120005123"),
        ("2024-01-31T12:00:05Z", "2024-01-31T12:00:05.000+00:00"),
        ("2024-01-31t12:00:05.25+0530", "2024-01-31T12:00:05.250+05:30"),
        ("2024-01-31T12:00:05-02", "2024-01-31T12:00:05.000-02:00"),
    ],
)
def test_accepted_forms(text, canonical):
    assert parse_instant(text, "as_of") == canonical
    assert ReadOptions(as_of=text).as_of == canonical


def test_long_instant_texts_are_parsed_but_not_kept():
    """Instant texts come from clients: a valid one padded with a megabyte of spaces is read, but
    the kept parses hold only short texts (else 1,024 such texts would hold a gigabyte)."""
    from catalog.plan import options

    padded = " " * (1 << 20) + "2024-01-31T12:00:05" + " " * 7
    before = options._kept_canonical_instant.cache_info()
    assert parse_instant(padded, "as_of") == "20240131120005000"
    after = options._kept_canonical_instant.cache_info()
    assert (after.hits, after.misses) == (before.hits, before.misses)
    short = "2024-01-31T12:00:05 "
    parse_instant(short, "as_of")
    assert options._kept_canonical_instant.cache_info().hits + options._kept_canonical_instant.cache_info().misses > (
        after.hits + after.misses
    )


@pytest.mark.parametrize(
    "text, why",
    [
        ("2024-01-01T25:61:61", "hour must be in 0..23"),
        ("2024-13-01", "month must be in 1..12"),
        ("20241301000000000", "month must be in 1..12"),
        ("20240230000000000", "day is out of range"),
        ("20240101246000", "hour must be in 0..23"),
        ("2024-01-01T12:00:00+24:00", "zone offset +24:00 out of range"),
        ("yesterday", ""),
        ("2024-01-01Z", ""),
        ("2024010112", ""),
        ("20250522045918378001", ""),
        ("1700000000", ""),
    ],
)
def test_refused_with_the_one_message(text, why):
    with pytest.raises(InvalidInstantError) as err:
        ReadOptions(as_of=text)
    message = str(err.value)
    assert message.startswith(f"malformed as_of {text!r}") and message.endswith(f"expected {INSTANT_FORMS}")
    assert why in message


def test_start_and_end_use_the_same_grammar():
    options = ReadOptions(query_type="incremental", start="2024-01-01", end="2024-01-02T00:00:00.5")
    assert (options.start, options.end) == ("20240101000000000", "20240102000000500")
    with pytest.raises(InvalidInstantError, match="malformed end '2024-02-30'"):
        ReadOptions(query_type="incremental", end="2024-02-30")


@pytest.fixture
def local_zone(monkeypatch):
    """Set this process's local zone (what a ``LOCAL`` timeline means) for one test."""

    def use(zone: str) -> None:
        monkeypatch.setenv("TZ", zone)
        time.tzset()

    yield use
    monkeypatch.undo()
    time.tzset()


def test_zoned_instants_are_written_in_the_timeline_zone(local_zone):
    zoned = parse_instant("2024-01-31T12:00:05.250Z")
    assert instant_in_zone(zoned, "UTC") == "20240131120005250"
    local_zone("Asia/Shanghai")
    assert instant_in_zone(zoned, "LOCAL") == "20240131200005250"
    assert instant_in_zone(parse_instant("2024-01-31T20:00:05.250+08:00"), "UTC") == "20240131120005250"
    assert instant_in_zone("20240131120005250", "UTC") == "20240131120005250"  # digits are already in it


def _iso(instant: str, zone: str = "") -> str:
    moment = datetime.strptime(instant[:14], "%Y%m%d%H%M%S")
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{instant[14:17] or '000'}{zone}"


def test_every_form_reads_the_same_rows(fixture_table, local_zone):
    """Naive ISO timestamps are wall clock times of the table's zone (no conversion); zoned ones
    are converted to it (LOCAL here: the fixtures set no timeline zone)."""
    table = HudiTable.open(fixture_table(V9))
    first = table.timeline.commits[0].requested_time
    expected = table.read(as_of=first)
    local_zone("Asia/Shanghai")
    for form in (_iso(first), _iso(first, "+08:00"), _iso(first, "+0800")):
        assert resolve(ReadOptions(as_of=form), table.timeline).options.as_of == first, form
        assert_same_rows(table.read(as_of=form), expected, exact_types=True)
    zoned = resolve(ReadOptions(as_of=_iso(first, "Z")), table.timeline).options.as_of
    assert zoned == instant_in_zone(parse_instant(_iso(first, "Z")), "LOCAL") and zoned > first


def test_utc_timeline_zone(fixture_table, tmp_path, local_zone):
    """A table written with ``hoodie.table.timeline.timezone=UTC``: zoned instants go to UTC,
    whatever this process's zone is."""
    path = tmp_path / "utc"
    shutil.copytree(fixture_table(V9), path)
    props = path / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text() + "hoodie.table.timeline.timezone=UTC\n")
    local_zone("America/New_York")
    table = HudiTable.open(str(path))
    last = table.timeline.commits[-1].requested_time
    resolved = resolve(ReadOptions(as_of=_iso(last, "-01:00")), table.timeline)
    an_hour_later = datetime.strptime(last[:14], "%Y%m%d%H%M%S") + timedelta(hours=1)
    assert resolved.options.as_of == f"{an_hour_later:%Y%m%d%H%M%S}{last[14:]}"
    assert_same_rows(table.read(as_of=_iso(last, "-01:00")), table.read(), exact_types=True)


@settings(max_examples=200, deadline=None)
@given(st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31)),
       st.sampled_from(["T", " "]), st.sampled_from(["seconds", "milliseconds", "microseconds"]))
def test_iso_and_digits_agree(moment, separator, timespec):
    digits = f"{moment:%Y%m%d%H%M%S}{moment.microsecond // 1000:03d}" if timespec != "seconds" else (
        f"{moment:%Y%m%d%H%M%S}000")
    assert parse_instant(moment.isoformat(sep=separator, timespec=timespec)) == digits
    assert parse_instant(digits) == digits
    zoned = parse_instant(moment.isoformat(timespec="milliseconds") + "Z")
    assert instant_in_zone(zoned, "UTC") == f"{moment:%Y%m%d%H%M%S}{moment.microsecond // 1000:03d}"


def test_a_long_instant_is_cut_in_the_message():
    with pytest.raises(InvalidInstantError) as err:
        ReadOptions(as_of="9" * 10_000)
    assert len(str(err.value)) < 300 and "…" in str(err.value)
