"""Copy-on-write reads of generated tables against the generator's own expected rows
(independent of the ``hudi`` package: catalog.testing shares no code path with the readers)."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from catalog import HudiTable
from hudi_generator.generator import GeneratorSpec, expected_table
from tests.support.compare import assert_same_rows


@pytest.mark.parametrize("levels, hive", [(1, True), (2, False)])
def test_generated_cow_table(generated_table, levels, hive):
    spec = GeneratorSpec(rows=3000, partitions=4, partition_levels=levels, hive_style=hive, files_per_partition=2,
                         commits=3, metadata_table=False, workers=1, row_group_size=500)
    table = HudiTable.open(generated_table(spec))
    expected = expected_table(spec, with_meta=False)
    data_columns = expected.column_names
    ours = table.read(columns=data_columns)
    assert_same_rows(ours, expected, "generated snapshot")
    # A filter on a data column: pushed into the Parquet reader, exact on rows.
    column = next(c for c in data_columns if expected.schema.field(c).type in ("double", "int64"))
    cut = sorted(expected.column(column).to_pylist())[expected.num_rows // 2]
    ours = table.read(columns=data_columns, filters=[(column, ">", cut)])
    assert_same_rows(ours, expected.filter(pc.greater(expected.column(column), cut)), "generated filter")
    assert len(table.timeline.commits) == 3
