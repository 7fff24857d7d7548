"""Flight SQL calls the tests make by hand (what ADBC does under the hood)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.protocol import pack, sql


def bind(client: flight.FlightClient, handle: bytes, parameters: pa.RecordBatch) -> bytes:
    """DoPut ``parameters`` to the prepared statement ``handle``; the bound handle it answers."""
    descriptor = flight.FlightDescriptor.for_command(pack(sql.CommandPreparedStatementQuery(
        prepared_statement_handle=handle)))
    writer, reader = client.do_put(descriptor, parameters.schema)
    writer.write_batch(parameters)
    writer.done_writing()
    answer = sql.DoPutPreparedStatementResult()
    answer.ParseFromString(reader.read().to_pybytes())
    writer.close()
    return answer.prepared_statement_handle
