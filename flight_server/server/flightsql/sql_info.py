"""GetSqlInfo: what the server tells SQL clients about itself (codes of FlightSql.proto ``SqlInfo``)."""

from __future__ import annotations

from importlib import metadata
from typing import Iterable

import pyarrow as pa

from flight_server.server.flightsql import schemas as s

# SqlInfo codes
SERVER_NAME, SERVER_VERSION, SERVER_ARROW_VERSION, SERVER_READ_ONLY, SERVER_SQL, SERVER_SUBSTRAIT = range(6)
SERVER_TRANSACTION, SERVER_CANCEL, SERVER_BULK_INGESTION = 8, 9, 10
SQL_DDL_CATALOG, SQL_DDL_SCHEMA, SQL_DDL_TABLE, SQL_IDENTIFIER_CASE, SQL_IDENTIFIER_QUOTE_CHAR = 500, 501, 502, 503, 504
SQL_QUOTED_IDENTIFIER_CASE, SQL_ALL_TABLES_ARE_SELECTABLE, SQL_NULL_ORDERING, SQL_KEYWORDS = 505, 506, 507, 508
SQL_SEARCH_STRING_ESCAPE, SQL_SUPPORTS_COLUMN_ALIASING, SQL_TRANSACTIONS_SUPPORTED = 513, 515, 553

TRANSACTION_NONE = 0
CASE_INSENSITIVE = 1
NULLS_SORTED_AT_END = 3

#: words with a meaning to hudi-flight's SQL beyond SQL-92 (JDBC getSQLKeywords asks for these)
KEYWORDS = ["HUDI_TABLE_CHANGES", "LATEST_STATE", "QUALIFY", "SYSTEM_TIME"]


def _version() -> str:
    try:
        return metadata.version("hudi-flight")
    except metadata.PackageNotFoundError:
        return "0"


def _values() -> dict[int, tuple[int, object]]:
    return {
        SERVER_NAME: (s.STRING_VALUE, "hudi-flight"),
        SERVER_VERSION: (s.STRING_VALUE, _version()),
        SERVER_ARROW_VERSION: (s.STRING_VALUE, pa.__version__),
        SERVER_READ_ONLY: (s.BOOL_VALUE, True),
        SERVER_SQL: (s.BOOL_VALUE, True),
        SERVER_SUBSTRAIT: (s.BOOL_VALUE, False),
        SERVER_TRANSACTION: (s.INT32_BITMASK, TRANSACTION_NONE),
        SERVER_CANCEL: (s.BOOL_VALUE, False),
        SERVER_BULK_INGESTION: (s.BOOL_VALUE, False),
        SQL_DDL_CATALOG: (s.BOOL_VALUE, False),
        SQL_DDL_SCHEMA: (s.BOOL_VALUE, False),
        SQL_DDL_TABLE: (s.BOOL_VALUE, False),
        SQL_IDENTIFIER_CASE: (s.INT32_BITMASK, CASE_INSENSITIVE),
        SQL_IDENTIFIER_QUOTE_CHAR: (s.STRING_VALUE, '"'),
        SQL_QUOTED_IDENTIFIER_CASE: (s.INT32_BITMASK, CASE_INSENSITIVE),
        SQL_ALL_TABLES_ARE_SELECTABLE: (s.BOOL_VALUE, True),
        SQL_NULL_ORDERING: (s.INT32_BITMASK, NULLS_SORTED_AT_END),
        SQL_KEYWORDS: (s.STRING_LIST, KEYWORDS),
        SQL_SEARCH_STRING_ESCAPE: (s.STRING_VALUE, "\\"),
        SQL_SUPPORTS_COLUMN_ALIASING: (s.BOOL_VALUE, True),
        SQL_TRANSACTIONS_SUPPORTED: (s.BOOL_VALUE, False),
    }


def sql_info(codes: Iterable[int]) -> pa.Table:
    """One row per requested code the server knows (every known code when ``codes`` is empty)."""
    known = _values()
    asked = list(dict.fromkeys(codes))
    wanted = [c for c in asked if c in known] if asked else list(known)
    children: list[list[object]] = [[] for _ in range(6)]
    type_ids, offsets = [], []
    for code in wanted:
        type_code, value = known[code]
        type_ids.append(type_code)
        offsets.append(len(children[type_code]))
        children[type_code].append(value)
    union_type = s.SQL_INFO_VALUE
    arrays = [pa.array(values, type=union_type.field(i).type) for i, values in enumerate(children)]
    ids = pa.array(type_ids, type=pa.int8())
    offs = pa.array(offsets, type=pa.int32())
    # from_buffers keeps the children's declared (non-null) fields; UnionArray.from_dense would not
    value = pa.Array.from_buffers(union_type, len(wanted), [None, ids.buffers()[1], offs.buffers()[1]], children=arrays)
    return pa.Table.from_arrays([pa.array(wanted, type=pa.uint32()), value], schema=s.SQL_INFO)


__all__ = ["sql_info"]
