"""A float promoted to double reads as each Hudi release reads it: Hudi 1.x (table version 8+)
through the float's text (``0.35f`` -> ``0.35``), Hudi 0.x exactly (``0.3499999940395355``).

The factory's type-promotion tables hold floats a double represents exactly (``x.25``), and their
writes under the wide schema rewrote every file group in doubles. A copy of each gets its base
files written back with floats a double does not represent (``x.35``), as if no write since the
promotion had touched their file groups; it is read by listing storage (the files changed size).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from catalog import HudiTable
from catalog.format.float_text import floats_as_text
from catalog.read.cdc_json import java_float
from tests.support.written import written_tables

#: table -> whether its Hudi release widens a float through its text
PROMOTED = {"0.15.0/mor_type_promotion": False, "1.2.0/cow_type_promotion": True, "1.2.0/mor_type_promotion": True}
TABLES = [t for t in written_tables() if t.key in PROMOTED]


def _with_inexact_floats(base: Path) -> list[float]:
    """Write every ``score`` of the table's base files back as the float of its value plus 0.1;
    the new values, as floats."""
    written: list[float] = []
    for path in base.rglob("*.parquet"):
        if ".hoodie" in path.relative_to(base).parts:
            continue
        table = pq.read_table(path)
        score = pc.add(table["score"].cast(pa.float32()), pa.scalar(0.1, pa.float32()))
        at = table.schema.get_field_index("score")
        table = table.set_column(at, pa.field("score", pa.float32()), score)
        pq.write_table(table, path)
        written += [v for v in score.to_pylist() if v is not None]
    return written


@pytest.mark.parametrize("written", TABLES, ids=lambda t: t.key)
def test_a_float_read_as_double_as_its_release_reads_it(written_table, tmp_path, written):
    copy = tmp_path / written.name
    shutil.copytree(written_table(written), copy)
    floats = _with_inexact_floats(copy)
    assert floats
    exact = set(floats)
    as_text = {float(java_float(v)) for v in floats}  # Java's Float.toString, then parsed
    assert not exact & as_text  # every new value tells the two widenings apart
    table = HudiTable.open(str(copy), use_metadata_table=False)
    first = table.read(as_of=table.timeline.commits[0].requested_time)
    assert first.schema.field("score").type == pa.float32()  # as written: nothing widened
    assert set(first["score"].to_pylist()) <= exact
    snapshot = table.read()
    assert snapshot.schema.field("score").type == pa.float64()
    values = set(snapshot["score"].to_pylist())
    expected, other = (as_text, exact) if PROMOTED[written.key] else (exact, as_text)
    assert values & expected and not values & other, (sorted(values), sorted(expected))


def test_floats_in_structs_widen_through_their_text_and_other_columns_stay():
    schema = pa.schema([("a", pa.float64()), ("s", pa.struct([("x", pa.float64()), ("y", pa.string())])),
                        ("b", pa.float32())])
    data = pa.table({
        "a": pa.array([0.15, None], pa.float32()),
        "s": pa.array([{"x": 1.1, "y": "q"}, None], pa.struct([("x", pa.float32()), ("y", pa.string())])),
        "b": pa.array([0.15, 1.0], pa.float32()),
    })
    for sliced in (data, data.to_batches()[0].slice(1)):
        out = floats_as_text(sliced, schema)
        assert out["b"].type == pa.float32() and out["s"].type.field("y").type == pa.string()
    out = floats_as_text(data, schema)
    assert out["a"].to_pylist() == [0.15, None]
    assert out["s"].to_pylist() == [{"x": 1.1, "y": "q"}, None]
    assert out["b"].to_pylist() == data["b"].to_pylist()
