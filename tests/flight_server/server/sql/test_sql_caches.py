"""The SQL room's caches are built by the composition root, sized by the ``sql_*_cache_bytes``
settings, and report their counters (their byte totals in bytes) to the metrics' listener."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.flight as flight

from catalog import HudiTable
from flight_server.server.app import sql_statements
from flight_server.server.config import ServerConfig
from hudi_generator.generator import COPY_ON_WRITE, GeneratorSpec, generate


def test_the_sql_caches_are_sized_by_the_config_and_report_bytes(tmp_path):
    events: list[tuple[str, str, int]] = []
    config = ServerConfig(state_dir=str(tmp_path / "state"), sql_analysis_cache_bytes=1 << 20,
                          sql_fragment_cache_bytes=3 << 20, sql_flight_info_cache_bytes=2 << 20)
    statements = sql_statements(config, config.call_limits(), lambda *event: events.append(event))
    try:
        text = "SELECT 1 AS one"
        assert statements.placeholder_count(text) == 0  # a template kept
        schema = pa.schema([("one", pa.int32())])
        statements.infos.info(schema, flight.FlightDescriptor.for_command(b"x"), [], -1, -1, ordered=True)
        path = str(tmp_path / "t")
        generate(path, GeneratorSpec(rows=20, partitions=1, files_per_partition=2, commits=1,
                                     table_type=COPY_ON_WRITE, workers=1))
        assert HudiTable.open(path).scan().to_dataset(statements.fragments) is not None
        assert statements.fragments.stats().max_bytes == 3 << 20
    finally:
        statements.engine.stop_all()
    totals = {name: amount for name, event, amount in events if event == "bytes"}
    assert totals["sql_templates"] > len(text)  # bytes, not entries
    assert totals["sql_wire_schemas"] >= len(schema.serialize())
    assert totals["sql_fragments"] > 1024
    assert {("sql_templates", "miss"), ("sql_fragments", "miss")} <= {(n, e) for n, e, _ in events}
