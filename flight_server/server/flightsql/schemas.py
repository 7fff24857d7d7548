"""The fixed result schemas of the Flight SQL metadata commands, field by field as the
specification (FlightSql.proto) and its reference implementations define them: names, types and
nullability. Clients such as the ADBC driver compare them exactly.
"""

from __future__ import annotations

import pyarrow as pa


def _utf8(name: str, nullable: bool = True) -> pa.Field:
    return pa.field(name, pa.utf8(), nullable=nullable)


CATALOGS = pa.schema([_utf8("catalog_name", False)])

DB_SCHEMAS = pa.schema([_utf8("catalog_name"), _utf8("db_schema_name", False)])

TABLES = pa.schema([
    _utf8("catalog_name"),
    _utf8("db_schema_name"),
    _utf8("table_name", False),
    _utf8("table_type", False),
])

TABLES_WITH_SCHEMA = TABLES.append(pa.field("table_schema", pa.binary(), nullable=False))

TABLE_TYPES = pa.schema([_utf8("table_type", False)])

PRIMARY_KEYS = pa.schema([
    _utf8("catalog_name"),
    _utf8("db_schema_name"),
    _utf8("table_name", False),
    _utf8("column_name", False),
    pa.field("key_sequence", pa.int32(), nullable=False),
    _utf8("key_name"),
])

#: GetImportedKeys, GetExportedKeys and GetCrossReference (always empty: Hudi has no foreign keys)
FOREIGN_KEYS = pa.schema([
    _utf8("pk_catalog_name"),
    _utf8("pk_db_schema_name"),
    _utf8("pk_table_name", False),
    _utf8("pk_column_name", False),
    _utf8("fk_catalog_name"),
    _utf8("fk_db_schema_name"),
    _utf8("fk_table_name", False),
    _utf8("fk_column_name", False),
    pa.field("key_sequence", pa.int32(), nullable=False),
    _utf8("fk_key_name"),
    _utf8("pk_key_name"),
    pa.field("update_rule", pa.uint8(), nullable=False),
    pa.field("delete_rule", pa.uint8(), nullable=False),
])

#: type codes of the ``value`` union of GetSqlInfo
STRING_VALUE, BOOL_VALUE, BIGINT_VALUE, INT32_BITMASK, STRING_LIST, INT32_TO_INT32_LIST_MAP = range(6)

SQL_INFO_VALUE = pa.dense_union([
    pa.field("string_value", pa.utf8(), nullable=False),
    pa.field("bool_value", pa.bool_(), nullable=False),
    pa.field("bigint_value", pa.int64(), nullable=False),
    pa.field("int32_bitmask", pa.int32(), nullable=False),
    pa.field("string_list", pa.list_(pa.utf8()), nullable=False),
    pa.field("int32_to_int32_list_map", pa.map_(pa.int32(), pa.list_(pa.int32())), nullable=False),
])

SQL_INFO = pa.schema([
    pa.field("info_name", pa.uint32(), nullable=False),
    pa.field("value", SQL_INFO_VALUE, nullable=False),
])

XDBC_TYPE_INFO = pa.schema([
    _utf8("type_name", False),
    pa.field("data_type", pa.int32(), nullable=False),
    pa.field("column_size", pa.int32()),
    _utf8("literal_prefix"),
    _utf8("literal_suffix"),
    pa.field("create_params", pa.list_(pa.field("item", pa.utf8(), nullable=False))),
    pa.field("nullable", pa.int32(), nullable=False),
    pa.field("case_sensitive", pa.bool_(), nullable=False),
    pa.field("searchable", pa.int32(), nullable=False),
    pa.field("unsigned_attribute", pa.bool_()),
    pa.field("fixed_prec_scale", pa.bool_(), nullable=False),
    pa.field("auto_increment", pa.bool_()),
    _utf8("local_type_name"),
    pa.field("minimum_scale", pa.int32()),
    pa.field("maximum_scale", pa.int32()),
    pa.field("sql_data_type", pa.int32(), nullable=False),
    pa.field("datetime_subcode", pa.int32()),
    pa.field("num_prec_radix", pa.int32()),
    pa.field("interval_precision", pa.int32()),
])

__all__ = [
    "CATALOGS",
    "DB_SCHEMAS",
    "FOREIGN_KEYS",
    "PRIMARY_KEYS",
    "SQL_INFO",
    "SQL_INFO_VALUE",
    "TABLES",
    "TABLES_WITH_SCHEMA",
    "TABLE_TYPES",
    "XDBC_TYPE_INFO",
]
