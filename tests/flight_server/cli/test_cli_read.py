"""``hudi-flight read`` as a SQL shell prints: only the rows shown are fetched, an exact count of
the rest, readable nested and binary cells, cuts marked with an ellipsis, widths bounded,
progress that ends at the real count, output files checked before reading. Runs against an
in-process server on a generated merge-on-read table (nested ``location`` column)."""

from __future__ import annotations

import io
import re
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from catalog import HudiTable
from flight_server.cli.main import main
from flight_server.cli.output import CliError, OutputFile, Progress, cell_text, format_table
from flight_server.client.session import HudiFlightClient
from flight_server.server.config import ServerConfig
from hudi_generator import generator
from tests.support.servers import running_server

TABLE = "lake.trips"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("wh")
    path = root / "lake" / "trips"
    spec = generator.GeneratorSpec(rows=300, partitions=3, commits=2, table_type=generator.MERGE_ON_READ,
                                   table_name="trips")
    generator.generate(str(path), spec)
    config = ServerConfig(port=0, warehouses=[str(root)], state_dir=str(tmp_path_factory.mktemp("state")),
                          refresh_interval_seconds=0)
    with running_server(config) as server:
        yield f"grpc://127.0.0.1:{server.port}", HudiTable.open(str(path))


def _run(capsys, uri, *argv) -> tuple[int, str, str]:
    code = main([*argv, "--server", uri])
    out, err = capsys.readouterr()
    return code, out, err


def _rows(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.split(" | ")] for line in out.splitlines()[2:-1]]


def test_readme_columns_and_quoted_filters(served, capsys):
    uri, table = served
    region = table.read(columns=["region"])["region"][0].as_py()
    code, out, err = _run(capsys, uri, "read", TABLE, "--columns", "rider", "fare", "--columns", "region",
                          "--filter", f"region in ('{region}', \"nowhere\") and fare >= 0", "--limit", "1000")
    expected = table.read(columns=["rider", "fare", "region"], filters=[("region", "in", [region]), ("fare", ">=", 0)])
    assert code == 0, err
    assert [c.strip() for c in out.splitlines()[0].split(" | ")] == ["rider", "fare", "region"]
    assert sorted(r[0] for r in _rows(out)) == sorted(expected["rider"].to_pylist())
    assert out.splitlines()[-1] == f"({expected.num_rows} rows)"


def test_display_limit_fetches_only_the_rows_shown_and_counts_the_rest(served, capsys, monkeypatch):
    uri, table = served
    sent = []
    plan = HudiFlightClient.plan

    def spy(self, name, options=None, /, **kwargs):
        sent.append(options)
        return plan(self, name, options, **kwargs)

    monkeypatch.setattr(HudiFlightClient, "plan", spy)
    code, out, err = _run(capsys, uri, "read", TABLE, "--columns", "uuid", "--max-rows", "4")
    total = table.read().num_rows
    assert code == 0, err
    assert sent[0].limit == 5  # the rows shown, plus one to know whether there are more
    assert len(_rows(out)) == 4
    assert out.splitlines()[-1] == (f"(4 rows shown; {total - 4} more: --limit N shows N rows, "
                                    "--output FILE writes them all)")


def test_limit_shows_that_many_rows(served, capsys):
    uri, _ = served
    code, out, _ = _run(capsys, uri, "read", TABLE, "--columns", "uuid", "--limit", "7")
    assert code == 0 and len(_rows(out)) == 7 and out.splitlines()[-1] == "(7 rows)"


def test_nested_cells_are_readable_and_cut_with_an_ellipsis(served, capsys, monkeypatch):
    uri, table = served
    monkeypatch.setattr("flight_server.cli.output.terminal_width", lambda: 60)
    code, out, _ = _run(capsys, uri, "read", TABLE, "--columns", "uuid,location,fare", "--limit", "3")
    assert code == 0
    lines = out.splitlines()
    assert all(len(line) <= 60 for line in lines)
    cells = _rows(out)
    assert all(re.fullmatch(r"\{lat: -?[\d.]+, lo.*…", row[1]) for row in cells), cells


def test_csv_of_nested_columns_is_refused_before_reading(served, capsys, monkeypatch, tmp_path):
    uri, _ = served

    def no_fetch(*args, **kwargs):
        raise AssertionError("fetched rows before checking the output")

    monkeypatch.setattr(HudiFlightClient, "fetch_all", no_fetch)
    target = tmp_path / "out.csv"
    code, out, err = _run(capsys, uri, "read", TABLE, "--output", str(target))
    assert code == 1 and out == "" and not target.exists()
    assert err.strip() == (f"hudi-flight: error: --output {target}: CSV cannot hold the nested column(s) location; "
                           "write .parquet, or leave them out with --columns")


def test_output_writes_every_row(served, capsys, tmp_path):
    uri, table = served
    target = tmp_path / "all.parquet"
    code, out, _ = _run(capsys, uri, "read", TABLE, "--output", str(target), "--columns", "uuid", "location")
    assert code == 0 and out.strip() == f"wrote {table.read().num_rows} rows to {target}"
    assert sorted(pq.read_table(target)["uuid"].to_pylist()) == sorted(table.read(columns=["uuid"])["uuid"].to_pylist())
    assert not (tmp_path / "all.parquet.partial").exists()


def test_time_travel_takes_iso_instants(served, capsys):
    uri, table = served
    first = table.timeline.commits[0].requested_time
    iso = f"{first[:4]}-{first[4:6]}-{first[6:8]}T{first[8:10]}:{first[10:12]}:{first[12:14]}.{first[14:]}"
    expected = table.read(as_of=first, columns=["uuid"])
    for instant in (first, iso, iso + "Z"):  # the test process's zone is the table's LOCAL one
        code, out, err = _run(capsys, uri, "read", TABLE, "--columns", "uuid", "--as-of", instant, "--limit", "100000")
        assert code == 0, err
        if instant.endswith("Z"):
            continue  # converted to this process's zone: checked in tests/catalog/plan/test_instants.py
        assert sorted(r[0] for r in _rows(out)) == sorted(expected["uuid"].to_pylist())


def test_progress_ends_at_the_endpoints_planned(served):
    uri, _ = served
    stream = io.StringIO()
    progress = Progress(TABLE, stream)
    with HudiFlightClient(uri) as client:
        plan = client.plan(TABLE)
        progress.planned(len(plan.endpoints), plan.total_records)
        for batch in client.fetch_all(plan.endpoints, lambda _ep: progress.endpoint_done()):
            progress.add_rows(batch.num_rows)
    assert progress.done == progress.endpoints == len(plan.endpoints) > 1
    shown = stream.getvalue()
    assert shown.rstrip().endswith(f"{len(plan.endpoints)}/{len(plan.endpoints)} endpoints, "
                                   f"{progress.rows:,} rows (100%)")
    # on the way: the server's estimate, marked as one, and a percentage below 100
    assert f" of ~{plan.total_records:,} rows (" in shown
    assert all(int(p) < 100 for p in re.findall(r"(\d+)%\)", shown.rsplit("\r", 1)[0]))


@pytest.mark.parametrize(
    "value, text",
    [
        (None, "NULL"),
        (True, "true"),
        (b"\x00\xff" * 3, "0x00ff00ff00ff"),
        (bytes(range(20)), "0x000102030405060708090a0b0c0d0e0f…"),
        ({"a": 1, "b": "x, y"}, "{a: 1, b: 'x, y'}"),
        ([("k", 1), ("j", None)], "{'k': 1, 'j': NULL}"),
        (["a", "b"], "['a', 'b']"),
        (Decimal("1.50"), "1.50"),
        ("line\nbreak", "line\\nbreak"),
    ],
)
def test_cell_text(value, text):
    assert cell_text(value) == text


def test_grid_bounds_widths_and_marks_cuts():
    table = pa.table({"name": ["x" * 100], "n": [1]})
    grid = format_table(table, width=40).splitlines()
    assert grid[2].startswith("x" * 10) and "…" in grid[2] and len(grid[2]) <= 40
    assert grid[-1] == "(1 row)"


def test_a_grid_that_would_cut_column_names_prints_records_instead():
    table = pa.table({"_hoodie_commit_time": ["20240101"], "_hoodie_record_key": ["k" * 100], "n": [1]})
    assert format_table(table, width=60).splitlines() == [
        "-[ RECORD 1 ]---------",
        "_hoodie_commit_time | 20240101",
        "_hoodie_record_key  | " + "k" * 37 + "…",
        "n                   | 1",
        "(1 row)",
    ]
    assert format_table(table, width=200).splitlines()[0].split(" | ")[0] == "_hoodie_commit_time"  # room: a grid
    assert format_table(table.select(["n"]), width=60, vertical=True).splitlines()[:2] == ["-[ RECORD 1 ]-", "n | 1"]


def test_read_without_columns_shows_every_name_whole(served, capsys, monkeypatch):
    uri, table = served
    monkeypatch.setenv("COLUMNS", "80")  # the terminal width the grid is laid out for
    code, out, err = _run(capsys, uri, "read", TABLE, "--limit", "2")
    assert code == 0, err
    names = [line.split(" | ")[0].strip() for line in out.splitlines() if " | " in line]
    assert names == table.schema.names * 2 and "…" not in "".join(names)  # every field of both records
    assert out.splitlines()[0].startswith("-[ RECORD 1 ]") and out.splitlines()[-1] == "(2 rows)"
    code, out, _ = _run(capsys, uri, "read", TABLE, "--limit", "1", "--columns", "rider", "--vertical")
    assert code == 0 and out.splitlines()[1].startswith("rider | ")


def test_output_file_checks_format_and_leaves_nothing_on_failure(tmp_path):
    schema = pa.schema([("a", pa.int64())])
    with pytest.raises(CliError, match="unknown file type .txt"):
        OutputFile(str(tmp_path / "x.txt"), schema)
    target = tmp_path / "x.parquet"
    with pytest.raises(RuntimeError):
        with OutputFile(str(target), schema) as out:
            out.write(pa.record_batch([pa.array([1])], schema=schema))
            raise RuntimeError("stream broke")
    assert list(tmp_path.iterdir()) == []


def test_the_count_of_the_rest_honours_filters_and_time_travel(served, capsys):
    uri, table = served
    first = table.timeline.commits[0].requested_time
    expected = table.read(filters=[("fare", ">", 100), ("region", "!=", "x y")], as_of=first).num_rows
    code, out, err = _run(capsys, uri, "read", TABLE, "--columns", "uuid", "--max-rows", "2", "--as-of", first,
                          "--filter", "fare > 100", "--filter", "\"region\" != 'x y'")
    assert code == 0, err
    assert out.splitlines()[-1].startswith(f"(2 rows shown; {expected - 2} more: ")


def test_the_count_of_the_rest_of_a_read_optimized_query(served, capsys):
    uri, table = served
    expected = table.read(query_type="read_optimized").num_rows
    code, out, err = _run(capsys, uri, "read", TABLE, "--columns", "uuid", "--max-rows", "3",
                          "--query-type", "read_optimized")
    assert code == 0, err
    assert out.splitlines()[-1].startswith(f"(3 rows shown; {expected - 3} more: ")


def test_an_incremental_read_says_more_rows_were_not_fetched(served, capsys):
    """Flight SQL has no incremental count: the footer says the rest was not fetched, no number."""
    uri, _ = served
    code, out, err = _run(capsys, uri, "read", TABLE, "--columns", "uuid", "--max-rows", "1",
                          "--query-type", "incremental", "--start", "00000000000000000")
    assert code == 0, err
    assert out.splitlines()[-1] == ("(1 row shown; more not fetched: --limit N shows N rows, "
                                    "--output FILE writes them all)")
